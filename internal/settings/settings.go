// Package settings holds what package dlock and package driver share
// without showing it to either's users: the token generator and the bound
// of a detached release.
package settings

import "time"

// ReleaseTimeout bounds a release made on a context detached from the
// caller's.
const ReleaseTimeout = 5 * time.Second
