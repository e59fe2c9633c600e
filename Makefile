# dlock — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
# Every module of the workspace, as directories.
MODULES = $(shell $(GO) list -m -f '{{.Dir}}')
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STATICCHECK_VERSION = v0.8.2
STATICCHECK = $(shell $(GO) env GOPATH)/bin/staticcheck

.PHONY: help demo test deps staticcheck-dep vet bench fuzz lint soak matrix

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: deps ## watch workers contend for one lock (starts its own redis-server)
	$(GO) run ./cmd/dlock demo

.PHONY: install
install: ## build the dlock command, stamped with this clone's revision, into GOBIN (default: GOPATH/bin)
	$(GO) install -ldflags "-X main.version=$$(git describe --tags --match 'v[0-9]*' --always --dirty)" ./cmd/dlock
	@bin=$$($(GO) env GOBIN); bin=$${bin:-$$($(GO) env GOPATH)/bin}; echo "$$bin/dlock: $$("$$bin/dlock" version)"

deps: ## install redis-server when it is missing (Debian, apt-get)
	@command -v redis-server >/dev/null || { \
	  echo "installing redis-server with apt-get"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq redis-server >/dev/null; }
	@command -v redis-server >/dev/null

staticcheck-dep:
	@[ -x $(STATICCHECK) ] && $(STATICCHECK) -version | grep -q $(STATICCHECK_VERSION:v%=%) || { \
	  echo "installing staticcheck $(STATICCHECK_VERSION)"; \
	  $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }

vet: staticcheck-dep ## gofmt check, go vet and staticcheck over every module
	@out=$$(gofmt -l $(MODULES)); [ -z "$$out" ] || { echo "gofmt needed:"; echo "$$out"; exit 1; }
	@for d in $(MODULES); do (cd $$d && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

test: deps vet ## install what the tests need, vet, and run every module's tests with -race
	@for d in $(MODULES); do (cd $$d && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; done

matrix: deps ## run the conformance matrix on every backend and write README's table of what works where from it
	@for d in redislock redlock etcdlock; do \
	  (cd $$d && DLOCK_MATRIX_UPDATE=1 $(GO) test -count=1 -run '^TestConformance$$' -v . | grep -A6 'dlocktest: the matrix on') || exit 1; done
	@sed -n '/matrix:begin/,/matrix:end/p' README.md

fuzz: deps ## run each fuzz test for 10s
	cd internal/redisnode && $(GO) test -run '^$$' -fuzz FuzzSlot -fuzztime 10s .
	cd keytmpl && $(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 10s .
	cd keytmpl && $(GO) test -run '^$$' -fuzz FuzzKeyInjective -fuzztime 10s .
	cd dlockotel && $(GO) test -run '^$$' -fuzz FuzzLockName -fuzztime 10s .

lint: vet ## same as vet

bench: deps ## run the side-by-side benchmark program (bench/RESULTS.md, CLUSTER.md, REDLOCK.md)
	cd bench && $(GO) run . -out RESULTS.md && $(GO) run . -cluster CLUSTER.md && $(GO) run . -redlock REDLOCK.md

SECONDS ?= 600
soak: deps ## run the fault checker for SECONDS (default 600) on every backend and primitive at once and print the safety table
	faults/soak.sh $(SECONDS)
