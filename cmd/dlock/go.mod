module github.com/dlock-go/dlock/cmd/dlock

go 1.26.8

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/dlock-go/dlock v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	golang.org/x/term v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

// The CLI is built from the same tree as the library.
replace github.com/dlock-go/dlock => ../..
