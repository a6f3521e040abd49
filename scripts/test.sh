#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The whole test suite: set up, build, run every meson suite; then build once
# more with AddressSanitizer + UBSan and run again, under it, what sanitizers
# judge best: the unit, crash (fault injection, sampled Ns), corrupt, journal
# and fuzz suites and the cases tagged 'sanitize' (model and FUSE, fault and
# ENOMEM included).  Scratch files go to a tmpfs of the suite's own.  The
# last line is the tally: "N passed, N failed[, N skipped]".
set -u
cd "$(dirname "$0")/.."
./scripts/setup.sh || exit 1

logdir=build/meson-logs

# Volume images, fsck copies and rdump trees on a tmpfs: on a slow or noisy
# disk they, not the code under test, set the pace.  (Tests that meson runs
# directly use $TMPDIR or /tmp.)
scratch=$(mktemp -d /tmp/ocfs2d-tests.XXXXXX) || exit 1
if mount -t tmpfs -o size=60%,mode=1777 ocfs2d-tests "$scratch" 2>/dev/null; then
	trap 'umount -l "$scratch" 2>/dev/null; rmdir "$scratch" 2>/dev/null' EXIT
else
	echo "note: no tmpfs for scratch files (not root?); using $scratch on disk"
	chmod 1777 "$scratch"
	trap 'rm -rf "$scratch" 2>/dev/null' EXIT
fi
export TMPDIR="$scratch"
status=0
total_ok=0 total_fail=0 total_skip=0

tally() {
	# meson prints "Ok: N", "Fail: N", "Skipped: N", "Timeout: N", ... at the end
	out="$1"
	ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	ex=$(sed -n 's/^Expected Fail: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	up=$(sed -n 's/^Unexpected Pass: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	to=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	skip=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$out" | tail -n1)
	total_ok=$((total_ok + ${ok:-0} + ${ex:-0}))
	total_fail=$((total_fail + ${fail:-0} + ${up:-0} + ${to:-0}))
	total_skip=$((total_skip + ${skip:-0}))
}

echo "== full suite (build/)"
meson test -C build --print-errorlogs --num-processes 2 2>&1 | tee "$logdir/suite-summary.txt"
tally "$logdir/suite-summary.txt"

echo "== ASan+UBSan build (build-asan/): unit, crash, corrupt, journal, fuzz and sanitize suites"
if [ ! -f build-asan/build.ninja ]; then
	meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
if ninja -C build-asan >/dev/null; then
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		meson test -C build-asan --print-errorlogs --num-processes 2 \
		--suite unit --suite crash --suite corrupt --suite journal --suite fuzz \
		--suite sanitize \
		2>&1 | tee build-asan/suite-summary.txt
	tally build-asan/suite-summary.txt
else
	echo "ASan build failed"
	total_fail=$((total_fail + 1))
fi

[ "$total_fail" -eq 0 ] || status=1
if [ "$total_skip" -gt 0 ]; then
	echo "$total_ok passed, $total_fail failed, $total_skip skipped"
else
	echo "$total_ok passed, $total_fail failed"
fi
exit $status
