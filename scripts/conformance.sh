#!/usr/bin/env bash
# Runs amqp091-go's own integration tests (build tag "integration") against
# Warren's standalone server and compares the outcome with
# conformance/allowed-failures.txt. See conformance/README.md.
#
#   scripts/conformance.sh            # every test
#   scripts/conformance.sh 'Confirm'  # only tests whose name matches the regexp
#
# Exits 1 when a test fails that the list does not name, when a listed test
# does not fail (the list only shrinks), when the list names a test the suite
# does not have, or when the server dies. Needs only this repo, Go and the Go
# module proxy.
#
# Environment:
#   CONFORMANCE_TEST_TIMEOUT  per-test timeout passed to -test.timeout (default 60s)
#   CONFORMANCE_KEEP=1        keep the work dir (per-test logs, server log) and print its path
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
module=github.com/rabbitmq/amqp091-go
version=v1.16.0
allowed="$repo/conformance/allowed-failures.txt"
filter=${1:-.}
per_test_timeout=${CONFORMANCE_TEST_TIMEOUT:-60s}

# The copy must not pick up a go.work from anywhere above the temp dir.
export GOWORK=off

work=$(mktemp -d "${TMPDIR:-/tmp}/warren-conformance.XXXXXX")
server_pid=""

stop_server() {
	if [[ -n "$server_pid" ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
	fi
}

cleanup() {
	stop_server
	if [[ "${CONFORMANCE_KEEP:-}" == 1 ]]; then
		echo "conformance: work dir kept at $work" >&2
	else
		# The module cache copy is read-only until chmod; Go's own test cache
		# is elsewhere, so removing the dir is all there is to clean.
		chmod -R u+w "$work" 2>/dev/null || true
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
	echo "conformance: $*" >&2
	exit 1
}

# 1. The client's source: the module cache (downloaded through the proxy if
# missing), copied because the cache is read-only and go test writes next to
# the sources (and we must not touch the cache's files).
moddir=$(cd "$repo" && go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
[[ -n "$moddir" && -d "$moddir" ]] || die "go mod download found no directory for $module@$version"
cp -R "$moddir" "$work/amqp091-go"
chmod -R u+w "$work/amqp091-go"

# 2. Build the server and the client's test binary once. One test binary run
# once per test (below) instead of one `go test -v` over the suite: a test that
# hangs or panics, or a goroutine leak (the suite's TestMain runs goleak),
# then counts against that test alone instead of ending the run and hiding
# every later result.
(cd "$repo" && go build -o "$work/warren-server" ./cmd/warren) || die "cannot build cmd/warren"
(cd "$work/amqp091-go" && go test -c -tags integration -o "$work/amqp091.test" .) ||
	die "cannot build $module's integration tests"

server_log="$work/server.log"
server_addr=""

# start_server starts Warren in memory on a port the kernel picks (-addr
# 127.0.0.1:0, so no race between choosing a free port and binding it) and
# waits for the "listening on <addr>" line it prints once clients can connect.
start_server() {
	: >"$work/server.out"
	# -product RabbitMQ: several tests run their body only for that product
	# (Warren implements the RabbitMQ behaviour they check). -http: the
	# connection-recovery tests drop their connection through the management
	# API, which they hardcode at localhost:15672.
	"$work/warren-server" -memory -addr 127.0.0.1:0 -http 127.0.0.1:15672 -product RabbitMQ <"/dev/null" >"$work/server.out" 2>>"$server_log" &
	server_pid=$!
	local i line
	for ((i = 0; i < 300; i++)); do
		line=$(sed -n 's/^listening on //p' "$work/server.out")
		if [[ -n "$line" ]]; then
			server_addr=$line
			# Belt and braces: the port answers before any test dials it.
			if (exec 3<>"/dev/tcp/${server_addr%:*}/${server_addr##*:}") 2>/dev/null; then
				return 0
			fi
		fi
		kill -0 "$server_pid" 2>/dev/null || {
			cat "$server_log" >&2
			die "server exited before listening"
		}
		sleep 0.1
	done
	die "server did not listen within 30s"
}

start_server
echo "conformance: Warren on $server_addr, $module $version"

# 3. Every test, example and fuzz seed corpus the suite has (benchmarks are not
# run by go test without -bench, so neither are they here). Plain files and
# grep rather than mapfile and associative arrays: macOS still ships bash 3.2.
"$work/amqp091.test" -test.list '.*' | grep -E '^(Test|Example|Fuzz)' >"$work/suite" || true
grep -E -- "$filter" "$work/suite" >"$work/selected" || die "no tests match '$filter'"

# The allowed-failure list: "TestName  # reason"; blank lines and comments
# ignored. A reason that starts with FLAKY marks a test that fails only
# sometimes (a race in Warren): it may pass or fail without failing the run,
# so it cannot go stale; such an entry is a bug to fix, not to keep.
sed -e 's/#.*//' "$allowed" | awk 'NF { print $1 }' >"$work/listed"
sed -n -e 's/^[[:space:]]*\([^#[:space:]]*\)[[:space:]]*#[[:space:]]*FLAKY.*/\1/p' "$allowed" >"$work/flaky"
is_listed() { grep -qxF -- "$1" "$work/listed"; }
is_flaky() { grep -qxF -- "$1" "$work/flaky"; }

mkdir -p "$work/logs"
passed=0 failed=0 skipped=0
unexpected="" stale="" server_deaths=""

# The loop reads the test names on stdin; everything it starts reads /dev/null.
while IFS= read -r t; do
	log="$work/logs/$t.log"
	server_lines=$(wc -l <"$server_log")
	set +e
	(cd "$work/amqp091-go" && AMQP_URL="amqp://guest:guest@$server_addr/" \
		"$work/amqp091.test" -test.run "^${t}\$" -test.count=1 -test.v -test.timeout "$per_test_timeout") <"/dev/null" >"$log" 2>&1
	rc=$?
	set -e

	# Top-level results are the unindented "--- RESULT: Name (…)" lines.
	if grep -q -- "^--- FAIL: $t " "$log" || [[ $rc -ne 0 ]]; then
		result=FAIL
	elif grep -q -- "^--- SKIP: $t " "$log"; then
		result=SKIP
	elif grep -q -- "^--- PASS: $t " "$log"; then
		result=PASS
	else
		# Exit 0 and no verdict: the binary did not run the test.
		result=FAIL
	fi

	note=""
	if [[ $result == FAIL && $rc -ne 0 ]] && grep -q -- "^--- PASS: $t " "$log"; then
		note=" (passed, then the process failed: $(grep -m1 -E '^goleak|found unexpected goroutines|panic:' "$log" || echo "exit $rc"))"
	fi
	if grep -q '^panic: test timed out' "$log"; then
		note=" (timed out after $per_test_timeout)"
	fi

	case $result in
	PASS) passed=$((passed + 1)) ;;
	SKIP) skipped=$((skipped + 1)) ;;
	FAIL) failed=$((failed + 1)) ;;
	esac

	mark="" allowed_to_fail=""
	if is_listed "$t"; then allowed_to_fail=1; fi
	if [[ $result == FAIL && -z "$allowed_to_fail" ]]; then
		unexpected="$unexpected $t"
		mark="   <- not on the allowed-failure list"
	elif [[ -n "$allowed_to_fail" ]] && is_flaky "$t"; then
		mark="   (listed as FLAKY)"
	elif [[ $result != FAIL && -n "$allowed_to_fail" ]]; then
		stale="$stale $t"
		mark="   <- listed as allowed to fail; remove it from the list"
	elif [[ $result == FAIL ]]; then
		mark="   (allowed)"
	fi
	printf '%-4s %s%s%s\n' "$result" "$t" "$note" "$mark"

	# An unexpected failure shows its own output and what the server logged
	# meanwhile, so CI's log is enough to start diagnosing.
	if [[ $result == FAIL && -z "$allowed_to_fail" ]]; then
		tail -n 40 "$log" | sed 's/^/	| /'
		tail -n "+$((server_lines + 1))" "$server_log" | tail -n 20 | sed 's/^/	server| /'
	fi

	if ! kill -0 "$server_pid" 2>/dev/null; then
		server_deaths="$server_deaths $t"
		echo "conformance: the server died during $t; its log:" >&2
		tail -n 60 "$server_log" >&2
		wait "$server_pid" 2>/dev/null || true
		server_pid=""
		start_server
	fi
done <"$work/selected"

status=0
# A listed name the suite does not have is stale too (a typo, or a test
# upstream renamed or removed).
while IFS= read -r name; do
	if ! grep -qxF -- "$name" "$work/suite"; then
		echo "conformance: $name is on the allowed-failure list but not in the suite" >&2
		status=1
	fi
done <"$work/listed"
if [[ -n "$unexpected" ]]; then
	echo "conformance: failed and not allowed to:$unexpected" >&2
	status=1
fi
if [[ -n "$stale" ]]; then
	echo "conformance: listed as allowed to fail but did not fail (remove from conformance/allowed-failures.txt):$stale" >&2
	status=1
fi
if [[ -n "$server_deaths" ]]; then
	echo "conformance: the server died during:$server_deaths" >&2
	status=1
fi
echo "conformance: $passed passed, $failed failed, $skipped skipped"
exit $status
