// Package rediswait is how the Redis drivers wait for a lock to change
// hands: the subscriber that hears releases' grants and a watched lock's
// changes (one connection per Cluster shard or per Redlock node, shared
// by a Locker's waiters and watches), and the watch of a lock built on it.
package rediswait
