module github.com/dlock-go/dlock/docs

go 1.26.0
