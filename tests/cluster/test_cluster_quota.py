#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Quotas on a volume two nodes write at once.

Two corosync nodes (o2test.cluster), one pcmk volume with usrquota and
grpquota (--fs-feature-level=max-features), a loop device each.  Each
node counts its changes in its own slot's local quota files and folds
them into the global ones under the global file's cluster lock.

  1. n1 and n2 mount read-write on slots 0 and 1.
  2. At once: on n1 user 3001 (group 4001), on n2 user 3001 (group 4002)
     and user 3002 (group 4001) create, append to and remove files in
     directories of their own; then n2 removes half of what n1's user
     made (frees counted on n2 for an owner n1 charged).
  3. A hard inode limit set through n1's daemon (Volume.SetQuota, the
     global file's lock taken from whichever node holds it) is enforced
     on n1: its third file fails with EDQUOT.  Each node's daemon reports
     the volume's quotas (Volume.Quota).
  4. Both unmount (each folds what is left); fsck.ocfs2 -fn is clean and
     the usage in the global quota files equals fsck.ocfs2 -fy's recount
     of a copy, for users and groups.

Needs root, corosync, losetup, fsck.ocfs2, setpriv and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_quota.py OCFS2CTL
"""
import json
import os
import shutil
import subprocess
import sys

from o2test.cluster import fail, fsck_clean, host, shared_volume, shared_volume_args, slot_map

# Inside a node, as some user: files in argv[1] (made if missing), argv[2]
# of them, each written, every third appended to, every fourth removed.
WORK = """
import os, sys
d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
for i in range(n):
    p = os.path.join(d, "f%d" % i)
    with open(p, "wb") as f:
        f.write(os.urandom(1000 + (i * seed * 7919) % 90000))
    if i % 3 == 0:
        with open(p, "ab") as f:
            f.write(b"a" * (4096 * (i % 5)))
    if i % 4 == 1:
        os.unlink(p)
print("done")
"""


def usage(out):
    return {e["id"]: (e["space"], e["inodes"]) for e in json.loads(out)["ids"]
            if e["space"] or e["inodes"]}


def recount(ctl, img, flag):
    """(the quota files' usage, fsck.ocfs2 -fy's recount of a copy)."""
    mine = host([ctl, "quota", "--json", flag, img]).stdout
    copy = img + ".fsck"
    shutil.copyfile(img, copy)
    host(["fsck.ocfs2", "-fy", copy], check=False)
    theirs = host([ctl, "quota", "--json", flag, copy]).stdout
    os.unlink(copy)
    return usage(mine), usage(theirs)


def as_user(uid, gid, argv):
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"] + argv


def run(ctl, img, mnt, n1, n2):
    if not shutil.which("setpriv"):
        print("SKIP: no setpriv")
        sys.exit(77)
    base = {f: recount(ctl, img, f) for f in ("-u", "-g")}
    for m in (n1, n2):
        m.must_mount()
    if slot_map(ctl, img) != {0: 1, 1: 2}:
        fail(f"slot map with two writers: {slot_map(ctl, img)}")
    os.chmod(os.path.dirname(mnt), 0o755)  # mkdtemp's 0700 would stop the users
    n1.sh(f"chmod 1777 {mnt}")
    print("1. n1 and n2 mounted read-write on slots 0 and 1")

    # all three at once (two on n2)
    jobs = [(n1, 3001, 4001, "a"), (n2, 3001, 4002, "b"), (n2, 3002, 4001, "c")]
    procs = [m.node.spawn(as_user(uid, gid, ["python3", "-c", WORK, f"{mnt}/{d}", "40",
                                             str(uid + gid)])) for m, uid, gid, d in jobs]
    for p in procs:
        try:
            out, err = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            fail("a user's workload still runs after 180 s: stuck behind a lock?")
        if p.returncode != 0 or "done" not in out:
            fail(f"a user's workload failed: {err.strip()[-2000:]}")
    n2.sh(f"rm -f {mnt}/a/f*0 {mnt}/a/f*2 {mnt}/a/f*4")
    print("2. users 3001 (on both nodes) and 3002 (on n2) wrote; n2 removed some of n1's")

    r = n1.node.run([ctl, "quota", "set", mnt, "3003", "0", "0", "0", "2"])
    if r.returncode != 0:
        fail(f"quota set through n1's daemon: {r.stderr.strip()}")
    res = n1.node.run(as_user(3003, 4003, ["sh", "-c", f"mkdir -p {mnt}/q 2>/dev/null; "
                                           f"for i in 1 2; do : > {mnt}/q3003-$i || exit 1; done; "
                                           f": > {mnt}/q3003-3"]))
    if res.returncode == 0 or "quota" not in res.stderr.lower():
        fail(f"user 3003's third file past its inode limit of 2: {res.returncode} {res.stderr!r}")
    for m in (n1, n2):
        r = m.node.run([ctl, "quota", "--json", mnt])
        if r.returncode != 0 or '"ids"' not in r.stdout:
            fail(f"n{m.node.nodeid}: quota report through its daemon: {r.stderr.strip()}")
    print("3. a hard inode limit set through n1's daemon: EDQUOT on the third file; "
          "both daemons report")

    for m in (n2, n1):
        m.umount()
    if slot_map(ctl, img):
        fail(f"after every unmount the slot map holds {slot_map(ctl, img)}")
    fsck_clean(img, "after every unmount")
    for flag in ("-u", "-g"):
        mine, theirs = recount(ctl, img, flag)
        b0, b1 = base[flag]
        want = dict(theirs)
        for i in set(b0) | set(b1):
            x, y, w = b0.get(i, (0, 0)), b1.get(i, (0, 0)), want.get(i, (0, 0))
            want[i] = (w[0] - (y[0] - x[0]), w[1] - (y[1] - x[1]))
        want = {i: v for i, v in want.items() if v[0] or v[1]}
        if mine != want:
            fail(f"{flag}: the quota files hold {mine}, fsck.ocfs2 counts {want}")
        if 3001 not in mine and flag == "-u":
            fail(f"user 3001 has no usage: {mine}")
    print("4. both unmounted: fsck.ocfs2 -fn clean; the quota files' usage equals "
          "fsck.ocfs2's recount for users and groups")


def main():
    ctl, _ = shared_volume_args(__doc__)
    with shared_volume(ctl, "ocfs2d-quota-", 256 << 20,
                       ["-b", "4096", "-J", "size=4M", "--fs-feature-level=max-features"],
                       nodes=2) as (img, mnt, (n1, n2)):
        run(ctl, img, mnt, n1, n2)
    print("PASS")


if __name__ == "__main__":
    main()
