package driver

import (
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/settings"
)

// CheckKey returns an error matching dlock.ErrInvalidKey when key is empty
// or longer than dlock.MaxKeyLen bytes. Drivers add the checks of their
// own layout.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", dlock.ErrInvalidKey)
	case len(key) > dlock.MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, over the limit of %d", dlock.ErrInvalidKey, len(key), dlock.MaxKeyLen)
	}
	return nil
}

// NewToken returns 128 random bits from crypto/rand, as 22 characters of
// unpadded URL-safe base64: the token of one acquisition.
func NewToken() string { return settings.NewToken() }
