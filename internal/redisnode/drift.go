package redisnode

import (
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Drift is the clock-drift margin that both Redis drivers take off every
// lease: a server cannot expire a key before the holder's deadline
// unless its clock runs more than 1% fast (Redlock's rule).
var Drift = driver.Drift{Divisor: 100, Floor: 2 * time.Millisecond}
