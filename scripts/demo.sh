#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The main job, for now: format an OCFS2 volume with ocfs2ctl, copy a real
# directory tree into it through fscore, show it, and have the real
# ocfs2-tools judge the result.  (Mounting through FUSE and the multi-node
# cluster arrive with later issues.)
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh

ctl=./build/cli/ocfs2ctl
work=$(mktemp -d /tmp/ocfs2d-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
img="$work/volume.img"
tree=fscore # a real tree: our own sources

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Format a 1 GiB volume image with ocfs2ctl (4 slots, pcmk stack)"
truncate -s 1G "$img"
$ctl format -q -b 4096 -C 4096 -N 4 -J size=16M -L demo \
	--cluster-stack=pcmk --cluster-name=democluster "$img"
$ctl info "$img"

step "Copy a real directory tree in ($tree/, $(find "$tree" -type f | wc -l) files)"
$ctl put -r "$img" "$tree" /demo
$ctl mkdir "$img" /demo/empty-dir
$ctl ln -s "$img" /demo/o2fs.h /demo/link-to-header
$ctl ls -l "$img" /demo | head -n 12

step "Read a file back"
$ctl cat "$img" /demo/format.h | sed -n '1,6p'

step "ocfs2ctl check: read and validate every block reachable"
$ctl check "$img"

step "The real fsck.ocfs2 judges the volume"
fsck.ocfs2 -fn "$img" | tail -n 2

step "The real debugfs.ocfs2 dumps the tree back, identical to the original"
debugfs.ocfs2 -R "rdump /demo $work" "$img" >/dev/null 2>&1
if diff -r "$tree" "$work/demo" -x empty-dir -x link-to-header; then
	echo "rdump of /demo equals $tree/"
else
	echo "rdump differs from $tree/" >&2
	exit 1
fi

step "A file that is not OCFS2 gets one clear line"
head -c 1048576 /dev/urandom > "$work/garbage.img"
$ctl info "$work/garbage.img" || true
