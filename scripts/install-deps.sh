#!/usr/bin/env bash
# Installs what the tests need beyond Go and the module proxy, from Debian:
# PostgreSQL's server binaries, which examples/ledger's tests start on a
# private port and data directory, and Chromium, which internal/console's
# tests drive headless (both fail in CI without them). Run as root (CI is);
# installs only what is missing.
set -euo pipefail

missing=()
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null; then
	missing+=(postgresql)
fi
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
	missing+=(chromium fonts-liberation) # fonts: screenshots with legible text
fi
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null || {
	echo "install-deps: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
}
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || {
	echo "install-deps: chromium installed but not on PATH" >&2
	exit 1
}
