// Package observe is the vocabulary of a Locker's events: what an
// [Observer], set with dlock.WithObserver, is told about every acquisition
// and how it ended, every release, renewal, loss and wake-up. Package
// dlockotel (module github.com/dlock-go/dlock/dlockotel) is one Observer:
// it turns the events into OpenTelemetry metrics and spans.
//
//	locker, err := redislock.New(rdb, dlock.WithObserver(observe.Func(func(ctx context.Context, e observe.Event) {
//		if e.Kind == observe.Lost {
//			log.Printf("lost %s after %v: %v", e.Key, e.Held, e.Err)
//		}
//	})))
package observe
