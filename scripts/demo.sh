#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The main job: format an OCFS2 volume image with ocfs2ctl, mount it through
# the ocfs2d FUSE daemon, copy a real directory tree in with cp, show it,
# reflink a file on the mounted volume and change the copy, unmount, and
# have the real ocfs2-tools judge the result.  Then a real two-node
# corosync + pacemaker cluster on this machine (network, mount, IPC and UTS
# namespaces on a private bridge) serves a volume through the resource
# agent ocf:ocfs2d:volume, one node at a time: placed, moved by standby,
# recovered after its daemon is killed.  Before that, three corosync nodes
# mount one pcmk volume through the cluster: each mount claims a slot of its
# own under the super lock, and a node beyond the slots is refused; then
# three nodes mount one volume read-write at once, and every change one
# makes is what the others read next.
set -eu
cd "$(dirname "$0")/.."
./scripts/setup.sh

ctl=$PWD/build/cli/ocfs2ctl
work=$(mktemp -d /tmp/ocfs2d-demo.XXXXXX)
img="$work/volume.img"
mnt="$work/mnt"
tree=/usr/include # a real tree of thousands of files (set up by the build)
export OCFS2D_CONTROL="$work/control.sock" # a daemon of our own, not the system's
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { $ctl umount -f "$mnt" >/dev/null 2>&1 || umount -l "$mnt"; }
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "Format a 1 GiB volume image with ocfs2ctl (a local, single-node volume)"
truncate -s 1G "$img"
$ctl format -q -b 4096 -C 4096 -M local -J size=16M -L demo "$img"
$ctl info "$img" | sed -n '1,12p'

step "Mount it through ocfs2d (FUSE); ocfs2ctl asks the daemon through its D-Bus API"
mkdir "$mnt"
$ctl mount "$img" "$mnt" 2>/dev/null
mount | grep " $mnt "
$ctl mounts --json

step "Copy a real directory tree in with cp -a ($tree: $(find "$tree" -type f | wc -l) files)"
start=$(date +%s%N)
cp -a "$tree" "$mnt/tree"
sync
end=$(date +%s%N)
echo "copied in $(( (end - start) / 1000000 )) ms"
ln -s tree/stdio.h "$mnt/stdio-link"
mkdir "$mnt/empty-dir"
ls -l "$mnt" | head -n 8
df -h "$mnt"
du -sh "$mnt/tree"

step "Read back through the mount: identical to the original"
diff -r --no-dereference "$tree" "$mnt/tree" && echo "$mnt/tree equals $tree"

step "A reflink of a 64 MiB file: a copy that shares its clusters until one of them changes"
head -c 64M /dev/urandom >"$mnt/big"
sync
free0=$(df --output=avail -B1M "$mnt" | tail -n 1)
$ctl reflink "$img" /big /big-copy
free1=$(df --output=avail -B1M "$mnt" | tail -n 1)
echo "free space: $free0 MiB before the reflink, $free1 MiB after"
sum0=$(md5sum <"$mnt/big")
printf 'changed' | dd of="$mnt/big-copy" bs=1 seek=1000000 conv=notrunc status=none
ndiff=$(cmp -l "$mnt/big" "$mnt/big-copy" | wc -l)
[ "$(md5sum <"$mnt/big")" = "$sum0" ] && echo "wrote 7 bytes into the copy: $ndiff bytes differ," \
	"the original is untouched (the copy got its own copy of that one cluster)"

step "Unmount cleanly"
$ctl umount "$mnt"

step "The real fsck.ocfs2 judges the volume"
fsck.ocfs2 -fn "$img" | tail -n 2

step "The real debugfs.ocfs2 dumps the tree back, identical to the original"
debugfs.ocfs2 -R "rdump /tree $work" "$img" >/dev/null 2>&1
if diff -r --no-dereference "$tree" "$work/tree"; then
	echo "rdump of /tree equals $tree"
else
	echo "rdump differs from $tree" >&2
	exit 1
fi

step "ocfs2ctl reads it offline too"
$ctl ls -l "$img" / | head -n 8

step "A file that is not OCFS2 gets one clear line"
head -c 1048576 /dev/urandom > "$work/garbage.img"
$ctl info "$work/garbage.img" || true

step "Three corosync nodes (this machine, namespaces), each with its own loop device over one pcmk volume: a slot each in the slot map"
PYTHONPATH=tests python3 tests/cluster/test_cluster_mount.py "$ctl"

step "Three nodes mount one volume read-write at once: each change on one is what the others read next, under OCFS2's inode locks"
PYTHONPATH=tests python3 tests/cluster/test_cluster_share.py "$ctl"

step "Pacemaker serves a volume on a two-node cluster (this machine, namespaces): placement, standby, a killed daemon"
PYTHONPATH=tests python3 tests/cluster/test_pacemaker.py "$ctl" ra/volume
