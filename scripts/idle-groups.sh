#!/usr/bin/env bash
# idle-groups.sh measures what idle replicated queues cost a cluster with
# queue groups: it starts three member processes with -queue-groups (and
# -http, for /metrics), declares -queues durable quorum queues over them
# (examples/idlegroups: queue i on member i mod 3, so each leads a third;
# every member holds every group, voters on three), lets them settle and
# quiesce, then reports for each member:
#   - CPU over a quiet -quiet seconds, as % of one core (utime+stime from
#     /proc/PID/stat), before the queues exist and after;
#   - memory per queue: (RSS after - RSS before) / queues, and the same for
#     the Go heap (go_memstats_alloc_bytes from /metrics, after a settle);
#   - how long the declarations took, and each member's CPU seconds
#     over them per declared queue (ms/queue, from /proc: it holds on a
#     loaded machine, where the wall time does not).
# Last, each member's share of the groups as its /api/nodes shows it.
# With -perf DIR, perf(1) records each member during the idle quiet
# window into DIR/memberN.perf (read with `perf report -i ...`).
#
#   scripts/idle-groups.sh                 # 10,000 queues, a quiet minute
#   scripts/idle-groups.sh -queues 1000 -quiet 20
#   scripts/idle-groups.sh -perf /tmp/idle-perf   # and where the idle CPU goes
#
# Linux only (it reads /proc). Nothing else may load the machine for the
# figures to mean anything: the idle CPU it reports is small, and any
# other process's work shows as noise in it.
set -euo pipefail
cd "$(dirname "$0")/.."

queues=10000
quiet=60
settle=20
port_base=28000
perf_dir=""
while [[ $# -gt 0 ]]; do
	case $1 in
	-queues) queues=$2; shift 2 ;;
	-quiet) quiet=$2; shift 2 ;;
	-settle) settle=$2; shift 2 ;;
	-port-base) port_base=$2; shift 2 ;;
	-perf) perf_dir=$2; shift 2 ;;
	*) echo "idle-groups: unknown flag $1" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/warren" ./cmd/warren
go build -o "$work/idlegroups" ./examples/idlegroups
head -c 32 /dev/urandom | base64 >"$work/secret"
peers=""
for i in 1 2 3; do peers+="${peers:+,}$i=127.0.0.1:$((port_base + 100 + i))"; done
urls=""
for i in 1 2 3; do
	mkdir -p "$work/n$i"
	"$work/warren" -node-id "$i" -peers "$peers" -cluster-secret-file "$work/secret" -queue-groups \
		-addr "127.0.0.1:$((port_base + i))" -http "127.0.0.1:$((port_base + 200 + i))" \
		-data "$work/n$i" -log-level error >"$work/n$i.out" 2>"$work/n$i.err" &
	pids+=($!)
	urls+="${urls:+,}amqp://guest:guest@127.0.0.1:$((port_base + i))/"
done
for i in 1 2 3; do
	for ((w = 0; w < 600; w++)); do
		(exec 3<>"/dev/tcp/127.0.0.1/$((port_base + i))") 2>/dev/null && break
		sleep 0.1
	done
done

hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$1/status"; }
heap() { curl -s -u guest:guest "http://127.0.0.1:$((port_base + 200 + $1))/metrics" | awk '$1 == "go_memstats_alloc_bytes" {printf "%d", $2}'; }
# cpu_over secs: every member's CPU over secs, % of one core.
cpu_over() {
	local before=() i
	for i in 0 1 2; do before[i]=$(ticks "${pids[i]}"); done
	sleep "$1"
	for i in 0 1 2; do
		echo "$(ticks "${pids[i]}") ${before[i]} $hz $1" | awk '{printf "%.2f ", ($1 - $2) / $3 / $4 * 100}'
	done
}

sleep "$settle"
echo "idle-groups: 3 members, $queues quorum queues, quiet ${quiet}s, settle ${settle}s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
cpu0=$(cpu_over "$quiet")
rss0=() heap0=()
for i in 0 1 2; do rss0[i]=$(rss "${pids[i]}"); heap0[i]=$(heap $((i + 1))); done
decl0=()
for i in 0 1 2; do decl0[i]=$(ticks "${pids[i]}"); done
"$work/idlegroups" -urls "$urls" -queues "$queues"
decl=""
for i in 0 1 2; do
	decl+="$(echo "$(ticks "${pids[i]}") ${decl0[i]} $hz $queues" | awk '{printf "%.2f", ($1 - $2) / $3 * 1000 / $4}') "
done
echo "idle-groups: CPU ms per declared queue, members 1-3: $decl"
sleep "$settle"
rss1=() heap1=()
for i in 0 1 2; do rss1[i]=$(rss "${pids[i]}"); heap1[i]=$(heap $((i + 1))); done
perfs=()
if [[ -n $perf_dir ]]; then
	mkdir -p "$perf_dir"
	for i in 0 1 2; do
		perf record -F 99 -g -p "${pids[i]}" -o "$perf_dir/member$((i + 1)).perf" -- sleep "$quiet" >/dev/null 2>&1 &
		perfs+=($!)
	done
fi
cpu1=$(cpu_over "$quiet")
for p in "${perfs[@]}"; do wait "$p" || true; done
read -r -a c0 <<<"$cpu0"
read -r -a c1 <<<"$cpu1"
printf '%-8s %14s %14s %12s %12s %16s %16s\n' member "cpu% no queues" "cpu% idle" "rss MiB" "heap MiB" "rss KiB/queue" "heap KiB/queue"
for i in 0 1 2; do
	awk -v m=$((i + 1)) -v c0="${c0[i]}" -v c1="${c1[i]}" -v r0="${rss0[i]}" -v r1="${rss1[i]}" -v h0="${heap0[i]}" -v h1="${heap1[i]}" -v q="$queues" \
		'BEGIN {printf "%-8s %14s %14s %12.1f %12.1f %16.2f %16.2f\n", m, c0, c1, r1/1048576, h1/1048576, (r1-r0)/q/1024, (h1-h0)/q/1024}'
done
for i in 1 2 3; do
	curl -s -u guest:guest "http://127.0.0.1:$((port_base + 200 + i))/api/nodes" |
		python3 -c 'import json,sys; n=json.load(sys.stdin)[0]; print(n["name"], "queue_groups", n.get("queue_groups"))'
done
