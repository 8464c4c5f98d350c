# sluice — `make` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
export GOTOOLCHAIN := local
export GOFLAGS     := -buildvcs=false
BIN      := bin/sluice
TOOLS    := $(CURDIR)/.tools
GOLANGCI_LINT_VERSION := v2.15.0
WORKFLOWCHECK_VERSION := v0.6.0

# Packages that link the embedded Temporal server are tested without -race
# (instrumenting the whole server costs more than it finds); everything else
# runs with -race.
E2E_PKGS  := ./internal/e2e/... ./internal/devstack/...
UNIT_PKGS  = $(shell $(GO) list ./... | grep -v -e /internal/e2e -e /internal/devstack -e /starter -e /internal/tools/bench)

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/sluice (static: container builds run it as their meta and sluice commands)
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.commit=$$(git rev-parse HEAD 2>/dev/null)" -o $(BIN) ./starter

.PHONY: run
run: build ## run everything on this machine: Temporal + Web UI (:8233), API (:8080), controller, local executor
	./$(BIN) dev

.PHONY: test
test: build ## unit tests (-race) and end-to-end tests on a real in-process Temporal server; prints the slowest parts
	@./scripts/test.sh

.PHONY: test-unit
test-unit: ## unit tests only (-race)
	$(GO) test -race -count=1 $(UNIT_PKGS)

.PHONY: test-e2e
test-e2e: build ## end-to-end tests only
	SLUICE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 30m $(E2E_PKGS)

.PHONY: cluster-test
cluster-test: build ## the production topology as processes on PostgreSQL (COUNT=10 runs it ten times)
	SLUICE_BIN=$(CURDIR)/$(BIN) $(GO) test -count=$${COUNT:-1} -timeout 60m -run 'TestClusterOnPostgres$$' -v ./internal/e2e/

.PHONY: mutate
mutate: ## mutation test: break one behaviour at a time (internal/tools/mutate/mutants.txt), print what the unit tests caught and the score (slow; not in CI; ONLY=regex)
	$(GO) run ./internal/tools/mutate $(if $(ONLY),-only '$(ONLY)')

.PHONY: fuzz
fuzz: ## fuzz the parsers for FUZZTIME each (default 1m)
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$${FUZZTIME:-1m} ./pipeline/
	$(GO) test -run='^$$' -fuzz=FuzzParseRule -fuzztime=$${FUZZTIME:-1m} ./queue/
	$(GO) test -run='^$$' -fuzz=FuzzParseGitHub -fuzztime=$${FUZZTIME:-1m} ./scm/
	$(GO) test -run='^$$' -fuzz=FuzzParseGitLab -fuzztime=$${FUZZTIME:-1m} ./scm/

$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(TOOLS)/workflowcheck:
	GOBIN=$(TOOLS) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

.PHONY: lint
lint: $(TOOLS)/golangci-lint $(TOOLS)/workflowcheck ## golangci-lint (pinned, installed into .tools) and workflowcheck
	$(TOOLS)/golangci-lint run ./...
	$(TOOLS)/workflowcheck ./workflows/...

.PHONY: bench
bench: build ## benchmarks against bare Temporal baselines (no-op, and checkout + sh) in the same run (QUICK=1 short run; BENCH_ARGS="-only latency -trace")
	SLUICE_BIN=$(CURDIR)/$(BIN) $(GO) run ./internal/tools/bench $(if $(QUICK),-quick) $(BENCH_ARGS)

.PHONY: chaos
chaos: build ## kill executors, the controller and the Temporal server during 100 events; check nothing is lost (DB=postgres: Temporal on PostgreSQL; CHAOS_ARGS for more flags)
	SLUICE_BIN=$(CURDIR)/$(BIN) $(GO) run ./internal/tools/chaos $(if $(DB),-db $(DB)) $(CHAOS_ARGS)

.PHONY: tidy
tidy: ## go mod tidy and gofmt
	$(GO) mod tidy
	gofmt -w $$(git ls-files '*.go')

.PHONY: compose-check
compose-check: ## validate docker-compose.yml with docker compose (or docker-compose); no engine needed
	@export SLUICE_TOKENS_FILE=/dev/null SLUICE_EXECUTOR_1_TOKEN=check SLUICE_EXECUTOR_2_TOKEN=check SLUICE_CONTROLLER_TOKEN=check SLUICE_GITHUB_SECRET=check SLUICE_GITLAB_SECRET=check SLUICE_SECRET_KEY=check; \
	if docker compose version >/dev/null 2>&1; then docker compose config --quiet && echo "docker-compose.yml: ok (docker compose)"; \
	elif command -v docker-compose >/dev/null 2>&1; then docker-compose config --quiet && echo "docker-compose.yml: ok (docker-compose)"; \
	else echo "no docker compose found: skipping (install the compose plugin, or Debian's docker-compose)"; fi

.PHONY: clean
clean: ## remove build output and the dev data directory
	rm -rf bin .sluice
