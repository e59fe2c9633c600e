package redisnode

import (
	"errors"
	"strconv"
	"strings"
)

// Grant is a release's wake-up of a waiter: the lock was handed to the
// waiter's entry of its attempt number Attempt, with Fence (zero when the
// waiter asked for none).
type Grant struct {
	Attempt int64
	Fence   uint64
}

// ParseGrant reads a release's message "<token> <attempt> <fence>".
func ParseGrant(payload string) (token string, g Grant) {
	token, rest, _ := strings.Cut(payload, " ")
	a, f, _ := strings.Cut(rest, " ")
	g.Attempt, _ = strconv.ParseInt(a, 10, 64)
	g.Fence, _ = strconv.ParseUint(f, 10, 64)
	return token, g
}

// IsTimeout reports whether err is a network timeout: on a subscription
// connection, a silence to answer with a ping.
func IsTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
