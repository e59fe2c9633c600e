package dlock

import "fmt"

// CheckKey returns an error matching ErrInvalidKey when key is empty or
// longer than MaxKeyLen bytes. Drivers add the checks of their own layout.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, over the limit of %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	return nil
}
