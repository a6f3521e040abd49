#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Clustered mounts: every node on a slot of its own, never two on one.

Three corosync nodes in namespaces of their own (o2test.cluster's Cluster,
cluster name "ocfs2d-test"), one pcmk volume image, and for each node a loop
device of its own over that image (direct I/O: the nodes share the disk, not
a page cache, as separate machines would).  Each node mounts with `ocfs2ctl
mount`, which starts that node's ocfs2d.

  1. n1 mounts: it joins the volume's lock group and claims slot 0 in the
     slot map, which the real tools read; it writes a file.
  2. n2 (asking for slot 2) and n3 join on slots 2 and 1 and read n1's
     file; on a volume of two slots, n3 is refused once n1 and n2 hold
     both, the message naming the slots and their nodes; n2 and n3
     unmount.
  3. a volume of another cluster is refused, naming both cluster names.
  4. n1 unmounts: the slot map is empty again, fsck.ocfs2 -fn is clean.
  5. n2 mounts with preferred_slot=2, gets slot 2, reads n1's file, writes
     and fsyncs one of its own; then its ocfs2d is SIGKILLed.
  6. n3 is refused: node 2 crashed in slot 2, whose journal needs recovery.
  7. n2 mounts again: its own slot, its journal replayed, its file there;
     it writes and fsyncs another, and is SIGKILLed again.
  8. n2 mounts read-only: the journal is replayed first (under its journal
     lock), so the file is there; the slot is given back.
  9. n3 mounts (the lowest free slot, 0), sees every file and unmounts: the
     slot map is empty and fsck.ocfs2 -fn is clean.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_mount.py OCFS2CTL
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from o2test.cluster import Cluster, Mounter, fail, fsck_clean, host, need_cluster_tools, skip
from o2test.cluster import daemon_logs_clean, slot_map, stop_nodes

CLUSTER_NAME = "ocfs2d-test"  # o2test.cluster's corosync.conf


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    ctl = os.path.abspath(sys.argv[1])
    # each node's ocfs2ctl must reach its own node's daemon, at the default
    # control socket in that node's /run, not one the caller chose
    os.environ.pop("OCFS2D_CONTROL", None)
    need_cluster_tools("namespaces, loop devices, corosync",
                       tools=("corosync", "losetup", "fsck.ocfs2", "unshare", "nsenter", "ip"),
                       path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not os.path.exists("/dev/fuse"):
        skip("no /dev/fuse")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-cmount-")
    img, other = os.path.join(tmp, "shared.img"), os.path.join(tmp, "other.img")
    small = os.path.join(tmp, "two-slots.img")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    for path, name, slots in ((img, CLUSTER_NAME, 3), (other, "othercluster", 3),
                              (small, CLUSTER_NAME, 2)):
        with open(path, "wb") as f:
            f.truncate(256 << 20)
        host([ctl, "format", "-q", "--cluster-stack=pcmk", f"--cluster-name={name}", "-N",
              str(slots), "-b", "4096", "-J", "size=4M", path])
    loops = []
    cluster = None
    ok = False
    try:
        for path in (img, img, img, other, small, small, small):
            r = host(["losetup", "-f", "--show", "--direct-io=on", path], check=False)
            if r.returncode != 0:
                skip(f"no loop device: {r.stderr.strip()}")
            loops.append(r.stdout.strip())
        cluster = Cluster(tmp, 3)
        n1, n2, n3 = (Mounter(nd, ctl, loops[i], mnt) for i, nd in enumerate(cluster.nodes))

        n1.must_mount()
        if n1.slot() != 0 or slot_map(ctl, img) != {0: 1}:
            fail(f"n1 mounted on slot {n1.slot()}, slot map {slot_map(ctl, img)}")
        n1.sh(f"echo 'written on n1' > {mnt}/hello && sync {mnt}/hello")
        live = json.loads(n1.node.run([ctl, "--json", "slots", mnt], check=True).stdout)
        if ([(m["node"], m["state"]) for m in live["members"]] != [(1, "live")] or
                live["slots"] != [{"slot": 0, "node": 1}] or live["locks"]["messages"] < 2):
            fail(f"`ocfs2ctl slots {mnt}` on n1: {live}")
        listed = json.loads(n1.node.run([ctl, "--json", "mounts"], check=True).stdout)
        if (listed[0]["cluster"], listed[0]["node"]) != (CLUSTER_NAME, 1):
            fail(f"`ocfs2ctl mounts` on n1: {listed}")
        status = json.loads(n1.node.run([ctl, "--json", "status"], check=True).stdout)
        if ([(s["stack"], s["cluster"], s["node"], s["slot"], s["state"]) for s in status] !=
                [("pcmk", CLUSTER_NAME, 1, 0, "mounted")] or status[0]["journal"]["size"] <= 0):
            fail(f"`ocfs2ctl status` on n1: {status}")
        if f"cluster {CLUSTER_NAME}, node 1, slot 0 of" not in n1.node.run([ctl, "status"], check=True).stdout:
            fail("`ocfs2ctl status` on n1 does not name the cluster, node and slot")
        print(f"1. n1 mounted {loops[0]} on slot 0 (slot map {slot_map(ctl, img)}) and wrote a file; "
              f"its daemon shows the group {live['group']}, node 1 live, "
              f"{live['locks']['messages']} lock messages sent")
        print("   " + n1.node.run([ctl, "mounts"], check=True).stdout.strip())
        print("   " + n1.node.run([ctl, "slots", mnt], check=True).stdout.strip().replace("\n", "\n   "))

        n2.must_mount("preferred_slot=2")
        n3.must_mount()
        if (n2.slot(), n3.slot(), slot_map(ctl, img)) != (2, 1, {0: 1, 1: 3, 2: 2}):
            fail(f"n2 on slot {n2.slot()}, n3 on {n3.slot()}; slot map {slot_map(ctl, img)}")
        for m in (n2, n3):
            got = m.sh(f"cat {mnt}/hello")
            if got != "written on n1\n":
                fail(f"n{m.node.nodeid} reads {got!r} from n1's file")
        smnt = os.path.join(tmp, "small")
        os.mkdir(smnt)
        s1, s2, s3 = (Mounter(nd, ctl, loops[4 + i], smnt) for i, nd in enumerate(cluster.nodes))
        s1.must_mount()
        s2.must_mount()
        s3.refused("both slots are held", ["every slot is taken", "slot 0: node 1",
                                            "slot 1: node 2"])
        if slot_map(ctl, small) != {0: 1, 1: 2}:
            fail(f"the refused mount changed the slot map: {slot_map(ctl, small)}")
        for m in (s1, s2):  # their daemons serve the other volume too
            m.node.run([ctl, "umount", smnt], check=True)
        n2.umount()
        n3.umount()
        fsck_clean(small, "after the two-slot volume's unmounts")
        if slot_map(ctl, img) != {0: 1}:
            fail(f"after n2's and n3's unmounts the slot map holds {slot_map(ctl, img)}")
        print("2. n2 and n3 joined on slots 2 (asked for) and 1 and read n1's file; on a "
              "volume of two slots the third node was refused; n2 and n3 unmounted")

        Mounter(cluster.nodes[1], ctl, loops[3], mnt).refused(
            "the volume belongs to another cluster", ["othercluster", CLUSTER_NAME])
        print("3. a volume of cluster \"othercluster\" refused in cluster \"ocfs2d-test\"")

        n1.umount()
        if slot_map(ctl, img):
            fail(f"after n1's unmount the slot map still holds {slot_map(ctl, img)}")
        fsck_clean(img, "after n1's unmount")
        print("4. n1 unmounted: slot map empty, fsck.ocfs2 -fn clean")

        n2.must_mount("preferred_slot=2")
        if n2.slot() != 2 or slot_map(ctl, img) != {2: 2}:
            fail(f"n2 asked for slot 2, got {n2.slot()}; slot map {slot_map(ctl, img)}")
        got = n2.sh(f"cat {mnt}/hello")
        if got != "written on n1\n":
            fail(f"n2 reads {got!r} from n1's file")
        n2.sh(f"echo 'written on n2' > {mnt}/from-n2 && sync {mnt}/from-n2")
        killed = n2.kill_daemons()
        if killed != 1:
            fail(f"{killed} ocfs2d processes on n2")
        print("5. n2 mounted on its preferred slot 2, read n1's file, wrote and fsynced its own; "
              "its ocfs2d was SIGKILLed")

        n3.refused("node 2 crashed holding slot 2", ["node 2", "slot 2", "recovery"])
        print("6. n3 refused: slot 2's journal needs recovery")

        n2.must_mount()
        if n2.slot() != 2:
            fail(f"n2 came back on slot {n2.slot()}, not its own slot 2")
        got = n2.sh(f"cat {mnt}/from-n2")
        if got != "written on n2\n":
            fail(f"after the crash n2 reads {got!r}")
        n2.sh(f"echo 'again on n2' > {mnt}/again && sync {mnt}/again")
        n2.kill_daemons()
        print("7. n2 mounted again on its own slot 2: its journal replayed, its file there; "
              "it wrote and fsynced another, and its ocfs2d was SIGKILLed again")

        n2.must_mount("ro")
        got = n2.sh(f"cat {mnt}/again")
        if got != "again on n2\n":
            fail(f"the read-only mount after the crash reads {got!r}")
        if slot_map(ctl, img):
            fail(f"after the read-only mount's replay the slot map holds {slot_map(ctl, img)}")
        n2.umount()
        print("8. n2 mounted read-only: its journal replayed first (the file is there), the "
              "slot given back")

        n3.must_mount()
        if n3.slot() != 0 or slot_map(ctl, img) != {0: 3}:
            fail(f"n3 mounted on slot {n3.slot()}; slot map {slot_map(ctl, img)}")
        n3.sh(f"test -f {mnt}/hello && test -f {mnt}/from-n2 && test -f {mnt}/again")
        n3.umount()
        if slot_map(ctl, img):
            fail(f"at the end the slot map holds {slot_map(ctl, img)}")
        fsck_clean(img, "at the end")
        print("9. n3 mounted on slot 0 and saw all three files; all unmounted: slot map empty, "
              "fsck.ocfs2 -fn clean")
        daemon_logs_clean(cluster)
        ok = True
    finally:
        if cluster:
            stop_nodes(cluster, ctl, ok)
        time.sleep(0.2)
        for dev in loops:
            subprocess.run(["losetup", "-d", dev], capture_output=True)
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print("PASS")


if __name__ == "__main__":
    main()
