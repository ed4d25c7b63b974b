#!/usr/bin/env bash
# Runs end-to-end checks against Warren's standalone server (cmd/warren)
# with a client in another language than Go: Python's pika, Debian's
# python3-pika 1.2.0, in scripts/clients/pika_check.py (direct reply-to RPC,
# CC/BCC routing, x-queue-type classic equivalence, connection.update-secret,
# ack multiple=true of an unknown tag), and RabbitMQ's rabbitmqadmin, from
# Debian's rabbitmq-server 3.10.8, in scripts/clients/rabbitmqadmin_check.py
# (declare, list and delete a vhost, user, permission and vhost limit over
# the management API). See conformance/README.md.
#
#   scripts/clients.sh
#
# Installs python3-pika with apt-get when Debian's /usr/bin/python3 cannot
# import pika (needs root). Exits 1 when a check fails or the server does not
# start.
#
# Environment:
#   CLIENTS_PYTHON  the Python that has pika (default /usr/bin/python3, where
#                   Debian installs python3-pika; a pyenv python3 on PATH does
#                   not see it)
#   CLIENTS_RABBITMQADMIN  the rabbitmqadmin script (default: rabbitmqadmin on
#                   PATH, the management plugin's copy under
#                   /usr/lib/rabbitmq, else one taken out of Debian's
#                   rabbitmq-server package with apt-get download and
#                   dpkg-deb -x into the work dir: nothing installed, no
#                   RabbitMQ node started)
#   CLIENTS_KEEP=1  keep the work dir (server log) and print its path
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${CLIENTS_PYTHON:-/usr/bin/python3}

work=$(mktemp -d "${TMPDIR:-/tmp}/warren-clients.XXXXXX")
server_pid=""

# cleanup stops the server and removes the work dir. SIGTERM first (the
# server shuts down cleanly on it); SIGKILL after 10s, because a TERM that
# lands between the fork and the server installing its handler is lost, and
# a plain wait would then hang for ever.
cleanup() {
	if [[ -n "$server_pid" ]]; then
		kill "$server_pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 100; i++)); do
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ "${CLIENTS_KEEP:-}" == 1 ]]; then
		echo "clients: work dir kept at $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "clients: $*" >&2
	exit 1
}

# 1. The client library, from Debian.
if ! "$python" -c 'import pika' 2>/dev/null; then
	[[ $(id -u) == 0 ]] || die "$python cannot import pika; install python3-pika (apt-get install -y python3-pika) or run as root"
	echo "clients: installing python3-pika"
	if ! apt-get install -y python3-pika >"$work/apt.log" 2>&1; then
		apt-get update >>"$work/apt.log" 2>&1 || true
		apt-get install -y python3-pika >>"$work/apt.log" 2>&1 || {
			cat "$work/apt.log" >&2
			die "apt-get install python3-pika failed"
		}
	fi
	"$python" -c 'import pika' || die "python3-pika installed but $python cannot import pika"
fi

# rabbitmqadmin, from Debian's rabbitmq-server (a Python 3 script).
admin=${CLIENTS_RABBITMQADMIN:-}
if [[ -z "$admin" ]]; then
	admin=$(command -v rabbitmqadmin || true)
fi
if [[ -z "$admin" ]]; then
	admin=$(ls /usr/lib/rabbitmq/lib/*/plugins/rabbitmq_management*/priv/www/cli/rabbitmqadmin 2>/dev/null | head -n 1 || true)
fi
if [[ -z "$admin" ]]; then
	echo "clients: fetching rabbitmqadmin from Debian's rabbitmq-server package"
	mkdir -p "$work/deb"
	if ! (cd "$work/deb" && apt-get download rabbitmq-server >"$work/apt-download.log" 2>&1); then
		# Empty package lists (a fresh container): refresh them, as root.
		[[ $(id -u) == 0 ]] && apt-get update >>"$work/apt-download.log" 2>&1 || true
		(cd "$work/deb" && apt-get download rabbitmq-server >>"$work/apt-download.log" 2>&1) || {
			cat "$work/apt-download.log" >&2
			die "apt-get download rabbitmq-server failed; set CLIENTS_RABBITMQADMIN or install rabbitmq-server"
		}
	fi
	dpkg-deb -x "$work"/deb/rabbitmq-server_*.deb "$work/deb/root" || die "cannot unpack rabbitmq-server"
	admin="$work/deb/root/usr/bin/rabbitmqadmin"
fi
[[ -f "$admin" ]] || die "no rabbitmqadmin at $admin"

# 2. The server, persistent on a temporary data dir (the path clients of a
# real deployment take), on a port the kernel picks: -addr 127.0.0.1:0 and the
# "listening on <addr>" line it prints once clients can connect, as
# scripts/conformance.sh does, so nothing races for a free port.
(cd "$repo" && go build -o "$work/warren-server" ./cmd/warren) || die "cannot build cmd/warren"
server_log="$work/server.log"
# The redirections below happen in the child after the fork: create the file
# first so the loop can read it at once.
: >"$work/server.out"
"$work/warren-server" -data "$work/data" -addr 127.0.0.1:0 -http 127.0.0.1:0 -product RabbitMQ </dev/null >"$work/server.out" 2>"$server_log" &
server_pid=$!
server_addr=""
for ((i = 0; i < 300; i++)); do
	server_addr=$(sed -n 's/^listening on //p' "$work/server.out")
	if [[ -n "$server_addr" ]] && (exec 3<>"/dev/tcp/${server_addr%:*}/${server_addr##*:}") 2>/dev/null; then
		break
	fi
	server_addr=""
	kill -0 "$server_pid" 2>/dev/null || {
		cat "$server_log" >&2
		die "server exited before listening"
	}
	sleep 0.1
done
[[ -n "$server_addr" ]] || die "server did not listen within 30s"
# The management API is served (and its line printed) after the AMQP port.
http_addr=""
for ((i = 0; i < 300; i++)); do
	http_addr=$(sed -n 's/^management on //p' "$work/server.out")
	[[ -n "$http_addr" ]] && break
	sleep 0.1
done
[[ -n "$http_addr" ]] || die "server did not serve the management API within 30s"
echo "clients: Warren on $server_addr, management on $http_addr"

# 3. The checks (-B: no __pycache__ in the repo). A failure shows what the
# server logged.
status=0
"$python" -B "$repo/scripts/clients/pika_check.py" "amqp://guest:guest@$server_addr/" </dev/null || status=$?
"$python" -B "$repo/scripts/clients/rabbitmqadmin_check.py" "$admin" "$http_addr" </dev/null || status=$?
if ! kill -0 "$server_pid" 2>/dev/null; then
	echo "clients: the server died during the checks" >&2
	status=1
fi
if [[ $status != 0 ]]; then
	echo "clients: server log (last 40 lines):" >&2
	tail -n 40 "$server_log" | sed 's/^/	server| /' >&2
fi
exit $status
