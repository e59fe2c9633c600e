// Package redisnode is what the Redis drivers share about one Redis node:
// the layout of a lock's keys, the scripts and how they are sent, the
// coalescer that pipelines a Locker's concurrent commands, and how a
// lock's state on a node is read, listed and described.
package redisnode
