// Package etcdlock is the etcd driver of dlock.
package etcdlock
