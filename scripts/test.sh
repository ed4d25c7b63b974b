#!/usr/bin/env bash
# The project's test command, the one README's "Run the tests" names and
# .ci/run runs: installs what the tests need beyond Go (scripts/install-deps.sh:
# Debian's PostgreSQL, which examples/ledger's tests start on a private port,
# OpenLDAP's slapd, which auth/ldap's tests start the same way, and
# Chromium, which internal/console's browser tests drive headless),
# then runs every test with the race detector. Extra arguments go to go test
# (e.g. scripts/test.sh -run TestLedger).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
# meta/raft's race tests take about 3 minutes on an idle 2-core machine
# and over 10 (go test's default limit) on a loaded one.
go test -race -count=1 -timeout 20m "$@" ./...
