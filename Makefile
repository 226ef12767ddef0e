# varve: `make test` is what CI runs (.ci/run calls it with CI=true).
GO ?= go
PKGS ?= ./... ./cmd/varve/...

.PHONY: test test-under-load services vet bench lint fmt build soak-long failover-long chaos chaos-pg chaos-nats

# The race detector watches every package but SQLite's machine translation
# of C (modernc.org/sqlite/lib and modernc.org/libc): instrumenting that
# code, every memory access of which goes through unsafe pointers, made
# each SQLite call 5-10 times slower and found nothing it could judge; the
# Go side of the driver, database/sql and all of varve stay instrumented.
RACE ?= -race -gcflags='modernc.org/sqlite/lib=-race=false -d=checkptr=0' -gcflags='modernc.org/libc/...=-race=false -d=checkptr=0'

# Packages run side by side: each uses schemas, streams and prefixes of its
# own, waits for its own positions, and $all on PostgreSQL waits only for its
# own schema's writers, so they share the servers (with other processes too).
test: services lint
	$(GO) test $(RACE) -count=1 -timeout 18m $(PKGS)

# make test beside a CPU hog of twice the core count (busy shell loops, all
# ended when the run ends): the tests must hold on a busy CI machine.
test-under-load:
	@n=$$(( $$(nproc) * 2 )); pids=; \
	for i in $$(seq $$n); do (while :; do :; done) & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "test-under-load: $$n busy loops beside make test"; \
	$(MAKE) test

services:
	@bash scripts/services.sh

vet:
	$(GO) vet $(PKGS)

build:
	CGO_ENABLED=0 $(GO) build ./...

# Go benchmarks of every backend (servers needed for postgres and nats).
bench: services
	$(GO) test -run '^$$' -bench . -benchmem ./backend/...

# staticcheck at a pinned version, fetched by the go command (not a
# requirement of either module).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

# The long soaks of issue #25: in the browser (10 min sustained, discovery
# under 512 MiB, discovery until the module cannot grow its memory past
# V8's cap) and capped natively (1 hour sustained under a 512 MiB cap, then
# discovery as the out-of-memory stress under 128 MiB; a cgroup needs root,
# else RLIMIT_AS).
soak-long: build
	cd cmd/varve && $(GO) test -tags soaklong -count=1 -timeout 150m -run TestLong -v ./internal/soakweb
	cd cmd/varve && $(GO) run . soak --store memory --hard-limit 512MiB --memory-limit 384MiB --duration 1h
	cd cmd/varve && $(GO) run . soak --store memory --hard-limit 128MiB --mode discovery --memory-limit 0 --duration 30m || true

# The fail-over tests of issue #19 at length: 3 processes of a segmented
# subscription on PostgreSQL, NATS and SQLite with 400 SIGKILLs each, and
# the paused-holder test, 5 times.
failover-long: services
	VARVE_FAILOVER_EVENTS=6000 $(GO) test $(RACE) -count=1 -timeout 30m -run 'TestSegmentedKilled' -v ./subscription
	$(GO) test $(RACE) -count=5 -timeout 10m -run 'TestPausedHolder|TestRunActiveKilled' ./subscription

# PostgreSQL under faults (issue #39): 50 faults drawn from VARVE_CHAOS_SEED
# (fail-over, standby killed, primary paused) under a synchronous standby,
# the checker of internal/verify (with a segmented delivery and a projection)
# through VARVE_CHAOS_FAULTS more (default 50),
# and the negative proof: asynchronous commit loses acknowledged appends.
chaos: chaos-pg chaos-nats

chaos-pg:
	VARVE_CHAOS=long $(GO) test -count=1 -timeout 40m -run 'TestChaosLong|TestVerifyUnderFaults|TestAsynchronousLosesAcknowledged' -v ./internal/pgchaos

# NATS under faults (issue #39): on a 3-node JetStream cluster of real
# server processes (go.mod's server, and the installed nats-server binary
# where there is one), an R3 event stream, the checker of internal/verify
# through VARVE_CHAOS_FAULTS (50) faults drawn from VARVE_CHAOS_SEED:
# SIGKILL and restart of the stream's leader or a follower, SIGSTOP of
# either past the election timeout.
chaos-nats:
	VARVE_CHAOS=long $(GO) test -count=1 -timeout 60m -run 'TestChaosLong' -v ./internal/natschaos
