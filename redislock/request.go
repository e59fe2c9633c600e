package redislock

import "time"

// RequestTimeout bounds how long an acquisition waits for the reply to
// one request: TryLock returns within it (sooner when ctx ends), and Lock
// within its wait limit (dlock.WithWait) plus RequestTimeout, whatever the
// server does: a closed port, a server that accepts connections and never
// answers, one that answers late. The client's own timeouts and retries
// (go-redis: a 3s ReadTimeout, 3 retries) may be longer; they no longer
// set how long a caller waits.
const RequestTimeout = 2 * time.Second
