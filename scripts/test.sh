#!/usr/bin/env bash
# The project's test command, the one README's "Run the tests" names and
# .ci/run runs: installs what the tests need beyond Go (scripts/install-deps.sh:
# Debian's PostgreSQL, which examples/ledger's tests start on a private port,
# and Chromium, which internal/console's browser tests drive headless),
# then runs every test with the race detector. Extra arguments go to go test
# (e.g. scripts/test.sh -run TestLedger).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
go test -race -count=1 "$@" ./...
