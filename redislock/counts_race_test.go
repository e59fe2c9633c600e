//go:build race

package redislock

// allocMargin: the race detector's build allocates two or three more
// per cycle, give or take one.
const allocMargin = 4
