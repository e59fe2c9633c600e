# dlock — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
# Every module of the workspace, as directories.
MODULES = $(shell $(GO) list -m -f '{{.Dir}}')
# The packages of every module, as patterns that one go command takes in
# workspace mode, so that one scheduler builds and tests them all. The
# slowest packages come first, so that they start first (the end-to-end
# tests of cmd/dlock are the longest, then redislock's; the fault runs
# come after the rest, see race).
SLOW = ./cmd/dlock ./redislock ./faults ./bench ./redlock ./etcdlock ./postgreslock ./docs ./etcdlock/etcdtest
PACKAGES = $(SLOW) $(addsuffix /...,$(MODULES))
# How many builds and test binaries run at once: more than the 2 cores
# the machines have (the tests wait on servers and timers). At six, with
# every package compiled again for each clone, tests whose leases last a
# second saw them run out; with -trimpath the compiles come from the
# cache, and the packages use about a core and a half at four.
TEST_P ?= 4
# How many of one package's parallel tests (the conformance suites' cells)
# run at once: they wait on leases and timers, not on the CPU; at the
# default of 2 (the cores) redislock's suite took 85s, at 6 it takes 28s.
TEST_PARALLEL ?= 6
# More flags for go test, such as -v or -json.
TESTFLAGS ?=
# Builds without the clone's directory in them: a clone elsewhere (CI's
# fresh one) finds every package it has not changed in the build cache,
# instead of compiling all of them again.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STATICCHECK_VERSION = v0.8.2
STATICCHECK = $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: help demo test race deps staticcheck-dep vet bench fuzz lint soak matrix

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: deps ## watch workers contend for one lock (starts its own redis-server)
	$(GO) run ./cmd/dlock demo

.PHONY: install
install: ## build the dlock command, stamped with this clone's revision, into GOBIN (default: GOPATH/bin)
	$(GO) install -ldflags "-X main.version=$$(git describe --tags --match 'v[0-9]*' --always --dirty)" ./cmd/dlock
	@bin=$$($(GO) env GOBIN); bin=$${bin:-$$($(GO) env GOPATH)/bin}; echo "$$bin/dlock: $$("$$bin/dlock" version)"

deps: ## install redis-server and PostgreSQL when they are missing (Debian, apt-get)
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server with apt-get"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq -o DPkg::Lock::Timeout=600 redis-server >/dev/null; }
	@command -v redis-server >/dev/null
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing postgresql with apt-get"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq -o DPkg::Lock::Timeout=600 postgresql >/dev/null; }
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null

# staticcheck is built once per machine: again only when its version, or
# the Go it was built with, is not the one wanted (a staticcheck built with
# an older Go cannot read newer code).
staticcheck-dep:
	@v=$$($(STATICCHECK) -debug.version 2>/dev/null); \
	[[ "$$v" == *"($(STATICCHECK_VERSION:v%=%))"* && "$$v" == *"Go version: $$($(GO) env GOVERSION)"* ]] || { \
	  echo "installing staticcheck $(STATICCHECK_VERSION)"; \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }

vet: staticcheck-dep ## gofmt check, go vet and staticcheck over every module
	@out=$$(gofmt -l $(MODULES)); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@$(GO) vet $(PACKAGES)
	@$(STATICCHECK) $(PACKAGES)

# vet and the tests run at the same time; each one's output is printed
# whole when it ends, and either one failing fails test.
test: deps ## install what the tests need, then vet and run every module's tests with -race, at once
	@echo "vet and the tests run at once; each prints when it ends"
	@$(MAKE) --no-print-directory -j2 --output-sync=target vet race

race: deps ## run every module's tests with -race (what test runs beside vet)
	$(GO) test -race -count=1 -timeout 15m -p $(TEST_P) -parallel $(TEST_PARALLEL) $(TESTFLAGS) $(filter-out ./faults %/faults/...,$(PACKAGES))
	@# The fault runs after the rest, alone: their worker processes are the
	@# suite's heaviest part, and a harness the others starve sees no holds.
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) ./faults/...

matrix: deps ## run the conformance matrix on every backend and write README's table of what works where from it
	@for d in redislock redlock etcdlock postgreslock; do \
	  (cd $$d && DLOCK_MATRIX_UPDATE=1 $(GO) test -count=1 -run '^TestConformance$$' -v . | grep -A6 'dlocktest: the matrix on') || exit 1; done
	@sed -n '/matrix:begin/,/matrix:end/p' README.md

fuzz: deps ## run each fuzz test for 10s
	cd internal/redisnode && $(GO) test -run '^$$' -fuzz FuzzSlot -fuzztime 10s .
	cd keytmpl && $(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s .
	cd keytmpl && $(GO) test -run '^$$' -fuzz FuzzKeyInjective -fuzztime 10s .
	cd dlockotel && $(GO) test -run '^$$' -fuzz FuzzLockName -fuzztime 10s .

lint: vet ## same as vet

bench: deps ## run the side-by-side benchmark program (bench/RESULTS.md with every goal and the PostgreSQL section, REDLOCK.md, CLUSTER.md)
	cd bench && $(GO) run . -out RESULTS.md && $(GO) run . -postgres RESULTS.md && $(GO) run . -cluster CLUSTER.md

SECONDS ?= 600
soak: deps ## run the fault checker for SECONDS (default 600) on every backend and primitive, in two waves, and print the safety table
	faults/soak.sh $(SECONDS)
