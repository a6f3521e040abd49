#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The main job, for now: make an OCFS2 volume with the real mkfs.ocfs2 and
# show what ocfs2d's fscore reads from it through ocfs2ctl.  (Formatting,
# mounting and the multi-node cluster arrive with later issues.)
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh

ctl=./build/cli/ocfs2ctl
work=$(mktemp -d /tmp/ocfs2d-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
img="$work/volume.img"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Make a 1 GiB OCFS2 volume image with the real mkfs.ocfs2 (4 slots, pcmk stack)"
truncate -s 1G "$img"
mkfs.ocfs2 -q -b 4096 -C 4096 -N 4 -J size=16M -L demo \
	--cluster-stack=pcmk --cluster-name=democluster "$img" >/dev/null
echo "mkfs.ocfs2 made $img"

step "ocfs2ctl info: the superblock as ocfs2d reads it"
$ctl info "$img"

step "ocfs2ctl ls -l /: the root directory"
$ctl ls -l "$img" /

step "ocfs2ctl ls -l //: the system directory"
$ctl ls -l "$img" //

step "ocfs2ctl stat //global_bitmap: the cluster allocator"
$ctl stat "$img" //global_bitmap

step "ocfs2ctl slots: the slot map"
$ctl slots "$img"

step "ocfs2ctl check: read and validate every block of every system file and directory"
$ctl check "$img"

step "The same volume judged by the real fsck.ocfs2"
fsck.ocfs2 -fn "$img" | tail -n 2

step "A file that is not OCFS2 gets one clear line"
head -c 1048576 /dev/urandom > "$work/garbage.img"
$ctl info "$work/garbage.img" || true
