package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestInspect(t *testing.T) {
	ctx := context.Background()
	l := newLocker(t, client(t), dlock.WithPrefix("inspect"))

	info, err := l.Inspect(ctx, "job")
	if err != nil || info != (dlock.Info{Key: "job"}) {
		t.Fatalf("Inspect of a free key = %+v, %v; want only the key", info, err)
	}

	for _, key := range []string{"plain", "a/b%c"} {
		lk, err := l.TryLock(ctx, key, dlock.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		info, err = l.Inspect(ctx, key)
		if err != nil || !info.Held || info.Holds != 1 || info.Owner != "" || info.Fence != lk.Fence() || info.Key != key ||
			info.TTL <= 0 || info.TTL > 5*time.Second || !info.FenceKnown || info.WaitersKnown {
			t.Fatalf("Inspect of a plain lock on %q = %+v, %v; want held, 1 hold, fence %d (known), a TTL in (0, 5s], waiters unknown", key, info, err, lk.Fence())
		}
		if err := lk.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if info, err = l.Inspect(ctx, key); err != nil || info.Held || info.Fence != 0 || info.FenceKnown {
			t.Fatalf("Inspect after Unlock = %+v, %v; want free, fence unknown", info, err)
		}
	}

	a, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-7"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-7"), dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info, err = l.Inspect(ctx, "owned")
	if err != nil || !info.Held || info.Holds != 2 || info.Owner != "deploy-7" || info.Fence != b.Fence() || info.TTL <= 10*time.Second {
		t.Fatalf("Inspect of an owner's two holds = %+v, %v; want 2 holds of deploy-7, fence %d, the 20s lease", info, err, b.Fence())
	}
	a.Unlock(ctx)
	b.Unlock(ctx)

	if _, err := l.Inspect(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("Inspect of an empty key: %v, want ErrInvalidKey", err)
	}
	closed, err := etcdlock.New(client(t))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if _, err := closed.Inspect(ctx, "k"); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Inspect after Close: %v, want ErrClosed", err)
	}
	if _, err := closed.List(ctx, ""); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
	if _, err := closed.ForceUnlock(ctx, "k"); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("ForceUnlock after Close: %v, want ErrClosed", err)
	}
}

// A hold written without a lease (by another program) never expires:
// Inspect says so with a TTL of -1.
func TestInspectNoLease(t *testing.T) {
	ctx := context.Background()
	cli := client(t)
	l := newLocker(t, cli, dlock.WithPrefix("inspect-nolease"))
	if _, err := cli.Put(ctx, l.RangeOf("forever")+"sometoken", ""); err != nil {
		t.Fatal(err)
	}
	info, err := l.Inspect(ctx, "forever")
	if err != nil || !info.Held || info.TTL != -1 || info.Holds != 1 {
		t.Fatalf("Inspect of a hold without lease = %+v, %v; want held with TTL -1", info, err)
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	cli := client(t)
	l := newLocker(t, cli, dlock.WithPrefix("list"))
	if infos, err := l.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Fatalf("List with nothing held = %+v, %v", infos, err)
	}
	fences := map[string]uint64{}
	for _, k := range []string{"deploy", "cron:b", "cron:a", "a/b", "a%c", "ab"} {
		lk, err := l.TryLock(ctx, k, dlock.WithTTL(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		fences[k] = lk.Fence()
	}
	for range 2 {
		if _, err := l.TryLock(ctx, "owned", dlock.WithOwner("job-1")); err != nil {
			t.Fatal(err)
		}
	}
	// Keys of other programs in the namespace are not locks.
	for _, k := range []string{"list/lock/stray", "list/lock/bad%zz/token", "list/lock/x/y/z"} {
		if _, err := cli.Put(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}

	infos, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a%c", "a/b", "ab", "cron:a", "cron:b", "deploy", "owned"}
	if got := keysOf(infos); !slices.Equal(got, want) {
		t.Fatalf("List() keys = %q, want %q", got, want)
	}
	for _, i := range infos {
		if !i.Held || i.TTL <= 0 {
			t.Errorf("List(): %+v: want held with a lease", i)
		}
		if f, ok := fences[i.Key]; ok && (i.Fence != f || i.Holds != 1 || i.Owner != "") {
			t.Errorf("List(): %+v: want fence %d, 1 hold, no owner", i, f)
		}
		if i.Key == "owned" && (i.Holds != 2 || i.Owner != "job-1") {
			t.Errorf("List(): %+v: want 2 holds of job-1", i)
		}
	}

	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"*", want},
		{"cron:*", []string{"cron:a", "cron:b"}},
		{"a/*", []string{"a/b"}},
		{"a?c", []string{"a%c"}},
		{"a*", []string{"a%c", "a/b", "ab"}},
		{"[cd]*", []string{"cron:a", "cron:b", "deploy"}},
		{"cron:[^a]", []string{"cron:b"}},
		{"deploy", []string{"deploy"}},
		{`\*`, nil},
		{"none*", nil},
	} {
		infos, err := l.List(ctx, tc.pattern)
		if got := keysOf(infos); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("List(%q) = %q, %v; want %q", tc.pattern, got, err, tc.want)
		}
	}
	if _, err := l.List(ctx, "cron:[ab"); !errors.Is(err, path.ErrBadPattern) {
		t.Errorf("List of an unclosed set: %v, want path.ErrBadPattern", err)
	}
}

func keysOf(infos []dlock.Info) []string {
	var keys []string
	for _, i := range infos {
		keys = append(keys, i.Key)
	}
	return keys
}

// List reads in pages: a lock whose holds span page boundaries is counted
// whole, and every lock of a range larger than a page is listed.
func TestListPages(t *testing.T) {
	ctx := context.Background()
	cli := client(t)
	l := newLocker(t, cli, dlock.WithPrefix("pages"))
	g, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Revoke(context.Background(), g.ID)
	// Holds written as the driver writes them: 700 holds of one owner
	// and 600 plain locks, over 2.5 pages of 500 keys.
	const owned, plain = 700, 600
	var names []string
	for i := range owned {
		names = append(names, l.RangeOf("big")+fmt.Sprintf("tok%04d", i))
	}
	for i := range plain {
		names = append(names, l.RangeOf(fmt.Sprintf("k%04d", i))+"tok")
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(names); i += 8 {
				value := ""
				if i < owned {
					value = "bulk"
				}
				if _, err := cli.Put(ctx, names[i], value, clientv3.WithLease(g.ID)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	infos, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != plain+1 || infos[0].Key != "big" || infos[0].Holds != owned || infos[0].Owner != "bulk" {
		t.Fatalf("List over pages: %d locks, first %+v; want %d locks, first big with %d holds of bulk", len(infos), infos[0], plain+1, owned)
	}
	for i, info := range infos[1:] {
		if want := fmt.Sprintf("k%04d", i); info.Key != want || info.Holds != 1 || info.TTL <= 0 {
			t.Fatalf("List over pages: lock %d = %+v, want %s with one hold", i+1, info, want)
		}
	}
	if infos, err := l.List(ctx, "k05*"); err != nil || len(infos) != 100 {
		t.Fatalf("List(k05*) = %d locks, %v; want 100", len(infos), err)
	}
	info, err := l.Inspect(ctx, "big")
	if err != nil || info.Holds != owned || info.Owner != "bulk" || info.TTL <= 0 {
		t.Fatalf("Inspect of a lock with %d holds = %+v, %v", owned, info, err)
	}
}

func TestForceUnlock(t *testing.T) {
	ctx := context.Background()
	cli := client(t)
	l := newLocker(t, cli, dlock.WithPrefix("force"))
	other := newLocker(t, cli, dlock.WithPrefix("force"))

	lk, err := l.TryLock(ctx, "stuck", dlock.WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A waiter on another Locker takes the lock once it is cleared.
	got := make(chan error, 1)
	var next dlock.Lock
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var err error
		next, err = other.Lock(wctx, "stuck")
		got <- err
	}()

	info, err := l.ForceUnlock(ctx, "stuck")
	if err != nil || !info.Held || info.Holds != 1 || info.Fence != lk.Fence() || info.Owner != "" || info.TTL <= 10*time.Second {
		t.Fatalf("ForceUnlock = %+v, %v; want the deleted plain hold, fence %d, its 20s lease", info, err, lk.Fence())
	}
	select {
	case <-lk.Done():
		if !errors.Is(lk.Err(), dlock.ErrOwnershipLost) {
			t.Fatalf("the evicted holder's Err() = %v, want ErrOwnershipLost", lk.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted holder never learned it lost the lock")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter did not get the cleared lock: %v", err)
		}
		if next.Fence() <= lk.Fence() {
			t.Fatalf("the waiter's fence %d is not above the evicted holder's %d", next.Fence(), lk.Fence())
		}
		next.Unlock(ctx)
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter never acquired the cleared lock")
	}

	if _, err := l.ForceUnlock(ctx, "stuck"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("ForceUnlock of a free lock: %v, want ErrNotHeld", err)
	}

	for range 3 {
		if _, err := l.TryLock(ctx, "owned", dlock.WithOwner("deploy-9")); err != nil {
			t.Fatal(err)
		}
	}
	info, err = l.ForceUnlock(ctx, "owned")
	if err != nil || info.Holds != 3 || info.Owner != "deploy-9" {
		t.Fatalf("ForceUnlock of an owner's three holds = %+v, %v", info, err)
	}
	if info, err := l.Inspect(ctx, "owned"); err != nil || info.Held {
		t.Fatalf("Inspect after ForceUnlock = %+v, %v; want free", info, err)
	}
	if _, err := l.ForceUnlock(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Errorf("ForceUnlock of an empty key: %v, want ErrInvalidKey", err)
	}
}
