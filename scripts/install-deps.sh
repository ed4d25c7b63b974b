#!/usr/bin/env bash
# Installs what the tests need beyond Go and the module proxy, from Debian:
# PostgreSQL's server binaries, which examples/ledger's tests start on a
# private port and data directory; OpenLDAP's slapd (and ldap-utils),
# which auth/ldap's tests start on a private port with a generated config
# (internal/slapdtest); Chromium, which internal/console's tests drive
# headless; and RabbitMQ (rabbitmq-server), which the shovel and
# federation tests start as a private node with its own name, ports and
# data directory (internal/rabbitnode) — all fail in CI without them.
# Run as root (CI is); installs only what is missing, and starts no
# system service (the tests start their own servers).
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
if [[ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]]; then
	missing+=(rabbitmq-server)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d answering 101 keeps the packages' services (the system
# RabbitMQ node on 5672, slapd, PostgreSQL) from starting on install.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
	printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
	chmod +x /usr/sbin/policy-rc.d
	trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get update -qq
apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null
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
[[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] || {
	echo "install-deps: rabbitmq-server installed but no /usr/lib/rabbitmq/bin/rabbitmq-server" >&2
	exit 1
}
