package main

import "strings"

// urlForm is what a --redis URL names.
type urlForm int

const (
	formServer   urlForm = iota // one server
	formSentinel                // a master found through Sentinel
	formCluster                 // a Cluster
	formRedlock                 // independent masters, for Redlock
)

// redisSchemes are the schemes --redis takes, and what each names. The
// parser, the error of a URL without a scheme and the tests all read this
// one list.
var redisSchemes = []struct {
	scheme string
	form   urlForm
}{
	{"redis", formServer},
	{"rediss", formServer},
	{"unix", formServer},
	{"redis+sentinel", formSentinel},
	{"rediss+sentinel", formSentinel},
	{"redis+cluster", formCluster},
	{"rediss+cluster", formCluster},
	{"redis+redlock", formRedlock},
	{"rediss+redlock", formRedlock},
}

// schemeForm returns the form of the URL scheme, and whether dlock
// knows the scheme.
func schemeForm(scheme string) (urlForm, bool) {
	for _, s := range redisSchemes {
		if s.scheme == scheme {
			return s.form, true
		}
	}
	return 0, false
}

// schemeList lists the schemes for a message: "redis://, rediss://, ...
// or rediss+redlock://".
func schemeList() string {
	var b strings.Builder
	for i, s := range redisSchemes {
		switch {
		case i == len(redisSchemes)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(s.scheme + "://")
	}
	return b.String()
}
