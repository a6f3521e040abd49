#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Regenerate the seed corpora in tests/fuzz/corpus/ (committed; small: the
# images are stored sparsely, only the sectors that hold something).
#   - fscore's own output: fuzz_make_seeds generate (volumes from o2_mkfs,
#     before and after a workload and after a crash; their journals for
#     fuzz_replay; operation sequences for fuzz_ops);
#   - real mkfs.ocfs2 volumes (skipped without it), the smallest it makes:
#     512-byte and 4K blocks, 4K clusters, one slot, a 4 MiB journal;
#   - volumes with xattrs inline, in a block and in buckets (test_xattr);
#   - the D-Bus API's calls (fuzz_make_dbus_seeds).
#
#   tests/fuzz/make-corpus.sh [BUILD_DIR]   (default build-fuzz; it is set up
#                                           and fuzz_make_seeds built if needed)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${1:-$top/build-fuzz}
if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" "$top" -Ddaemon=disabled >/dev/null
fi
ninja -C "$build" tests/fuzz/fuzz_make_seeds tests/fuzz/fuzz_make_dbus_seeds >/dev/null
seeds=$build/tests/fuzz/fuzz_make_seeds

out=$here/corpus
rm -f "$out"/fuzz_open_walk/* "$out"/fuzz_replay/* "$out"/fuzz_ops/* "$out"/fuzz_locktab/* "$out"/fuzz_dbus/*
"$seeds" generate "$out"
"$build/tests/fuzz/fuzz_make_dbus_seeds" "$out"

if ! command -v mkfs.ocfs2 >/dev/null 2>&1; then
	echo "mkfs.ocfs2 not found: no seeds from the real tools" >&2
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# name, size, flags for fuzz_open_walk (1: recompute metaecc checks), mkfs.ocfs2 options
while read -r name size flags opts; do
	img=$tmp/$name.img
	truncate -s "$size" "$img"
	# shellcheck disable=SC2086
	mkfs.ocfs2 -q -F -M local -N 1 -C 4K -J size=4M -L fuzz $opts "$img" </dev/null >/dev/null
	"$seeds" encode "$img" "$out/fuzz_open_walk/mkfs-$name" "$flags"
done <<'LIST'
512-default 6M 0 -b 512
512-max-features 6M 1 -b 512 --fs-feature-level=max-features
1k-max-compat 12M 0 -b 1K --fs-feature-level=max-compat
4k-default 16M 0 -b 4K
LIST
# volumes carrying xattrs in every kind of store, laid out by the xattr test
# (fsck.ocfs2 judges them clean there)
ninja -C "$build" tests/corrupt/test_xattr >/dev/null
if O2_XATTR_IMAGES=$tmp CK_VERBOSITY=silent "$build/tests/corrupt/test_xattr"; then
	"$seeds" encode "$tmp/xattr-4096.img" "$out/fuzz_open_walk/xattr-4k" 0
	"$seeds" encode "$tmp/xattr-1024.img" "$out/fuzz_open_walk/xattr-1k-ecc" 1
fi
