#!/usr/bin/env bash
# compare.sh runs examples/perftest against a local RabbitMQ and a Warren
# server, scenario by scenario in alternation, and prints a side-by-side
# markdown table with Warren/RabbitMQ ratios (also written to -out).
#
#   scripts/compare.sh                       # every scenario, 10 s each, 1 round
#   scripts/compare.sh -rounds 3 -out perf.md
#   scripts/compare.sh -install              # apt-get install -y rabbitmq-server first
#   scripts/compare.sh scale                 # how cost grows: the scale scenario set
#   scripts/compare.sh scale -messages 10000000 -brokers warren
#   scripts/compare.sh -strangeq /tmp/strangeq-server -rounds 3
#   scripts/compare.sh -scenarios "" -raw "transient:12"   # the raw client only
#
# Every scenario runs with amqp091-go, the client Go programs use; the -raw
# list (transient 12 B and 1 KiB, fanout by default) runs again with
# perftest's raw client (-client raw: pre-encoded publishes written 256 at
# a time, a no-ack consumer that only counts deliveries), which costs the
# client almost nothing, so those rows measure the broker's own ceiling.
#
# -strangeq BIN also measures a StrangeQ server binary the caller built
# (github.com/maxpert/strangeq, src/amqp-go/cmd/amqp-server; this script
# neither fetches nor builds it): its default config from -generate-config
# with address, port and storage path set, a fresh data directory per run
# (fsync as its default config has it), and a second table with Warren/StrangeQ
# ratios.
#
# -warren-before BIN runs a second Warren binary (cmd/warren built from the
# commit to compare with, e.g. main) the same way, labelled warren-before,
# in the same rotation, so before and after are interleaved run by run on a
# machine whose load moves; a further table gives after/before ratios.
#
# scale runs examples/perftest's scale phases against each broker in turn:
# fill one queue with -messages persistent 1 KiB confirmed messages, restart
# the broker and time it until the first delivery, drain the queue; then,
# each on a freshly started broker, declare + bind -queues durable queues,
# publish one message to each and delete them, and open -connections idle
# connections with a channel. The table gives rates, RSS and memory per
# queued message, per queue and per connection.
#
# Both brokers run on loopback with everything under one temporary
# directory: RabbitMQ gets its own node name, AMQP port, distribution port,
# epmd (on 127.0.0.1 and its own port), config, data and logs, so a system
# RabbitMQ is left alone. Warren runs cmd/warren with -data in the same
# temporary directory, so durable queues are on disk and publisher confirms
# mean synced for both (-warren-memory runs it with -memory instead).
#
# Each run gets a freshly started broker (its data directory kept), so the
# idle and peak RSS reported are that run's own, not what earlier scenarios
# left behind in a heap; -reuse keeps one process per broker for all runs.
# Both are stopped on exit, whatever the exit.
#
# It installs nothing unless given -install. Without RabbitMQ installed it
# measures Warren alone and says so. The table's header names Warren's commit
# from git, or $WARREN_REV when the tree is an export without .git.
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: scripts/compare.sh [flags]
  -install            apt-get install -y rabbitmq-server before starting
  -duration D         publishing time per run, a Go duration (default 10s)
  -rounds N           runs per scenario and broker; the table shows medians (default 1)
  -scenarios "S ..."  scenario[:size] list run with amqp091-go (default: every scenario, transient at 12 B and 1 KiB)
  -raw "S ..."        scenario[:size] list run with the raw client, transient and fanout only
                      (default: "transient:12 transient:1024 fanout:12"; "" for none)
  -out FILE           also write the table here (default: perf-compare.md)
  -results FILE       keep the raw -json lines here (default: in the temporary directory)
  -warren-memory      run Warren with -memory (durable queues in memory, confirms not synced)
  -reuse              one process per broker for all runs (faster; RSS then carries over)
  -keep               keep the temporary directory (logs, data) for inspection
  -strangeq BIN       also run this StrangeQ amqp-server binary, alternated with the others
  -warren-before BIN  also run this Warren binary (cmd/warren built from the commit to compare
                      with) as "warren-before", alternated with the others, and print a
                      before/after table
scale mode (first argument "scale"):
  -messages N         messages in the deep queue (default 500000)
  -queues N           durable queues declared, published to and deleted (default 10000)
  -connections N      idle connections with a channel (default 2000)
  -brokers "B ..."    which brokers to measure: warren, rabbitmq (default both)
USAGE
}

duration=10s
rounds=1
scenarios="transient:12 transient:1024 persistent-confirm:12 latency:12 fanout:12 get:12 many-queues:12"
raw_scenarios="transient:12 transient:1024 fanout:12"
out=perf-compare.md
results=""
install=0
warren_memory=0
reuse=0
keep=0
mode=scenarios
messages=500000
scale_queues=10000
scale_connections=2000
brokers="warren rabbitmq"
strangeq=""
warren_before=""
if [ "${1:-}" = scale ]; then
	mode=scale
	out=scale-compare.md
	shift
fi
while [ $# -gt 0 ]; do
	case "$1" in
	-install) install=1 ;;
	-duration) duration=$2; shift ;;
	-rounds) rounds=$2; shift ;;
	-scenarios) scenarios=$2; shift ;;
	-raw) raw_scenarios=$2; shift ;;
	-out) out=$2; shift ;;
	-results) results=$2; shift ;;
	-warren-memory) warren_memory=1 ;;
	-reuse) reuse=1 ;;
	-keep) keep=1 ;;
	-strangeq) strangeq=$2; shift ;;
	-warren-before) warren_before=$2; shift ;;
	-messages) messages=$2; shift ;;
	-queues) scale_queues=$2; shift ;;
	-connections) scale_connections=$2; shift ;;
	-brokers) brokers=$2; shift ;;
	-h | -help | --help) usage; exit 0 ;;
	*) echo "compare.sh: unknown flag $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
case "$rounds" in '' | *[!0-9]* | 0) echo "compare.sh: -rounds wants a positive number" >&2; exit 2 ;; esac
for v in "$messages" "$scale_queues" "$scale_connections"; do
	case "$v" in '' | *[!0-9]* | 0) echo "compare.sh: -messages, -queues and -connections want positive numbers" >&2; exit 2 ;; esac
done

# The runs of a round: client/scenario[:size].
runs=""
for s in $scenarios; do runs="$runs amqp091/$s"; done
for s in $raw_scenarios; do
	case "${s%%:*}" in
	transient | fanout) runs="$runs raw/$s" ;;
	*) echo "compare.sh: -raw runs transient and fanout, not ${s%%:*}" >&2; exit 2 ;;
	esac
done
if [ -n "$strangeq" ] && [ ! -x "$strangeq" ]; then echo "compare.sh: -strangeq $strangeq is not an executable" >&2; exit 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/warren-compare.XXXXXX")
[ -n "$results" ] || results=$tmp/results.jsonl
: >"$results"

warren_pid=""
rabbit_pid=""
strangeq_pid=""
warren_before_pid=""
strangeq_run=0
rabbit_started=0
epmd_port=""

log() { echo "compare.sh: $*" >&2; }

# --- RabbitMQ ------------------------------------------------------------------
rabbitmq_server=/usr/lib/rabbitmq/bin/rabbitmq-server
rabbitmqctl=/usr/lib/rabbitmq/bin/rabbitmqctl

# rabbit_env runs a command with the variables that make RabbitMQ this run's
# private node.
rabbit_env() {
	env HOME="$tmp/rabbit/home" \
		RABBITMQ_NODENAME="$rabbit_node" \
		RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		RABBITMQ_NODE_PORT="$rabbit_port" \
		RABBITMQ_DIST_PORT="$rabbit_dist_port" \
		ERL_EPMD_PORT="$epmd_port" \
		ERL_EPMD_ADDRESS=127.0.0.1 \
		RABBITMQ_CONF_ENV_FILE="$tmp/rabbit/rabbitmq-env.conf" \
		RABBITMQ_CONFIG_FILE="$tmp/rabbit/rabbitmq.conf" \
		RABBITMQ_ADVANCED_CONFIG_FILE="$tmp/rabbit/advanced.config" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$tmp/rabbit/enabled_plugins" \
		RABBITMQ_PLUGINS_EXPAND_DIR="$tmp/rabbit/plugins-expand" \
		RABBITMQ_MNESIA_BASE="$tmp/rabbit/mnesia" \
		RABBITMQ_LOG_BASE="$tmp/rabbit/log" \
		RABBITMQ_PID_FILE="$tmp/rabbit/pid" \
		RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
		"$@"
}

start_rabbit() {
	log "starting RabbitMQ $rabbit_node on 127.0.0.1:$rabbit_port"
	rabbit_started=1
	rm -f "$tmp/rabbit/pid"
	rabbit_env "$rabbitmq_server" >>"$tmp/rabbit/stdout" 2>&1 &
	if ! rabbit_env "$rabbitmqctl" -q wait "$tmp/rabbit/pid" --timeout 120 >/dev/null 2>&1; then
		log "RabbitMQ did not start; its output:"
		tail -n 30 "$tmp/rabbit/stdout" "$tmp/rabbit/log"/* >&2 2>/dev/null || true
		exit 1
	fi
	rabbit_pid=$(cat "$tmp/rabbit/pid")
}

stop_rabbit() {
	[ -n "$rabbit_pid" ] || return 0
	rabbit_env "$rabbitmqctl" -q stop "$tmp/rabbit/pid" >/dev/null 2>&1 || kill -TERM "$rabbit_pid" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$rabbit_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$rabbit_pid" 2>/dev/null || true
	rabbit_pid=""
}

# --- Warren --------------------------------------------------------------------
# launch_warren name binary: starts that Warren binary with its own data
# directory and log under $tmp/name; sets launched_pid and launched_url.
launch_warren() {
	local flags=(-addr 127.0.0.1:0 -data "$tmp/$1-data") line
	[ "$warren_memory" = 1 ] && flags=(-addr 127.0.0.1:0 -memory)
	rm -f "$tmp/$1.out"
	mkfifo "$tmp/$1.out"
	"$2" "${flags[@]}" >"$tmp/$1.out" 2>>"$tmp/$1.log" &
	launched_pid=$!
	if ! read -r -t 30 line <"$tmp/$1.out"; then
		log "$1 did not start:"
		cat "$tmp/$1.log" >&2
		exit 1
	fi
	# Keep the fifo drained so the server never blocks writing to stdout.
	cat "$tmp/$1.out" >/dev/null &
	launched_url="amqp://guest:guest@${line#listening on }/"
	log "started $1 on ${line#listening on } (pid $launched_pid)"
}

start_warren() {
	launch_warren warren "$tmp/bin/warren"
	warren_pid=$launched_pid warren_url=$launched_url
}

stop_warren() {
	[ -n "$warren_pid" ] || return 0
	kill -TERM "$warren_pid" 2>/dev/null || true
	wait "$warren_pid" 2>/dev/null || true
	warren_pid=""
}

# The -warren-before binary, the same way under its own label.
start_warren_before() {
	launch_warren warren-before "$warren_before"
	warren_before_pid=$launched_pid warren_before_url=$launched_url
}

stop_warren_before() {
	[ -n "$warren_before_pid" ] || return 0
	kill -TERM "$warren_before_pid" 2>/dev/null || true
	wait "$warren_before_pid" 2>/dev/null || true
	warren_before_pid=""
}

# --- StrangeQ ------------------------------------------------------------------
# start_strangeq runs the -strangeq binary on a free loopback port with its
# own generated config and a data directory of its own for this run (it
# can stop delivering after some scenarios when a directory is reused).
start_strangeq() {
	local port dir
	strangeq_run=$((strangeq_run + 1))
	dir=$tmp/strangeq/$strangeq_run
	mkdir -p "$dir"
	port=$(free_port)
	"$strangeq" -generate-config "$dir/template.yaml" >/dev/null 2>&1
	sed -e "s|^\( *address:\).*|\1 127.0.0.1:$port|" \
		-e "s|^\( *port:\) 5672$|\1 $port|" \
		-e "s|^\( *path:\) \./data$|\1 $dir/data|" \
		"$dir/template.yaml" >"$dir/config.yaml"
	(cd "$dir" && exec "$strangeq" -config "$dir/config.yaml") >>"$dir/log" 2>&1 &
	strangeq_pid=$!
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		kill -0 "$strangeq_pid" 2>/dev/null || { log "StrangeQ did not start:"; tail -n 20 "$dir/log" >&2; exit 1; }
		sleep 0.1
	done
	strangeq_url="amqp://guest:guest@127.0.0.1:$port/"
	log "started StrangeQ on 127.0.0.1:$port (pid $strangeq_pid)"
}

stop_strangeq() {
	[ -n "$strangeq_pid" ] || return 0
	kill -TERM "$strangeq_pid" 2>/dev/null || true
	for _ in $(seq 100); do
		kill -0 "$strangeq_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$strangeq_pid" 2>/dev/null || true
	wait "$strangeq_pid" 2>/dev/null || true
	strangeq_pid=""
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_warren
	stop_warren_before
	stop_strangeq
	if [ "$rabbit_started" = 1 ]; then
		stop_rabbit
		# This epmd listens on our own port, so stopping it touches no one else.
		epmd -port "$epmd_port" -kill >/dev/null 2>&1 || true
	fi
	if [ "$keep" = 1 ]; then
		log "kept $tmp"
	else
		rm -rf "$tmp"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a loopback port nothing listens on.
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	log "no free port found"
	return 1
}

rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

if [ "$install" = 1 ]; then
	log "installing rabbitmq-server"
	DEBIAN_FRONTEND=noninteractive apt-get install -y rabbitmq-server >&2
fi

log "building into $tmp/bin"
# The commit the binaries are built from, read now: the tree may move on
# during a long run.
warren_rev=${WARREN_REV:-$(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?')}
if [ -n "$(cd "$root" && git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	warren_rev="$warren_rev+changes"
fi
(cd "$root" && go build -o "$tmp/bin/warren" ./cmd/warren && go build -o "$tmp/bin/perftest" ./examples/perftest)

have_rabbit=0
[ -x "$rabbitmq_server" ] && [ -x "$rabbitmqctl" ] && have_rabbit=1
rabbit_version="not installed"
if [ "$have_rabbit" = 1 ]; then
	rabbit_port=$(free_port)
	rabbit_dist_port=$(free_port)
	epmd_port=$(free_port)
	rabbit_node="warren-compare-$$@localhost"
	rabbit_url="amqp://guest:guest@127.0.0.1:$rabbit_port/"
	rabbit_version=$(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo unknown)
	mkdir -p "$tmp/rabbit/home" "$tmp/rabbit/mnesia" "$tmp/rabbit/log"
	: >"$tmp/rabbit/rabbitmq-env.conf"
	echo '[].' >"$tmp/rabbit/enabled_plugins"
	printf 'log.console = false\nlog.file.level = warning\n' >"$tmp/rabbit/rabbitmq.conf"
else
	log "RabbitMQ is not installed (try -install); measuring Warren alone"
fi

# --- the runs --------------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
failed=0

# run_one label scenario size client: starts the broker unless -reuse keeps
# one running, records its settled idle RSS, runs perftest with the client
# (amqp091 or raw), stops the broker.
run_one() {
	local rc=0 url pid
	case "$1" in
	warren) pid=$warren_pid ;;
	rabbitmq) pid=$rabbit_pid ;;
	strangeq) pid=$strangeq_pid ;;
	warren-before) pid=$warren_before_pid ;;
	esac
	if [ -z "$pid" ]; then
		case "$1" in
		warren) start_warren; pid=$warren_pid ;;
		rabbitmq) start_rabbit; pid=$rabbit_pid ;;
		strangeq) start_strangeq; pid=$strangeq_pid ;;
		warren-before) start_warren_before; pid=$warren_before_pid ;;
		esac
		sleep 2
		printf '{"label":"%s","scenario":"idle","rss_start_mib":%s,"verified":true}\n' "$1" "$(rss_mib "$pid")" >>"$results"
	fi
	case "$1" in
	warren) url=$warren_url ;;
	rabbitmq) url=$rabbit_url ;;
	strangeq) url=$strangeq_url ;;
	warren-before) url=$warren_before_url ;;
	esac
	log "$1: $2 ($3 B, $4 client)"
	"$tmp/bin/perftest" -url "$url" -broker-pid "$pid" -label "$1" -json \
		-scenario "$2" -size "$3" -client "$4" -duration "$duration" >>"$results" || rc=$?
	if [ "$rc" != 0 ]; then
		log "$1: $2 ($3 B, $4 client) failed (exit $rc)"
		failed=1
	fi
	if [ "$reuse" = 0 ]; then
		case "$1" in
		warren) stop_warren ;;
		rabbitmq) stop_rabbit ;;
		strangeq) stop_strangeq ;;
		warren-before) stop_warren_before ;;
		esac
	fi
}

# scale_phase label phases...: runs perftest's scale scenario with the
# given phases against the running broker.
scale_phase() {
	local label=$1 phases=$2 rc=0 url pid du=()
	case "$label" in
	warren) url=$warren_url pid=$warren_pid du=(-du "$tmp/warren-data") ;;
	rabbitmq) url=$rabbit_url pid=$rabbit_pid du=(-du "$tmp/rabbit/mnesia") ;;
	esac
	log "$label: scale $phases"
	"$tmp/bin/perftest" -url "$url" -broker-pid "$pid" -label "$label" -json \
		-scenario scale -phases "$phases" -size 1024 -prefetch 1000 \
		-count "$messages" -queues "$scale_queues" -connections "$scale_connections" \
		-drain-timeout 120s "${du[@]}" >>"$results" || rc=$?
	if [ "$rc" != 0 ]; then
		log "$label: scale $phases failed (exit $rc)"
		failed=1
	fi
}

# scale_broker label: the whole scale set against one broker.
scale_broker() {
	local start stop
	case "$1" in
	warren) start=start_warren stop=stop_warren ;;
	rabbitmq) start=start_rabbit stop=stop_rabbit ;;
	esac
	$start
	sleep 2
	printf '{"label":"%s","scenario":"idle","rss_start_mib":%s,"verified":true}\n' "$1" "$(rss_mib "$(pid_of "$1")")" >>"$results"
	scale_phase "$1" fill
	$stop
	# The drain measures readiness from this process's start time.
	$start
	scale_phase "$1" drain
	$stop
	$start
	scale_phase "$1" queues
	$stop
	$start
	scale_phase "$1" connections
	$stop
}

pid_of() {
	case "$1" in
	warren) echo "$warren_pid" ;;
	rabbitmq) echo "$rabbit_pid" ;;
	esac
}

if [ "$mode" = scale ]; then
	for b in $brokers; do
		case "$b" in
		warren) scale_broker warren ;;
		rabbitmq)
			if [ "$have_rabbit" = 1 ]; then scale_broker rabbitmq; else log "skipping RabbitMQ: not installed"; fi
			;;
		*) log "unknown broker $b"; exit 2 ;;
		esac
	done
else
for round in $(seq "$rounds"); do
	for s in $runs; do
		client=${s%%/*}
		s=${s#*/}
		scenario=${s%%:*}
		size=12
		[ "$s" != "$scenario" ] && size=${s#*:}
		# Alternate which broker goes first, so neither always runs on a
		# machine the other has just warmed (or heated).
		order="warren"
		[ "$have_rabbit" = 1 ] && order="$order rabbitmq"
		[ -n "$strangeq" ] && order="$order strangeq"
		[ -n "$warren_before" ] && order="$order warren-before"
		# Rotate the order by the round number.
		set -- $order
		for _ in $(seq $(( (round - 1) % $# ))); do
			set -- "${@:2}" "$1"
		done
		for b in "$@"; do
			run_one "$b" "$scenario" "$size" "$client"
		done
	done
done

fi

{
	echo "Machine: $(nproc) CPUs, $(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr); load average before the runs: $load_before."
	echo "RabbitMQ $rabbit_version (Debian package, Erlang $(dpkg-query -W -f '${Version}' erlang-base 2>/dev/null || echo '?')) vs Warren $warren_rev ($(go version | cut -d' ' -f3)); Warren's durable queues on $([ "$warren_memory" = 1 ] && echo memory || echo Pebble)."
	if [ "$mode" = scale ]; then
		echo "Scale set: $messages persistent 1 KiB confirmed messages in one queue (drained with prefetch 1000, an ack per message), $scale_queues durable queues, $scale_connections idle connections; a freshly started broker for each part; memory per item is the settled RSS growth divided among the items; client: amqp091-go (examples/perftest) on the same machine."
	else
		echo "$duration per run, $rounds round(s), medians; $([ "$reuse" = 1 ] && echo "one process per broker for all runs" || echo "a freshly started broker for every run"); client: amqp091-go (examples/perftest) on the same machine$([ -n "$raw_scenarios" ] && echo ", and perftest's raw client for the rows marked so")."
	fi
	echo
	"$tmp/bin/perftest" -table "$results"
	if [ -n "$strangeq" ] && [ "$mode" != scale ]; then
		echo
		echo "StrangeQ ($strangeq, $(cd "$(dirname "$strangeq")" && "$strangeq" -version 2>&1 | head -n1)) vs Warren, same runs:"
		echo
		"$tmp/bin/perftest" -table "$results" -baseline strangeq -no-goals
	fi
	if [ -n "$warren_before" ] && [ "$mode" != scale ]; then
		echo
		echo "Warren before ($warren_before) vs after ($warren_rev), same runs:"
		echo
		"$tmp/bin/perftest" -table "$results" -baseline warren-before -no-goals
	fi
} | tee "$out"
log "table written to $out; raw results in $results"
exit "$failed"
