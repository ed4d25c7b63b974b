#!/usr/bin/env bash
# Installs what the tests need beyond Go and the module proxy, from Debian:
# PostgreSQL's server binaries, which examples/ledger's tests start on a
# private port and data directory; OpenLDAP's slapd (and ldap-utils),
# which auth/ldap's tests start on a private port with a generated config
# (internal/slapdtest); and Chromium, which internal/console's tests drive
# headless (all fail in CI without them). Run as root (CI is);
# installs only what is missing.
set -euo pipefail

missing=()
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && ! command -v initdb >/dev/null; then
	missing+=(postgresql)
fi
if ! command -v slapd >/dev/null && [[ ! -x /usr/sbin/slapd ]]; then
	missing+=(slapd ldap-utils)
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
command -v slapd >/dev/null || [[ -x /usr/sbin/slapd ]] || {
	echo "install-deps: slapd installed but neither on PATH nor /usr/sbin/slapd" >&2
	exit 1
}
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || {
	echo "install-deps: chromium installed but not on PATH" >&2
	exit 1
}
