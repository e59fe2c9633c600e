package driver

import (
	"fmt"

	"github.com/dlock-go/dlock"
)

// CheckLimit returns nil when limit is a valid number of permits, else an
// error matching dlock.ErrInvalidOption. A driver's TryAcquire and Acquire
// call it before anything else.
func CheckLimit(limit int) error {
	if limit < 1 || limit > dlock.MaxLimit {
		return fmt.Errorf("%w: a semaphore limit must be from 1 to %d, got %d", dlock.ErrInvalidOption, dlock.MaxLimit, limit)
	}
	return nil
}
