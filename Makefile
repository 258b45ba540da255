# One-line targets; longer logic lives in scripts/.
GO      ?= go
BIN     := bin
DATA    ?= $(CURDIR)/data
LAYOUT  ?= 2m-2s-sync

.PHONY: all build run run-cluster test race lint fuzz bench bench-matrix failover-bench clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
	scripts/run.sh $(BIN) $(DATA)

run-cluster: build
	scripts/run-cluster.sh $(BIN) $(LAYOUT)

test: lint
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 ./client/interop/   # the official client races with itself: no -race here

race:
	$(GO) test -race -count=1 ./...

lint:
	scripts/lint.sh

fuzz:
	scripts/fuzz.sh $(FUZZTIME)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

bench-matrix:
	scripts/bench.sh $(BENCH_OUT)

failover-bench:
	scripts/failover-bench.sh $(or $(KILLS),20) $(FAILOVER_OUT)

clean:
	rm -rf $(BIN)
