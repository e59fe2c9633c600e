package postgreslock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/postgreslock"
)

// other is the setting of an option of another driver.
type other struct{}

func (other) String() string { return "other.WithSetting()" }

// withOther is an option of another driver.
func withOther() dlock.Option {
	return func(o *dlock.Options) { driver.SetOwn(o, func(*other) {}) }
}

// Bad options are refused by New, and the driver's own options apply to
// a Locker only; an option of another driver is refused too.
func TestOptions(t *testing.T) {
	p := pool(t, "")
	for name, opts := range map[string][]dlock.Option{
		"a table name with a capital": {postgreslock.WithTable("Locks")},
		"a table name with a quote":   {postgreslock.WithTable(`dlock"`)},
		"WithListen(nil)":             {postgreslock.WithListen(nil)},
		"fair mode":                   {dlock.WithFair(true)},
		"another driver's option":     {withOther()},
	} {
		if l, err := postgreslock.New(p, opts...); !errors.Is(err, dlock.ErrInvalidOption) {
			if l != nil {
				l.Close()
			}
			t.Errorf("New with %s: %v, want an error matching ErrInvalidOption", name, err)
		}
	}
	if _, err := postgreslock.New(nil); !errors.Is(err, dlock.ErrNilClient) {
		t.Errorf("New(nil): %v, want an error matching ErrNilClient", err)
	}
	l := newLocker(t, p, postgreslock.WithTable(postgreslock.DefaultTable))
	ctx := context.Background()
	for name, opt := range map[string]dlock.Option{
		"WithTable":               postgreslock.WithTable(postgreslock.DefaultTable),
		"WithListen":              postgreslock.WithListen(p.Config().ConnConfig),
		"another driver's option": withOther(),
	} {
		if lk, err := l.TryLock(ctx, "options:"+name, opt); !errors.Is(err, dlock.ErrInvalidOption) {
			if lk != nil {
				lk.Unlock(ctx)
			}
			t.Errorf("TryLock with %s: %v, want an error matching ErrInvalidOption", name, err)
		}
	}
	lk, err := l.TryLock(ctx, "options:none")
	if err != nil {
		t.Fatalf("TryLock on a Locker made with WithTable(%q): %v", postgreslock.DefaultTable, err)
	}
	if err := lk.Unlock(ctx); err != nil {
		t.Error(err)
	}
}
