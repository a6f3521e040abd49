#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Bounded fuzzing of fscore and the cluster lock table: build the libFuzzer targets (clang, in
# build-fuzzer/ at the top of the tree) and run each for SECONDS, one at a
# time, on one core.  Prints the executions (libFuzzer's final
# stat::number_of_executed_units) and the findings per target.  Crash, leak
# and timeout inputs go to tests/fuzz/findings/<target>/; new coverage goes
# to a scratch corpus in build-fuzzer/ (the committed seeds are read, never
# written).
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Environment: FUZZ_BUILD (build directory, default build-fuzzer),
# FUZZ_ARGS (more libFuzzer options), CC (default clang), FUZZ_KEEP_GOING=1
# (go on after a finding: -fork=1 -ignore_crashes=1, still one fuzzing
# process at a time; the executions are then libFuzzer's last count).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-fuzz_open_walk fuzz_replay fuzz_ops fuzz_locktab fuzz_dbus}
build=${FUZZ_BUILD:-$top/build-fuzzer}

if [ ! -f "$build/build.ninja" ]; then
	CC=${CC:-clang} meson setup "$build" "$top" -Dfuzz=true -Ddaemon=disabled \
		-Db_sanitize=none -Dbuildtype=debugoptimized >/dev/null
fi
# shellcheck disable=SC2086
ninja -C "$build" $(for t in $targets; do printf 'tests/fuzz/%s ' "$t"; done) >/dev/null

printf '%-16s %8s %12s %9s %s\n' target seconds executions findings corpus
status=0
for t in $targets; do
	findings="$here/findings/$t"
	work="$build/fuzz-corpus/$t"
	log="$build/fuzz-$t.log"
	mkdir -p "$findings" "$work"
	marker="$build/fuzz-$t.start"
	: >"$marker"
	before=$(find "$findings" -type f | wc -l)
	# one process, one core (no -jobs, -workers or -fork=N>1: they would spawn more)
	keep=
	[ "${FUZZ_KEEP_GOING:-0}" = 1 ] && keep="-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1"
	# shellcheck disable=SC2086
	"$build/tests/fuzz/$t" -max_total_time="$secs" -print_final_stats=1 $keep \
		-max_len=262144 -timeout=60 -rss_limit_mb=4096 -artifact_prefix="$findings/" \
		${FUZZ_ARGS:-} "$work" "$here/corpus/$t" "$here/regress/$t" >"$log" 2>&1 || true
	after=$(find "$findings" -type f | wc -l)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	[ -n "$execs" ] || execs=$(grep -o '#[0-9]*' "$log" | tail -n 1 | tr -d '#')
	new=$((after - before))
	printf '%-16s %8s %12s %9s %s\n' "$t" "$secs" "${execs:-?}" "$new" "$(find "$work" -type f | wc -l) files"
	if [ "$new" -gt 0 ]; then
		status=1
		# what each new input does, replayed alone
		find "$findings" -type f -newer "$marker" | sort | while read -r f; do
			what=$("$build/tests/fuzz/$t" "$f" 2>&1 |
				grep -m 1 -E 'FUZZ FINDING|runtime error|ERROR: AddressSanitizer|ERROR: libFuzzer' ||
				echo "(does not reproduce alone)")
			printf '    %s: %s\n' "$(basename "$f")" "$what"
		done
		echo "    log: $log"
	fi
done
exit $status
