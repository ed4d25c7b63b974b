#!/usr/bin/env bash
# cluster-bench.sh measures how a Warren cluster's confirmed throughput
# grows with its members, each member standing for one machine: every
# member process runs in a cgroup of its own with the same CPU quota
# (cgroup v1 cpu controller, cpu.cfs_quota_us over a 100 ms period; or
# cgroup v2 cpu.max), and the load generator (examples/perftest) runs
# outside them. For each round it starts one node, then clusters of each
# size in -members, on fresh data directories, and runs perftest's
# persistent-confirm scenario (confirms mean synced on a quorum) over
# -queues queues, each with a publisher and a consumer of its own,
# spread over the members as a load balancer in front of a cluster would
# spread them (queue i declared, published and consumed on member
# i mod n, so under the client-local locator member i mod n leads it);
# it prints each run and a table of medians by size.
# docs/cluster-design.md's measurement plan is what it serves.
#
# The default quota is a quarter of a core per member: this machine has
# two cores, and five members at a quarter (1.25 cores) leave three
# quarters of a core to the load generator, which needs about 30 µs of
# CPU per message; at half a core each, five members alone would ask for
# more than the machine has, and the members would be measuring each
# other's starvation rather than their own cost.
#
# With -builds it alternates several builds of Warren on the same caps:
# each is a label and a git ref (built from `git archive` of that ref) or
# the path of a warren binary; within each round every size runs every
# build, in an order reversed every other round, and the table gives
# each build's medians and the last build against the first.
#
#   scripts/cluster-bench.sh                              # this tree: 1, 3 and 5 members, a quarter of a core each, 30 quorum queues
#   scripts/cluster-bench.sh -builds "main=main new=HEAD" -members "1 3 5" -rounds 3 -duration 20s
#   scripts/cluster-bench.sh -members "3 5" -quota 100000 -queues 1 -queue-type "" -size 1024
#
# It needs root (to make cgroups) and Linux. Sizes and builds run in
# alternation within each round, so a change in the machine's load shows
# as noise across rounds rather than as a difference between them.
set -euo pipefail
cd "$(dirname "$0")/.."

members="1 3 5"
quota=25000 # µs of CPU per 100 ms period: a quarter of a core (see above)
rounds=1
duration=10s
size=1024
queues=30
queue_type=quorum
builds="this=."
groups=0
port_base=27000

usage() {
	sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'
	cat <<EOF
Flags:
  -members "N ..."  cluster sizes to measure; 1 is a single node without raft (default "$members")
  -quota US         CPU quota of every member, µs per 100 ms (default $quota; 0: no cap)
  -rounds N         rounds; the table shows medians (default $rounds)
  -duration D       how long perftest publishes in each run (default $duration)
  -size N           message body size in bytes (default $size)
  -queues N         queues, each with its own publisher and consumer (default $queues)
  -queue-type T     x-queue-type of the queues; "" declares them without one (default $queue_type)
  -groups           start cluster members with -queue-groups (each quorum queue in a raft
                    group of its own), for every build whose warren has that flag
  -builds "L=R ..." builds to alternate: label=git ref, label=path of a warren binary,
                    or label=. for this working tree (default "$builds")
EOF
}

while [[ $# -gt 0 ]]; do
	case $1 in
	-members) members=$2; shift ;;
	-quota) quota=$2; shift ;;
	-groups) groups=1 ;;
	-rounds) rounds=$2; shift ;;
	-duration) duration=$2; shift ;;
	-size) size=$2; shift ;;
	-queues) queues=$2; shift ;;
	-queue-type) queue_type=$2; shift ;;
	-builds) builds=$2; shift ;;
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

# Each build's binary: $work/warren-LABEL. perftest is this tree's.
labels=()
for b in $builds; do
	label=${b%%=*} ref=${b#*=}
	if [[ -z $label || $label == "$b" || -z $ref ]]; then
		echo "cluster-bench: -builds wants label=ref, not $b" >&2
		exit 2
	fi
	labels+=("$label")
	if [[ $ref == . ]]; then
		go build -o "$work/warren-$label" ./cmd/warren
	elif [[ -f $ref && -x $ref ]]; then
		cp "$ref" "$work/warren-$label"
	else
		src="$work/src-$label"
		mkdir -p "$src"
		git archive "$ref" | tar -x -C "$src"
		(cd "$src" && go build -o "$work/warren-$label" ./cmd/warren)
		rm -rf "$src"
	fi
	echo "cluster-bench: build $label = $ref"
done
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

# start_members n run label: starts n members (n = 1: a single node) of
# build label on fresh directories, each capped, and waits until every
# one accepts AMQP.
start_members() {
	local n=$1 run=$2 label=$3 peers="" i
	for ((i = 1; i <= n; i++)); do
		peers+="${peers:+,}$i=127.0.0.1:$((port_base + 100 + i))"
	done
	for ((i = 1; i <= n; i++)); do
		local dir="$work/$run/n$i" args
		mkdir -p "$dir"
		args=(-addr "127.0.0.1:$((port_base + i))" -data "$dir" -log-level error)
		if [[ $n -gt 1 ]]; then
			args+=(-node-id "$i" -peers "$peers" -cluster-secret-file "$work/secret")
			# -groups: queue groups on, for every build that has them
			# (the help read whole first: -h exits 2, and grep -q
			# closing the pipe early would fail it under pipefail).
			if [[ $groups == 1 ]] && grep -qE -- '-queue-groups$' <<<"$("$work/warren-$label" -h 2>&1 || true)"; then
				args+=(-queue-groups)
			fi
		fi
		"$work/warren-$label" "${args[@]}" >"$dir.out" 2>"$dir.err" &
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
echo "cluster-bench: builds (${labels[*]}), members ($members), quota $quota µs/100 ms each, $rounds round(s), $duration," \
	"$queues queue(s)${queue_type:+ of type $queue_type}, $size B persistent with confirms"
for ((r = 1; r <= rounds; r++)); do
	order=("${labels[@]}")
	if ((r % 2 == 0)); then # every other round the other way round
		order=()
		for ((i = ${#labels[@]} - 1; i >= 0; i--)); do order+=("${labels[i]}"); done
	fi
	for n in $members; do
		for label in "${order[@]}"; do
			run="r$r-n$n-$label"
			start_members "$n" "$run" "$label"
			urls=""
			for ((i = 1; i <= n; i++)); do
				urls+="${urls:+,}amqp://guest:guest@127.0.0.1:$((port_base + i))/"
			done
			# -broker-pid: every member's pid, so broker CPU is the
			# cluster's (member 1's RSS).
			all_pids=$(IFS=,; echo "${pids[*]}")
			out=$("$work/perftest" -scenario persistent-confirm -size "$size" -duration "$duration" \
				-queues "$queues" -queue-type "$queue_type" \
				-url "$urls" -broker-pid "$all_pids" -json -label "$label members=$n" || true)
			cpu=$(sed -n 's/.*"broker_cpu_us_per_msg":\([0-9.]*\).*/\1/p' <<<"$out")
			rate=$(sed -n 's/.*"confirmed_per_s":\([0-9.]*\).*/\1/p' <<<"$out")
			lost=$(sed -n 's/.*"lost_confirmed":\([0-9]*\).*/\1/p' <<<"$out")
			verified=$(sed -n 's/.*"verified":\([a-z]*\).*/\1/p' <<<"$out")
			if [[ ${lost:-1} != 0 ]]; then
				echo "cluster-bench: $label members=$n lost ${lost:-?} confirmed messages: $out" >&2
				exit 1
			fi
			if [[ $verified != true ]]; then
				# Nothing confirmed was lost, but the run was not clean
				# (a publisher closed with 541, a stall): say so, and
				# count its rate as 0 in the medians.
				echo "cluster-bench: $label members=$n failed: $out" >&2
				rate=0
			fi
			printf 'round %d  build %s  members %d  confirmed msg/s %.0f  members'"'"' CPU µs/msg %.1f\n' "$r" "$label" "$n" "${rate:-0}" "${cpu:-0}"
			echo "$label $n ${rate:-0}" >>"$results"
			stop_members
			rm -rf "${work:?}/$run"
		done
	done
done

# median label n: the median rate of build label at n members.
median() {
	awk -v l="$1" -v n="$2" '$1 == l && $2 == n {print $3}' "$results" | sort -n |
		awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print 0}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f×", a / b}'; }

echo
head="| members |" rule="|---|"
for label in "${labels[@]}"; do
	head+=" $label confirmed msg/s (median of $rounds) | $label vs 1 node |"
	rule+="---:|---:|"
done
first=${labels[0]} last=${labels[${#labels[@]} - 1]}
if [[ $first != "$last" ]]; then
	head+=" $last vs $first |"
	rule+="---:|"
fi
echo "$head"
echo "$rule"
for n in $members; do
	row="| $n |"
	for label in "${labels[@]}"; do
		med=$(median "$label" "$n")
		row+=" $(printf '%.0f' "$med") | $(ratio "$med" "$(median "$label" 1)") |"
	done
	if [[ $first != "$last" ]]; then
		row+=" $(ratio "$(median "$last" "$n")" "$(median "$first" "$n")") |"
	fi
	echo "$row"
done
