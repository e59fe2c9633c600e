//go:build race

package redislock

// allocMargin: the race detector's build allocates two or three more
// per cycle, give or take one.
const allocMargin = 4

// allocRuns: the race detector's build of sync.Pool drops a quarter of
// what is put back, at random, and a cycle that finds a pool empty makes
// its objects anew. Averaged over 20 cycles, the allocations of a waiting
// Lock were 17 to 20 (1 run in 20 over the margin); over 1,000 they stay
// near their mean.
const allocRuns = 1000
