#!/usr/bin/env bash
# Installs what the tests need beyond Go and the module proxy: Debian's
# PostgreSQL server binaries, which examples/ledger's tests start on a
# private port and data directory (they fail in CI without them). Run as
# root (CI is); does nothing when initdb is already there.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq postgresql >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || {
	echo "install-deps: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
}
