#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Three nodes change one volume at once, at random, and fill it.

Three corosync nodes in namespaces of their own (o2test.cluster), one pcmk
volume image, and for each node a loop device of its own over it; all three
mount it read-write.

  1. Random operations on all three nodes at once for a bounded time
     (stress_worker.py: creates, writes, appends, truncates, renames, hard
     links, unlinks, symlinks, directories, modes, xattrs, on names each
     node owns in four directories they share and one of its own; reads of
     its own files checked at once; other nodes' files read unchecked).
     A watchdog fails the run if any operation takes over 30 s or a worker
     does not end in time: a request stuck behind a lock (a deadlock).
  2. Every node sees the same tree, and it is what the workers' models
     imply: every name, type, content, mode, link count, xattr.
  3. All unmount: the slot map is empty and fsck.ocfs2 -fn is clean; the
     free space is noted.
  4. All mount again; n1 and n2 fill the volume at once with 1 MiB files
     until it is full: ENOSPC and nothing else, no node turns read-only;
     then they remove every file they wrote.
  5. All unmount: fsck.ocfs2 -fn clean, and the free space is what it was
     at 3 (every cluster back); no daemon logged a critical error or a
     sanitizer report.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_stress.py OCFS2CTL [SECONDS]
"""
import json
import os
import sys
import time

from o2test.cluster import shared_volume_args, fail, fsck_clean, host, run_at_once, same_everywhere
from o2test.cluster import shared_volume, slot_map

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stress_worker.py")


def run_all(nodes, seconds):
    """Start a worker on every node; their reports once all end."""
    outs = run_at_once(nodes, lambda m: ["python3", WORKER, str(m.node.nodeid), m.mnt,
                                         str(seconds), str(1000 + m.node.nodeid)],
                       seconds + 90, "the random operations")
    reports = []
    for m, out in zip(nodes, outs):
        rep = json.loads(out)
        if rep["failure"]:
            fail(f"n{m.node.nodeid}: {rep['failure']} (after {sum(rep['ops'].values())} "
                 f"operations)")
        reports.append(rep)
    return reports


def tree_matches_models(tree, reports, nodes):
    """tree (a snapshot) holds exactly what the workers' models say."""
    base = {".", "lost+found", "shared"} | {f"shared/s{i}" for i in range(4)} | {
        f"priv{m.node.nodeid}" for m in nodes}
    want = {}
    for rep in reports:
        want.update(rep["model"])
    names = set(tree) - base
    if names != set(want):
        fail(f"names on the volume and in the models differ: only on the volume "
             f"{sorted(names - set(want))[:20]}, only in the models "
             f"{sorted(set(want) - names)[:20]}")
    for rel, w in sorted(want.items()):
        e = tree[rel]
        kind = e["mode"] & 0o170000
        if w["type"] == "dir":
            ok = kind == 0o040000
        elif w["type"] == "symlink":
            ok = kind == 0o120000 and e["target"] == w["target"]
        else:
            xattrs = {"user.stress": w["xattr"]} if w["xattr"] is not None else {}
            ok = (kind == 0o100000 and e["sha"] == w["sha256"] and e["size"] == w["size"] and
                  e["mode"] & 0o7777 == w["mode"] and e["nlink"] == w["nlink"] and
                  e["xattrs"] == xattrs)
        if not ok:
            fail(f"{rel}: on the volume {e}, in the model {w}")


# Inside a node: write 1 MiB files into argv[1] until the volume is full;
# prints how many and the errors met (only ENOSPC is fine).
FILL = """
import errno, json, os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
block = os.urandom(1 << 20)
n, full, other = 0, 0, []
while full < 3 and n < 100000:
    p = os.path.join(d, "f%d" % n)
    n += 1
    try:
        with open(p, "wb") as f:
            f.write(block)
        full = 0
    except OSError as e:
        if e.errno == errno.ENOSPC:
            full += 1
        else:
            other.append("%s: %s" % (p, e))
            break
print(json.dumps({"files": n, "other": other}))
"""


def free_offline(ctl, img):
    return json.loads(host([ctl, "--json", "info", img]).stdout)["free_clusters"]


def run(ctl, img, mnt, nodes, seconds):
    for m in nodes:
        m.must_mount()
    nodes[0].sh(f"mkdir -p {' '.join(f'{mnt}/shared/s{i}' for i in range(4))}")

    t0 = time.time()
    reports = run_all(nodes, seconds)
    total = sum(sum(r["ops"].values()) for r in reports)
    slowest = max(r["slowest"][0] for r in reports)
    print(f"1. {total} random operations on three nodes at once in {time.time() - t0:.0f} s "
          f"({', '.join(str(sum(r['ops'].values())) for r in reports)} per node); "
          f"the slowest took {slowest:.2f} s")

    tree = same_everywhere(nodes[0], nodes[1:], "after the random operations")
    tree_matches_models(tree, reports, nodes)
    print(f"2. every node sees the same {len(tree)} names, as the workers' models say")

    for m in nodes:
        m.umount()
    if slot_map(ctl, img):
        fail(f"after every unmount the slot map holds {slot_map(ctl, img)}")
    fsck_clean(img, "after the random operations")
    free = free_offline(ctl, img)
    print(f"3. all unmounted: fsck.ocfs2 -fn clean, {free} clusters free")

    for m in nodes:
        m.must_mount()
    outs = run_at_once(nodes[:2], lambda m: ["python3", "-c", FILL,
                                              f"{mnt}/fill{m.node.nodeid}"],
                       300, "filling the volume")
    written = []
    for m, out in zip(nodes, outs):
        rep = json.loads(out)
        if rep["other"]:
            fail(f"n{m.node.nodeid}: filling the volume met other errors than ENOSPC: "
                 f"{rep['other']}")
        written.append(rep["files"])
    for m in nodes:
        m.sh(f"touch {mnt}/still-writable-n{m.node.nodeid} && rm {mnt}/still-writable-n{m.node.nodeid}")
    for m in nodes[:2]:
        m.sh(f"rm -r {mnt}/fill{m.node.nodeid}")
    print(f"4. n1 and n2 filled the volume at once ({written[0]} and {written[1]} tries of "
          f"1 MiB): ENOSPC only, every node still writable; then they removed it all")

    for m in nodes:
        m.umount()
    fsck_clean(img, "after the fill and the removal")
    after = free_offline(ctl, img)
    if after != free:
        fail(f"after the fill and the removal {after} clusters are free, {free} before")
    print(f"5. all unmounted: fsck.ocfs2 -fn clean, {after} clusters free as before")


def main():
    ctl, rest = shared_volume_args(__doc__, optional=1)
    seconds = float(rest[0]) if rest else 45
    with shared_volume(ctl, "ocfs2d-stress-", 192 << 20,
                       ["-b", "4096", "-C", "4096", "-J", "size=4M"]) as (img, mnt, nodes):
        run(ctl, img, mnt, nodes, seconds)
    print("PASS")


if __name__ == "__main__":
    main()
