// Package docs holds dlock's guides (the Markdown files beside this one)
// and the test that keeps their Go code, and the README's, compiling.
//
// # Code blocks
//
// Every block fenced as ```go in README.md and docs/*.md is compiled and
// vetted by TestSnippets, in one of two forms.
//
// A block that starts with a package clause (after any comments) is a whole
// file. It is compiled as a package of its own, so it may be a main package.
//
// Any other block is the body of a function
//
//	func(ctx context.Context, rdb *redis.Client, locker *redislock.Locker) error
//
// It may use ctx, rdb and locker, or declare its own under those names; it
// must use every variable it declares, as Go requires; and it may return an
// error. It has no import lines: the packages it names are imported for it,
// by name, from the table in snippets_test.go (dlock, redislock, redis,
// clientv3, time, ...).
//
// Blocks fenced otherwise (```sh, ```text) are not checked. A compile error
// names the Markdown file and line.
package docs
