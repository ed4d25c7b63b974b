#!/usr/bin/env bash
# shovel-bench.sh measures shovel throughput: persistent 1 KiB messages,
# on-confirm, the source queue filled beforehand, for three moves that
# alternate round by round (internal/shovel's TestShovelThroughput):
#
#   - Warren to Warren, Warren's shovel (in the destination's process);
#   - RabbitMQ to Warren, Warren's shovel;
#   - RabbitMQ to RabbitMQ, RabbitMQ 3.10's own shovel plugin.
#
#   scripts/shovel-bench.sh                  # 3 rounds of 10,000 messages
#   scripts/shovel-bench.sh -rounds 5 -messages 20000 -out shovel.txt
#
# It needs rabbitmq-server (a private node is booted; nothing system-wide
# is touched) and builds cmd/warren. Run it on a quiet machine: it prints
# the load average before and after, and refuses to start above -max-load
# (default 2) unless -force is given, because figures taken under load
# say nothing. The per-round rates and the medians are printed and, with
# -out, written to that file with the commit and the load.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 messages=10000 out="" max_load=2 force=0
while [ $# -gt 0 ]; do
	case "$1" in
	-rounds) rounds=$2; shift 2 ;;
	-messages) messages=$2; shift 2 ;;
	-out) out=$2; shift 2 ;;
	-max-load) max_load=$2; shift 2 ;;
	-force) force=1; shift ;;
	*) echo "usage: $0 [-rounds N] [-messages N] [-out FILE] [-max-load L] [-force]" >&2; exit 2 ;;
	esac
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
before=$(load)
if [ "$force" = 0 ] && awk -v l="${before%% *}" -v m="$max_load" 'BEGIN { exit !(l > m) }'; then
	echo "load average $before is above $max_load: measure on a quiet machine (or -force)" >&2
	exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
WARREN_SHOVEL_THROUGHPUT=1 WARREN_SHOVEL_THROUGHPUT_N=$messages WARREN_SHOVEL_THROUGHPUT_ROUNDS=$rounds \
	go test -count=1 -timeout 60m -run '^TestShovelThroughput$' -v ./internal/shovel >"$log" 2>&1 || {
	cat "$log" >&2
	exit 1
}
after=$(load)
{
	echo "commit $(git rev-parse --short HEAD), $rounds rounds of $messages persistent 1 KiB messages, on-confirm"
	echo "load average before: $before, after: $after"
	grep -E 'msg/s' "$log" | sed -E 's/^ +throughput_test.go:[0-9]+: //'
} | tee ${out:+"$out"}
