#!/usr/bin/env bash
# make test: unit tests with -race, then the end-to-end tests against a real
# in-process Temporal server and real executor processes. Prints how long
# each phase took and the slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export GOTOOLCHAIN=local
$GO build -o bin/testreport ./internal/tools/testreport
report=./bin/testreport

phase() { printf '\n== %s\n' "$1"; }
t0=$(date +%s)

phase "unit tests (-race)"
mapfile -t unit < <($GO list ./... | grep -v -e /internal/e2e -e /internal/devstack -e /starter -e /internal/tools/bench)
u0=$(date +%s)
$GO test -race -count=1 -json "${unit[@]}" | $report -label unit
u1=$(date +%s)

phase "end-to-end tests (in-process Temporal, real executor processes)"
SLUICE_BIN="$PWD/bin/sluice" $GO test -count=1 -timeout 40m -json ./internal/e2e/... ./internal/devstack/... | $report -label e2e
e1=$(date +%s)

printf '\n== timings: unit %ss, e2e %ss, total %ss\n' $((u1-u0)) $((e1-u1)) $((e1-t0))
