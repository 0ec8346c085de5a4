# The whole test suite, against every store: memory, SQLite and a throwaway PostgreSQL 15 that
# scripts/with-postgres.sh starts (and stops, even when tests fail) with TEST_DATABASE_URL set.
# The console's browser tests need Chromium: scripts/ensure-chromium.sh installs it when missing.
GO        ?= go
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: test test-short test-browser bench bench-scale build vet engine worker chaos

test:
	$(GO) vet ./...
	scripts/ensure-chromium.sh
	scripts/with-postgres.sh $(GO) test $(TESTFLAGS) ./...

# Without Postgres: its tests skip.
test-short:
	$(GO) test $(TESTFLAGS) ./...

# The console in a real headless Chromium only; screenshots go to $$JOBS_SCREENSHOTS if set.
test-browser:
	scripts/ensure-chromium.sh
	scripts/with-postgres.sh $(GO) test $(TESTFLAGS) -run TestBrowser -v ./api/ui/

# Benchmarks against the machine's commit ceiling and peers; writes BENCHMARKS.md.
bench:
	scripts/with-postgres.sh bench/run.sh

# Scale: a million suspended runs, and two engine processes on one Postgres (about 15 minutes on
# 2 cores); writes bench/out/scale.md and bench/out/multi.md. `make bench` runs the first at
# 100,000 suspended runs.
bench-scale:
	scripts/with-postgres.sh bench/run-scale.sh

# The long chaos run (minutes per store, SQLite and Postgres on a throwaway cluster the harness
# starts and crashes once); writes CHAOS.md. `make test` includes a short SQLite run.
chaos:
	$(GO) run ./internal/chaos/cmd/chaos -out CHAOS.md

build:
	$(GO) build -o bin/engine ./cmd/engine
	$(GO) build -o bin/worker ./cmd/worker

engine:
	$(GO) run ./cmd/engine

vet:
	$(GO) vet ./...
