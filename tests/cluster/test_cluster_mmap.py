#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared writable mappings across nodes, as on kernel OCFS2: no msync.

Three corosync nodes (o2test.cluster), one pcmk volume, a loop device per
node over it (direct I/O: they share the disk, not a page cache).  Each
node maps one 64 KiB file MAP_SHARED, read-write (mmap_worker.py).

  1. n1, n2 and n3 mount read-write; n1 makes the file; each node maps it.
  2. Rounds that alternate the writer: one node stores a new pattern into
     every page through its mapping, with no msync and no fsync, and says
     so (here: answers on its pipe); then each of the other two reads the
     file with pread() and through its own mapping, and both must show
     that round's pattern.  FUSE tells the daemon nothing of a store, so
     this holds only because a node that has the file open for writing
     takes its lock EX even to read (every page it can dirty was read
     under EX) and gives the lock up only after the kernel wrote its dirty
     pages back and dropped them.  A watchdog fails the test if any step
     takes more than 60 s (a deadlock between a page lock and a cluster
     lock).
  3. A plain reader: n3 opens the file read-only and reads it whole
     (cat), after n2 stored: the last pattern, through the page cache it
     keeps under its PR lock.
  4. All unmount; fsck.ocfs2 -fn is clean; no daemon logged a sanitizer
     report or a critical error.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_mmap.py OCFS2CTL
"""
import os
import select
import subprocess
import sys
import time

from o2test.cluster import shared_volume_args, fail, fsck_clean, shared_volume

SIZE = 64 << 10
ROUNDS = 12
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mmap_worker.py")
sys.path.insert(0, os.path.dirname(WORKER))
from mmap_worker import pattern  # noqa: E402  (the workers' own pattern)


class Worker:
    def __init__(self, m, path):
        self.m = m
        self.p = subprocess.Popen(m.node.enter() + ["python3", WORKER, path, str(SIZE)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)

    def ask(self, line, limit=60.0):
        t0 = time.monotonic()
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], limit)
        if not ready:
            fail(f"n{self.m.node.nodeid}: `{line}` still waits after {limit:.0f} s "
                 f"(a deadlock?)\n{self.m.log()}")
        answer = self.p.stdout.readline().strip()
        if answer != "ok":
            err = self.p.stderr.read() if self.p.poll() is not None else ""
            fail(f"n{self.m.node.nodeid}: `{line}` answered {answer!r} {err}")
        return time.monotonic() - t0

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.close()
        if self.p.wait(timeout=60) != 0:
            fail(f"n{self.m.node.nodeid}: the mapping worker exited {self.p.returncode}: "
                 f"{self.p.stderr.read()}")


def run(img, mnt, nodes):
    for m in nodes:
        m.must_mount()
    path = os.path.join(mnt, "mapped")
    nodes[0].sh(f"head -c {SIZE} /dev/zero > {path}")
    workers = [Worker(m, path) for m in nodes]
    print(f"1. n1, n2 and n3 mounted read-write; each maps {path} ({SIZE} bytes) MAP_SHARED")

    slowest = 0.0
    for rnd in range(ROUNDS):
        w = rnd % 3
        writer = nodes[w].node.nodeid
        slowest = max(slowest, workers[w].ask(f"store {rnd} {writer}"))
        for i, other in enumerate(workers):
            if i != w:
                slowest = max(slowest, other.ask(f"check {rnd} {writer}"))
    print(f"2. {ROUNDS} rounds: stores through one node's mapping (no msync) read at once by "
          f"the other two with pread() and through their mappings (slowest step {slowest:.2f} s)")

    last = ROUNDS - 1
    got = nodes[2].node.run(["python3", "-c", f"import sys; sys.stdout.buffer.write("
                             f"open({path!r}, 'rb').read())"])
    if got.returncode != 0 or got.stdout.encode() != pattern(last, nodes[last % 3].node.nodeid, SIZE):
        fail(f"n3's read-only open does not read round {last}: {got.stdout[:60]!r} {got.stderr}")
    print("3. n3 read the file through a read-only open: the last round's pattern")

    for wk in workers:
        wk.quit()
    for m in reversed(nodes):
        m.umount()
    fsck_clean(img, "after every unmount")
    print("4. all unmounted: fsck.ocfs2 -fn clean")


def main():
    ctl, _ = shared_volume_args(__doc__)
    with shared_volume(ctl, "ocfs2d-mmap-", 128 << 20, ["-b", "4096", "-J", "size=4M"]) as (
            img, mnt, nodes):
        run(img, mnt, nodes)
    print("PASS")


if __name__ == "__main__":
    main()
