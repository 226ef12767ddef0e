# varve: `make test` is what CI runs (.ci/run calls it with CI=true).
GO ?= go
PKGS ?= ./...

.PHONY: test services vet bench lint fmt build

# -p 1: the packages share one PostgreSQL and one nats-server; run side by
# side, one package's open transactions hold back another's $all, and the
# machine's nats-server 2.9 under the load of two packages at once has left
# requests unanswered for minutes (seen with this and the previous code).
test: services vet
	$(GO) test -race -count=1 -p 1 -timeout 18m $(PKGS)

services:
	@bash scripts/services.sh

vet:
	$(GO) vet $(PKGS)

build:
	CGO_ENABLED=0 $(GO) build ./...

# Go benchmarks of every backend (servers needed for postgres and nats).
bench: services
	$(GO) test -run '^$$' -bench . -benchmem ./backend/...

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')
