#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A fourth node joins a cluster whose members cache 100,000 inode locks.

Four corosync nodes in namespaces of their own (o2test.cluster), one pcmk
volume image and a loop device per node over it.

  1. The volume gets 100,000 files (JOIN_FILES) in 100 directories
     offline (`ocfs2ctl put -r` of a host tree: seconds, where creating
     them through a mount takes minutes on a loaded machine).
  2. n1, n2 and n3 mount it and stat-walk a third of the directories each,
     at once: each file's M lock is taken PR and stays cached (lock_cache
     is large enough), so the group's lock table holds at least 100,000
     inode locks, counted from each daemon's lock cache (ClusterState).
  3. n4 mounts: its lock service joins the group and is brought up to date
     by one snapshot of that table.  The mount must be done within
     JOIN_BOUND seconds (default 60: the snapshot itself takes about a
     second; the rest is a mount on a 2-core machine other tests load).
  4. n4 is a member like the others: a file it writes is read on n1, a
     file among the 100,000 that n2 rewrites (n1, n2 and n3 hold its lock)
     is read new on n4, with no sleep.
  5. Idle locks are let go: n4 mounted with lock_cache=1000 and walks
     5,000 files; it ends with about 1,000 locks cached, the rest dropped.
  6. An open-unlinked file costs an idle cluster no lock traffic: n3 holds
     a file open, n1 unlinks it (an orphan in slot 0, which n1 may not
     free while n3 has it open); over the next seconds the four nodes send
     (almost) no lock message, although n1 looks at its orphans every
     second.  Once n3 closes it, the space comes back.
  7. All unmount; the slot map is empty and fsck.ocfs2 -fn is clean.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_join.py OCFS2CTL
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

from o2test.cluster import fail, fsck_clean, host, need_cluster_tools, run_at_once
from o2test.cluster import shared_volume, skip, slot_map

FILES = int(os.environ.get("JOIN_FILES", "100000"))
BOUND = float(os.environ.get("JOIN_BOUND", "60"))
DIRS = 100
LRU = 1000

# Inside a node: stat every file of the directories argv[2:] under
# argv[1], a directory per thread (WALK_THREADS at once: each stat of a
# file whose lock is not cached waits for a lock message, and the waits
# overlap); print how many and how long it took.
THREADS = int(os.environ.get("WALK_THREADS", "8"))
WALK = """
import os, sys, time
from concurrent.futures import ThreadPoolExecutor
def one(d):
    n = 0
    for e in os.scandir(os.path.join(sys.argv[1], d)):
        os.stat(e.path)
        n += 1
    return n
t0 = time.monotonic()
with ThreadPoolExecutor(%d) as pool:
    n = sum(pool.map(one, sys.argv[2:]))
print(n, round(time.monotonic() - t0, 3))
""" % THREADS


def walk(nodes, dirs_of, what, timeout=600):
    outs = run_at_once(nodes, lambda m: ["python3", "-c", WALK, m.mnt] + dirs_of(m), timeout, what)
    return [tuple(float(x) for x in o.split()) for o in outs]


def free_bytes(m):
    """What statfs(2) on m's node counts free, in bytes."""
    r = m.node.run(["python3", "-c",
                    f"import os; s = os.statvfs({m.mnt!r}); print(s.f_bfree * s.f_frsize)"])
    if r.returncode != 0:
        fail(f"n{m.node.nodeid}: statvfs: {r.stderr.strip()}")
    return int(r.stdout)


HOLDER = """
import sys
f = open(sys.argv[1], "rb")
print("open", flush=True)
sys.stdin.readline()
f.close()
print("closed", flush=True)
"""


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    ctl = os.path.abspath(sys.argv[1])
    need_cluster_tools("corosync nodes, loop devices and FUSE mounts",
                       tools=("corosync", "corosync-quorumtool", "unshare", "nsenter", "ip",
                              "losetup", "fsck.ocfs2"))
    if not os.path.exists("/dev/fuse"):
        skip("no /dev/fuse")
    src = tempfile.mkdtemp(prefix="o2join-src-")
    try:
        t0 = time.monotonic()
        per = FILES // DIRS
        for d in range(DIRS):
            os.mkdir(os.path.join(src, f"d{d:03}"))
            for i in range(per):
                open(os.path.join(src, f"d{d:03}", f"f{i:05}"), "w").close()
        # 1 KiB blocks: 100,000 inodes take 100 MiB, not 400
        with shared_volume(ctl, "o2join-", 1 << 30, ["-b", "1K", "-J", "size=8M"],
                           nodes=4) as (img, mnt, ms):
            n1, n2, n3, n4 = ms
            host([ctl, "put", "-r", img, src, "/t"], timeout=600)
            print(f"1. {per * DIRS} files in {DIRS} directories put offline in "
                  f"{time.monotonic() - t0:.1f} s")

            big = f"lock_cache={2 * FILES}"
            for m in (n1, n2, n3):
                m.must_mount(big)
            thirds = {m.node.nodeid: [f"t/d{d:03}" for d in range(DIRS) if d % 3 == i]
                      for i, m in enumerate((n1, n2, n3))}
            t0 = time.monotonic()
            res = walk([n1, n2, n3], lambda m: thirds[m.node.nodeid], "the stat walks")
            total = sum(int(n) for n, _ in res)
            if total != per * DIRS:
                fail(f"the walks stat()ed {total} files, not {per * DIRS}")
            cached = {m.node.nodeid: m.locks()["cached"] for m in (n1, n2, n3)}
            print(f"2. n1-n3 stat-walked a third each in {time.monotonic() - t0:.1f} s "
                  f"({', '.join(f'{s:.1f} s' for _, s in res)}); locks cached: {cached}")
            if sum(cached.values()) < FILES:
                fail(f"the group's table holds {sum(cached.values())} locks, not {FILES}")

            t0 = time.monotonic()
            n4.must_mount(f"lock_cache={LRU}")
            took = time.monotonic() - t0
            print(f"3. n4 mounted in {took:.2f} s beside {sum(cached.values())} cached locks "
                  f"(bound {BOUND:.0f} s)")
            if took > BOUND:
                fail(f"n4's mount took {took:.2f} s, more than {BOUND} s")
            if {n.node.nodeid: n.slot() for n in ms} != {1: 0, 2: 1, 3: 2, 4: 3}:
                fail(f"slots: {[n.slot() for n in ms]}")

            n4.sh(f"printf 'from n4' > {mnt}/t/from4")
            got = n1.sh(f"cat {mnt}/t/from4")
            if got != "from n4":
                fail(f"n1 reads {got!r} from the file n4 wrote")
            victim = f"{mnt}/t/d000/f00000"  # n1 walked it: n1 holds its lock
            n4.sh(f"cat {victim}")
            n2.sh(f"printf 'rewritten on n2' > {victim}")
            for m in (n4, n1, n3):
                got = m.sh(f"cat {victim}")
                if got != "rewritten on n2":
                    fail(f"n{m.node.nodeid} reads {got!r} after n2 rewrote the file")
            print("4. n4 is coherent with the others (its write read on n1, n2's on n4)")

            before = n4.locks()
            res = walk([n4], lambda m: [f"t/d{d:03}" for d in range(5000 // per + 1)],
                       "n4's walk")
            after = n4.locks()
            print(f"5. n4 (lock_cache={LRU}) walked {int(res[0][0])} files in {res[0][1]:.1f} s: "
                  f"{after['cached']} locks cached ({after['idle']} idle), "
                  f"{after['dropped'] - before['dropped']} dropped")
            if after["idle"] > LRU or after["cached"] > LRU + 50:
                fail(f"n4 keeps {after['cached']} locks ({after['idle']} idle), bound {LRU}")
            if after["dropped"] - before["dropped"] < res[0][0] - LRU - 50:
                fail(f"n4 dropped {after['dropped'] - before['dropped']} locks walking "
                     f"{int(res[0][0])} files with a bound of {LRU}")

            n1.sh(f"dd if=/dev/urandom of={mnt}/t/held bs=64k count=16 status=none")
            p = subprocess.Popen(n3.node.enter() + ["python3", "-c", HOLDER, f"{mnt}/t/held"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            try:
                if p.stdout.readline().strip() != "open":
                    fail(f"n3 could not open the file: {p.stderr.read()}")
                free = free_bytes(n1)
                n1.sh(f"rm {mnt}/t/held")
                time.sleep(2)  # n1's first looks at its new orphan
                msgs = {m.node.nodeid: m.locks()["messages"] for m in ms}
                quiet = 10
                time.sleep(quiet)
                sent = {m.node.nodeid: m.locks()["messages"] - msgs[m.node.nodeid] for m in ms}
                print(f"6. lock messages sent in {quiet} s with a file open on n3 and "
                      f"unlinked on n1: {sent}")
                if sum(sent.values()) > quiet // 2:
                    fail(f"an idle cluster with an orphan open elsewhere sent "
                         f"{sum(sent.values())} lock messages in {quiet} s: {sent}")
                if free_bytes(n1) > free:
                    fail("n1 freed the orphan while n3 has it open")
                p.stdin.write("close\n")
                p.stdin.flush()
                if p.stdout.readline().strip() != "closed":
                    fail("n3 did not close the file")
            finally:
                p.kill()
                p.wait()
            deadline = time.time() + 20
            while free_bytes(n1) < free + (1 << 20):
                if time.time() > deadline:
                    fail(f"20 s after n3 closed the orphan n1 counts {free_bytes(n1)} bytes "
                         f"free, {free} before the unlink")
                time.sleep(0.2)
            print("   the orphan was freed once n3 closed it")

            t0 = time.monotonic()
            for m in ms:
                # each of n1-n3 gives back 33,000 locks, a message each
                m.umount(timeout=300)
            print(f"   four unmounts took {time.monotonic() - t0:.1f} s")
            if slot_map(ctl, img):
                fail(f"slots still in use after every unmount: {slot_map(ctl, img)}")
            # 100 MiB of inodes: 3 s on an idle machine, minutes on a busy disk
            fsck_clean(img, "after four nodes shared the volume", timeout=600)
            print("7. all unmounted; slot map empty, fsck.ocfs2 -fn clean")
    finally:
        shutil.rmtree(src, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
