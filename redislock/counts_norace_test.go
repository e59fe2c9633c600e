//go:build !race

package redislock

// allocMargin: a cycle's allocations move by one at most.
const allocMargin = 1

// allocRuns: the cycles the allocations are averaged over.
const allocRuns = 20
