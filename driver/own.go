package driver

import (
	"fmt"
	"path"
	"reflect"

	"github.com/dlock-go/dlock"
)

// A driver may define options of its own (redislock.WithReplicaAck,
// redlock.WithNodeTimeout), which a program passes among dlock's. They
// keep their settings in [dlock.Options].Driver, in a type of the
// driver's, whose String names the option for errors; the driver reads
// them with [Own] when it resolves its options, and keeps them in its
// Locker's Options, so that a call that passes another driver's option is
// refused by [SetOwn].

// SetOwn is the body of a driver's own option: it applies set to the
// driver's settings in o, of type T, starting from the zero T when o holds
// none. When o holds the settings of another driver, the option is
// refused (see [dlock.Options.Reject]) with an error matching
// dlock.ErrInvalidOption, and o does not change.
func SetOwn[T any](o *dlock.Options, set func(*T)) {
	var s T
	switch d := o.Driver.(type) {
	case nil:
	case T:
		s = d
	default:
		o.Reject(fmt.Errorf("%w: an option of %s given to %s", dlock.ErrInvalidOption, pkgOf(reflect.TypeFor[T]()), pkgOf(reflect.TypeOf(d))))
		return
	}
	set(&s)
	o.Driver = s
}

// Own returns the driver's own settings in o, of type T: the zero T when o
// holds none. When o holds another driver's settings, it returns the
// error of [Foreign].
func Own[T any](o dlock.Options) (T, error) {
	var zero T
	switch d := o.Driver.(type) {
	case nil:
		return zero, nil
	case T:
		return d, nil
	}
	return zero, Foreign(o)
}

// Foreign returns nil when o holds no driver's own settings, else an error
// matching dlock.ErrInvalidOption that names the driver they belong to: a
// driver without options of its own calls it where it resolves options.
func Foreign(o dlock.Options) error {
	if o.Driver == nil {
		return nil
	}
	return fmt.Errorf("%w: %v is an option of %s", dlock.ErrInvalidOption, o.Driver, pkgOf(reflect.TypeOf(o.Driver)))
}

// pkgOf names the package of t: "redislock".
func pkgOf(t reflect.Type) string { return path.Base(t.PkgPath()) }
