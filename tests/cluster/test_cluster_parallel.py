#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Two writers on one volume in parallel, without the global bitmap's lock
for each change; frees into another node's slot.

Two corosync nodes (o2test.cluster), one pcmk volume, a loop device each.
Each node writes on a slot of its own and changes its own allocators
under their own cluster locks, cached for the mount; the global bitmap's
lock moves only when a local-alloc window moves, an allocator grows or a
truncate log is flushed (docs/ARCHITECTURE.md, "Cluster locks").

  1. n1 and n2 mount read-write on slots 0 and 1.
  2. At once, each node creates FILES files with a block of data each in a
     directory of its own, then removes them.  The times one node asks the
     other for a lock it holds (BLOCKING events, counted by the daemons'
     lock caches) stay below one in 20 changes: with the global bitmap's
     lock taken by every change, nearly each change following one of the
     other node's moved it.  The lock messages are shown.
  3. Frees into another slot: n1 makes files (their inodes from slot 0's
     inode allocator) and one with a deep extent tree (extent blocks from
     slot 0's extent allocator); n2 removes them all, freeing into slot
     0's allocators under their locks after its transactions; n1 then
     makes files again from those allocators, and both nodes see the same
     tree and count the same free space.
  4. Both unmount; fsck.ocfs2 -fn is clean (a free lost on the way would
     leave a block allocated that nothing uses); no daemon logged a
     sanitizer report or a critical error.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_parallel.py OCFS2CTL
"""
import os
import sys
import time

from o2test.cluster import shared_volume_args, free_clusters, fail, fsck_clean, run_at_once, same_everywhere
from o2test.cluster import shared_volume, slot_map

FILES = 300

# Inside a node: create argv[2] files of one block in directory argv[1],
# then remove them; print how long each half took.
CHURN = """
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
t0 = time.monotonic()
for i in range(n):
    with open(os.path.join(d, "f%d" % i), "wb") as f:
        f.write(b"x" * 4096)
t1 = time.monotonic()
for i in range(n):
    os.unlink(os.path.join(d, "f%d" % i))
t2 = time.monotonic()
print("%.3f %.3f" % (t1 - t0, t2 - t1))
"""

# 4 KiB pieces at every other block of a file: one extent each, so the
# tree grows extent blocks
PIECES = ('python3 -c "import os; fd = os.open(\'{f}\', os.O_WRONLY | os.O_CREAT); '
          '[os.pwrite(fd, b\'p\' * 4096, i * 2 * 4096) for i in range(600)]"')


def run(ctl, img, mnt, n1, n2):
    nodes = (n1, n2)
    for m in nodes:
        m.must_mount()
    if slot_map(ctl, img) != {0: 1, 1: 2} or [m.slot() for m in nodes] != [0, 1]:
        fail(f"slot map with two writers: {slot_map(ctl, img)}")
    print("1. n1 and n2 mounted read-write on slots 0 and 1")

    # the first allocations of each slot (windows, allocator groups) are not counted
    for m in nodes:
        m.sh(f"mkdir -p {mnt}/d{m.node.nodeid} && printf w > {mnt}/d{m.node.nodeid}/warm")
    before = [m.locks() for m in nodes]
    outs = run_at_once(nodes, lambda m: ["python3", "-c", CHURN, f"{mnt}/d{m.node.nodeid}",
                                         str(FILES)], 300, "parallel churn")
    after = [m.locks() for m in nodes]
    sent = [a["messages"] - b["messages"] for a, b in zip(after, before)]
    asked = [a["blocking"] - b["blocking"] for a, b in zip(after, before)]
    changes = 2 * 2 * FILES
    times = [tuple(float(x) for x in o.split()) for o in outs]
    # Each new inode costs its own locks (inode, open) whoever else runs;
    # what sharing adds is another node asking for a lock this one holds.
    if sum(asked) * 20 > changes:
        fail(f"{changes} changes on two nodes in directories of their own: the nodes asked "
             f"each other for locks {asked} times (more than once in 20 changes); "
             f"{sent} lock messages")
    same_everywhere(n1, [n2], "after the parallel churn")
    print(f"2. n1 and n2 each created and removed {FILES} files at once: the nodes asked each "
          f"other for a lock {sum(asked)} times in {changes} changes ({asked[0]} + "
          f"{asked[1]}); {sum(sent)} lock messages ({sent[0]} + {sent[1]}, "
          f"{sum(sent) / changes:.2f} a change); create/unlink seconds {times}")

    n1.sh(f"mkdir {mnt}/theirs && for i in $(seq 1 50); do printf $i > {mnt}/theirs/f$i; done")
    n1.sh(PIECES.format(f=f"{mnt}/theirs/deep"))
    n2.sh(f"rm -r {mnt}/theirs")
    n1.sh(f"mkdir {mnt}/again && for i in $(seq 1 50); do printf $i > {mnt}/again/g$i; done")
    n1.sh(PIECES.format(f=f"{mnt}/again/deep"))
    same_everywhere(n1, [n2], "after frees into another slot")
    # a node's ticker may still be flushing its truncate log (clusters
    # freed above go back to the global bitmap a moment later): the two
    # counts must agree once that background work is done
    deadline = time.monotonic() + 30
    f1, f2 = free_clusters(n1), free_clusters(n2)
    while f1 != f2 and time.monotonic() < deadline:
        time.sleep(0.5)
        f1, f2 = free_clusters(n1), free_clusters(n2)
    if f1 != f2:
        fail(f"statfs: n1 counts {f1} free clusters, n2 {f2} (after 30 s)")
    print(f"3. n2 removed 51 files n1 made (one with a deep extent tree): freed into slot 0's "
          f"allocators; n1 made as many again; both see one tree, {f1} free clusters")

    for m in (n2, n1):
        m.umount()
    if slot_map(ctl, img):
        fail(f"after every unmount the slot map holds {slot_map(ctl, img)}")
    fsck_clean(img, "after every unmount")
    print("4. both unmounted: slot map empty, fsck.ocfs2 -fn clean")


def main():
    ctl, _ = shared_volume_args(__doc__)
    with shared_volume(ctl, "ocfs2d-parallel-", 256 << 20, ["-b", "4096", "-J", "size=4M"],
                       nodes=2) as (img, mnt, (n1, n2)):
        run(ctl, img, mnt, n1, n2)
    print("PASS")


if __name__ == "__main__":
    main()
