package redisnode

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Names collects the names of keys found by SCAN on one or more nodes, at
// once: its methods are safe for concurrent use. The zero Names is empty
// and ready.
type Names struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Scan walks c's keyspace with SCAN, never blocking the server as KEYS
// would, and adds the keys under head that match glob, without head.
func (n *Names) Scan(ctx context.Context, c redis.Cmdable, head string, glob driver.Pattern) error {
	match := glob.Under(head)
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 500).Result()
		if err != nil {
			return err
		}
		n.mu.Lock()
		if n.seen == nil {
			n.seen = make(map[string]bool)
		}
		for _, k := range keys {
			n.seen[strings.TrimPrefix(k, head)] = true
		}
		n.mu.Unlock()
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// Sorted returns the names found, each once, sorted.
func (n *Names) Sorted() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.seen))
	for k := range n.seen {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Held inspects each of keys in turn and returns what it finds of those
// that are held, in the order of keys. A key the Locker refuses as
// invalid was written by another program in its namespace, and is passed
// over.
func Held(ctx context.Context, keys []string, inspect func(context.Context, string) (dlock.Info, error)) ([]dlock.Info, error) {
	infos := make([]dlock.Info, 0, len(keys))
	for _, k := range keys {
		info, err := inspect(ctx, k)
		if errors.Is(err, dlock.ErrInvalidKey) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if info.Held {
			infos = append(infos, info)
		}
	}
	return infos, nil
}
