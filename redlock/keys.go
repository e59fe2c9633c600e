package redlock

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// keys are the Redis keys of one lock, the same on every node, and laid
// out as package redislock lays them out, so that a tool that reads one
// server (dlock status, redis-cli) finds them where it looks: the lock
// key of K is "<prefix>:lock:<K>"; its siblings are "{T}:<lock key>:<s>"
// when the lock key has a hash tag T, else "{<lock key>}:<s>", with s one
// of m (the fence counter), h (an owner's holds), q (the wait queue;
// "<q>:<subscriber id>" is the channel that wakes one Locker's waiters)
// and w (the waiters' entries).
type keys struct {
	lock, meta, holds, queue, waiters string
	args                              []any // the five, boxed once, in the scripts' order
}

func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: prefix %q contains a brace; hash tags belong in keys", dlock.ErrInvalidOption, prefix)
	}
	return nil
}

func keysOf(prefix, key string) (keys, error) {
	if err := driver.CheckKey(key); err != nil {
		return keys{}, err
	}
	lock := prefix + ":lock:" + key
	base := "{" + lock + "}"
	if tag, ok := hashTag(lock); ok {
		base = "{" + tag + "}:" + lock
	} else if strings.IndexByte(lock, '}') >= 0 {
		return keys{}, fmt.Errorf("%w: %q has a '}' but no hash tag", dlock.ErrInvalidKey, key)
	}
	k := keys{lock: lock, meta: base + ":m", holds: base + ":h", queue: base + ":q", waiters: base + ":w"}
	k.args = []any{k.lock, k.meta, k.holds, k.queue, k.waiters}
	return k, nil
}

// hashTag returns the hash tag of a Redis key, by Redis Cluster's rule.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return "", false
	}
	return key[open+1 : open+1+end], true
}
