#!/usr/bin/env bash
# cluster-bench.sh measures how a Warren cluster's confirmed throughput
# grows with its members, each member standing for one machine: every
# member process runs in a cgroup of its own with the same CPU quota
# (cgroup v1 cpu controller, cpu.cfs_quota_us over a 100 ms period; or
# cgroup v2 cpu.max), and the load generator (examples/perftest) runs
# outside them. For each round it starts one node, then clusters of each
# size in -members, on fresh data directories, and runs perftest's
# persistent-confirm scenario (confirms mean synced on a quorum) against
# the first member; it prints each run and a table of medians by size.
# docs/cluster-design.md's measurement plan is what it serves.
#
#   scripts/cluster-bench.sh                              # 1, 3 and 5 members, half a core each, 1 round
#   scripts/cluster-bench.sh -members "3 5" -quota 100000 -rounds 3 -duration 20s -size 1024
#
# It needs root (to make cgroups) and Linux. Sizes run in alternation
# within each round, so a change in the machine's load shows as noise
# across rounds rather than as a difference between sizes.
set -euo pipefail
cd "$(dirname "$0")/.."

members="1 3 5"
quota=50000 # µs of CPU per 100 ms period: half a core
rounds=1
duration=10s
size=1024
port_base=27000

usage() {
	sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
	cat <<EOF
Flags:
  -members "N ..."  cluster sizes to measure; 1 is a single node without raft (default "$members")
  -quota US         CPU quota of every member, µs per 100 ms (default $quota; 0: no cap)
  -rounds N         rounds; the table shows medians (default $rounds)
  -duration D       how long perftest publishes in each run (default $duration)
  -size N           message body size in bytes (default $size)
EOF
}

while [[ $# -gt 0 ]]; do
	case $1 in
	-members) members=$2; shift ;;
	-quota) quota=$2; shift ;;
	-rounds) rounds=$2; shift ;;
	-duration) duration=$2; shift ;;
	-size) size=$2; shift ;;
	-h | -help | --help) usage; exit 0 ;;
	*) echo "cluster-bench: unknown flag $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

if [[ $(id -u) -ne 0 ]]; then
	echo "cluster-bench: needs root to give each member its own cgroup" >&2
	exit 1
fi

# The cgroup layout: v1's cpu controller, else v2's unified hierarchy.
if [[ -w /sys/fs/cgroup/cpu ]]; then
	cg_root=/sys/fs/cgroup/cpu/warren-bench
	cg_v=1
elif [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
	cg_root=/sys/fs/cgroup/warren-bench
	cg_v=2
else
	echo "cluster-bench: no writable cpu cgroup controller (v1 /sys/fs/cgroup/cpu or v2 cpu)" >&2
	exit 1
fi

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ -d $cg_root ]]; then
		for d in "$cg_root"/m*; do [[ -d $d ]] && rmdir "$d" 2>/dev/null || true; done
		rmdir "$cg_root" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/warren" ./cmd/warren
go build -o "$work/perftest" ./examples/perftest
head -c 32 /dev/urandom | base64 >"$work/secret"
chmod 600 "$work/secret"

mkdir -p "$cg_root"
if [[ $cg_v == 2 ]]; then
	echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
	echo +cpu >"$cg_root/cgroup.subtree_control" 2>/dev/null || true
fi

# cap puts pid in member i's cgroup with the quota.
cap() {
	local d="$cg_root/m$1"
	mkdir -p "$d"
	if [[ $cg_v == 1 ]]; then
		echo 100000 >"$d/cpu.cfs_period_us"
		if [[ $quota -gt 0 ]]; then echo "$quota" >"$d/cpu.cfs_quota_us"; else echo -1 >"$d/cpu.cfs_quota_us"; fi
	else
		if [[ $quota -gt 0 ]]; then echo "$quota 100000" >"$d/cpu.max"; else echo "max 100000" >"$d/cpu.max"; fi
	fi
	echo "$2" >"$d/cgroup.procs"
}

# start_members n run: starts n members (n = 1: a single node) on fresh
# directories, each capped, and waits until every one accepts AMQP.
start_members() {
	local n=$1 run=$2 peers="" i
	for ((i = 1; i <= n; i++)); do
		peers+="${peers:+,}$i=127.0.0.1:$((port_base + 100 + i))"
	done
	for ((i = 1; i <= n; i++)); do
		local dir="$work/$run/n$i" args
		mkdir -p "$dir"
		args=(-addr "127.0.0.1:$((port_base + i))" -data "$dir" -log-level error)
		if [[ $n -gt 1 ]]; then
			args+=(-node-id "$i" -peers "$peers" -cluster-secret-file "$work/secret")
		fi
		"$work/warren" "${args[@]}" >"$dir.out" 2>"$dir.err" &
		pids+=($!)
		cap "$i" $!
	done
	for ((i = 1; i <= n; i++)); do
		local waited=0
		# A member accepts AMQP once its broker runs: once raft has a leader.
		until (exec 3<>"/dev/tcp/127.0.0.1/$((port_base + i))") 2>/dev/null; do
			sleep 0.1
			waited=$((waited + 1))
			if [[ $waited -gt 600 ]]; then
				echo "cluster-bench: member $i of $n did not listen within 60 s:" >&2
				cat "$work/$run/n$i.err" >&2
				exit 1
			fi
		done
	done
}

stop_members() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}

results="$work/results"
: >"$results"
echo "cluster-bench: members ($members), quota $quota µs/100 ms each, $rounds round(s), $duration, $size B persistent with confirms"
for ((r = 1; r <= rounds; r++)); do
	for n in $members; do
		run="r$r-n$n"
		start_members "$n" "$run"
		out=$("$work/perftest" -scenario persistent-confirm -size "$size" -duration "$duration" \
			-url "amqp://guest:guest@127.0.0.1:$((port_base + 1))/" -broker-pid "${pids[0]}" -json -label "members=$n")
		rate=$(sed -n 's/.*"confirmed_per_s":\([0-9.]*\).*/\1/p' <<<"$out")
		lost=$(sed -n 's/.*"lost":\([0-9]*\).*/\1/p' <<<"$out")
		if [[ ${lost:-1} != 0 ]]; then
			echo "cluster-bench: members=$n lost ${lost:-?} messages: $out" >&2
			exit 1
		fi
		printf 'round %d  members %d  confirmed msg/s %s\n' "$r" "$n" "${rate:-?}"
		echo "$n ${rate:-0}" >>"$results"
		stop_members
		rm -rf "${work:?}/$run"
	done
done

echo
echo "| members | confirmed msg/s (median of $rounds) | vs 1 node |"
echo "|---|---:|---:|"
base=""
for n in $members; do
	med=$(awk -v n="$n" '$1 == n {print $2}' "$results" | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}')
	[[ $n == 1 ]] && base=$med
	if [[ -n $base && $base != 0 ]]; then
		printf '| %s | %.0f | %.2f× |\n' "$n" "$med" "$(awk -v a="$med" -v b="$base" 'BEGIN {print a / b}')"
	else
		printf '| %s | %.0f | |\n' "$n" "$med"
	fi
done
