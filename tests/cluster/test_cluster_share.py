#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One volume mounted on three nodes at once: what one writes, the others read.

Three corosync nodes in namespaces of their own (o2test.cluster), one pcmk
volume image, and for each node a loop device of its own over it (direct
I/O: the nodes share the disk, not a page cache).  All three mount it
read-write, each on a slot of its own, and every operation takes the inode
locks OCFS2 takes.

  1. n1, n2 and n3 mount read-write on slots 0, 1 and 2; all three are
     live members.
  2. Rounds of changes, made in turn on n1, n2 and n3, each followed at
     once (no sleep, no sync) by a snapshot of the whole tree on the other
     two that must equal the writer's: data, size, mtime, mode, owner,
     xattrs, directory entries, renames across directories, unlinks, hard
     links, symlinks.
  3. The stale-cache trap: n2 reads a file, lists its directory, looks up
     the file and a name that does not exist; n1 truncates the file,
     rewrites it, renames it and makes the missing name; n2 reads the new
     state: the old name gone, the new ones there (the kernel caches
     names, and missing names, under the directory's lock).
     The kernel keeps attributes while the node holds the inode's lock:
     n2 fstat()s an open file and its directory (no lookup), n1 changes
     both, and n2's next fstat shows it.  An inode n1 frees and reuses
     while n2's kernel still knows the old directory (a working directory):
     n2 forgets it after losing the parent's lock, then reads the new file.
  4. Lock caching: 200 stats on n2 of files nobody changes send no lock
     message; one change on n1 and one read on n2 cost a bounded number.
  5. Open-unlinked: a file open on n3 and unlinked on n1 stays readable on
     n3 (its open lock keeps n1 from freeing it: an orphan instead); once
     n3 closes it, n1 frees it and every node's statfs shows the space back
     (n2, which read it before and caches its open lock, lets it go).
     Again with n1 unmounted before the close: n3 frees the orphan that
     waits in slot 0's orphan directory.
  6. All three at once: each node, in a shell loop, creates, appends to,
     renames and removes files in a directory of its own, adds files to
     one directory all share and appends records to one file there
     (O_APPEND); then every node sees the same tree, which is what the
     loops imply, and no record is lost or broken.  A watchdog fails the test if the loops take
     more than 120 s (a deadlock between nodes).
  7. n3 mounts again read-only: it joins without a slot and reads what n1
     and n2 change next.
  8. All unmount; the slot map is empty and fsck.ocfs2 -fn is clean; no
     daemon logged a sanitizer report or a critical error.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_share.py OCFS2CTL
"""
import json
import os
import subprocess
import sys
import time

from o2test.cluster import shared_volume_args, free_clusters, fail, fsck_clean, run_at_once, same_everywhere
from o2test.cluster import shared_volume, slot_map

# Inside a node: open argv[1], say "open", read it whole when told (its
# sha256), close it when told.
HOLDER = """
import hashlib, sys
f = open(sys.argv[1], "rb")
print("open", flush=True)
for line in sys.stdin:
    if line.strip() == "read":
        f.seek(0)
        print(hashlib.sha256(f.read()).hexdigest(), flush=True)
    else:
        f.close()
        print("closed", flush=True)
        break
"""


# Inside a node: open argv[1] and argv[2] (a directory) and answer each
# line read with both fstat(2)s, until stdin ends.
FSTATS = """
import json, os, sys
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:3]]
for line in sys.stdin:
    out = []
    for fd in fds:
        st = os.fstat(fd)
        out.append([st.st_mode, st.st_size, st.st_mtime_ns, st.st_nlink, st.st_uid])
    print(json.dumps(out), flush=True)
"""


def attrs_follow(n1, n2):
    """n2 has a file and its directory open and fstat()s them (no lookup:
    only the kernel's attribute cache or a GETATTR answers); n1 changes
    both: n2's next fstat shows the change."""
    mnt = n1.mnt
    n1.sh(f"mkdir {mnt}/attrs && printf 1234 > {mnt}/attrs/f")
    p = subprocess.Popen(n2.node.enter() + ["python3", "-c", FSTATS, f"{mnt}/attrs/f",
                                            f"{mnt}/attrs"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def ask():
        p.stdin.write("x\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            fail(f"n2's fstat helper ended: {p.stderr.read()}")
        return json.loads(line)

    try:
        before = ask()
        ask()  # cached now, if the kernel caches
        n1.sh(f"chmod 0600 {mnt}/attrs/f && printf 56789 >> {mnt}/attrs/f && "
              f"chown 4321 {mnt}/attrs/f && mkdir {mnt}/attrs/sub")
        once = FSTATS.replace("for line in sys.stdin:", "for line in ['x']:")
        want = json.loads(n1.node.run(["python3", "-c", once, f"{mnt}/attrs/f", f"{mnt}/attrs"],
                                      check=True).stdout)
        got = ask()
        if got != want or got == before:
            fail(f"n2's fstat after n1's changes: {got}, n1 sees {want} (before: {before})")
    finally:
        p.stdin.close()
        p.kill()
        p.wait()


def reused_inode(n1, n2):
    """An inode freed on n1 while n2's kernel still knows it (a process's
    working directory there), then reused by n1 for a new file, after n2
    lost the directory's lock: n2's kernel forgets the old inode once the
    process ends (its daemon reads the inode without its lock), and n2
    then looks up the new file.  Found: that read left the freed copy in
    n2's cache, and the lookup took the new file's block from it ("inode
    is not in use")."""
    d = f"{n1.mnt}/reuse"
    n1.sh(f"mkdir -p {d}/sub")
    ino = n2.sh(f"stat -c %i {d}/sub").strip()
    holder = subprocess.Popen(n2.node.enter() + ["sh", "-c", f"cd {d}/sub && echo in && read x"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline() != "in\n":
            fail("n2's process could not enter the directory")
        n1.sh(f"rmdir {d}/sub")
        # n1's ticker frees the inode within a second or so; n2's listing
        # makes n1 write it home, freed; then n1's next new file takes it
        for _ in range(10):
            time.sleep(1)
            n2.sh(f"ls {d} > /dev/null")
            n1.sh(f"echo two > {d}/g")
            if n1.sh(f"stat -c %i {d}/g").strip() == ino:
                break
            n1.sh(f"rm {d}/g")
        else:
            fail(f"the reused-inode trap needs n1 to reuse inode {ino} for a new file; "
                 f"it did not")
    finally:
        holder.stdin.close()  # n2's kernel forgets the old directory now
        holder.wait()
    time.sleep(1)
    got = n2.node.run(["cat", f"{d}/g"])
    if got.returncode != 0 or got.stdout != "two\n":
        fail(f"n2 reads the new file on a reused inode: {got.stdout!r} {got.stderr.strip()}\n"
             f"{n2.log()}")


def open_unlinked(n1, n3, readers, unmount=False):
    """A file open on n3 (and read before on n2, which keeps its open lock
    cached) is unlinked on n1: n3 reads it whole, and its space comes back
    once n3 closes it.  unmount: n1 unmounts before the
    close (the orphan waits in slot 0's orphan directory, n3 frees it)."""
    mnt = n1.mnt
    judge = readers[0] if unmount else n1
    n1.sh(f"dd if=/dev/urandom of={mnt}/held bs=1M count=4 status=none")
    want = n1.sh(f"sha256sum {mnt}/held").split()[0]
    # n2 opened and closed it: its open lock stays cached while its kernel
    # knows the inode, and must go when n1 asks for it
    readers[0].sh(f"cat {mnt}/held > /dev/null")
    p = subprocess.Popen(n3.node.enter() + ["python3", "-c", HOLDER, f"{mnt}/held"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)

    def say(word):
        p.stdin.write(word + "\n")
        p.stdin.flush()
        return p.stdout.readline().strip()

    try:
        if p.stdout.readline().strip() != "open":
            fail(f"n3 could not open the file: {p.stderr.read()}")
        before = free_clusters(n1)
        n1.sh(f"rm {mnt}/held")
        if n3.node.run(["test", "-e", f"{mnt}/held"]).returncode == 0:
            fail("n3 still sees the name n1 removed")
        got = say("read")
        if got != want:
            fail(f"n3 read {got!r} from the open file n1 unlinked, not {want!r}")
        time.sleep(2)  # n1 tries to free orphans every second
        if free_clusters(n1) > before:
            fail(f"n1 freed the file while n3 has it open ({before} -> {free_clusters(n1)} free)")
        if unmount:
            n1.umount()  # its window goes back to the bitmap: count from here
            before = free_clusters(judge)
        if say("close") != "closed":
            fail("n3 did not close the file")
    finally:
        p.kill()
        p.wait()
    deadline = time.time() + 20
    while free_clusters(judge) < before + 1024:  # 4 MiB of 4 KiB clusters
        if time.time() > deadline:
            fail(f"20 s after n3 closed the file n{judge.node.nodeid} has "
                 f"{free_clusters(judge)} free clusters, {before} before")
        time.sleep(0.2)
    mine = free_clusters(judge)
    for m in [n1] * (not unmount) + list(readers):
        theirs = free_clusters(m)
        if theirs != mine:
            fail(f"statfs: n{m.node.nodeid} counts {theirs} free clusters, "
                 f"n{judge.node.nodeid} {mine}")
    if unmount:
        n1.must_mount()
    return before, mine


def lock_messages(m):
    return m.locks()["messages"]


def quiet(*nodes):
    """Wait (up to 30 s) until no node has sent a lock message for 2 s."""
    deadline = time.time() + 30
    last = [lock_messages(m) for m in nodes]
    while time.time() < deadline:
        time.sleep(2)
        now = [lock_messages(m) for m in nodes]
        if now == last:
            return
        last = now
    fail(f"the nodes still send lock messages 30 s after the last change: {last}")


XATTR = 'python3 -c "from os import *; {}"'
# 4 KiB pieces at every step-th block of f: one extent each (a tree deeper
# than the inode's own list)
PIECES = ('python3 -c "import os; fd = os.open(\'{f}\', os.O_WRONLY | os.O_CREAT); '
          '[os.pwrite(fd, b\'{fill}\' * 4096, i * {step} * 4096) for i in range(400)]"')

ROUNDS = [
    ("a file created with data", "printf 'first words\\n' > {m}/a"),
    ("appended to", "printf 'more words\\n' >> {m}/a"),
    ("overwritten in place", "printf 'FIRST' | dd of={m}/a conv=notrunc status=none"),
    ("a big file written", "dd if=/dev/urandom of={m}/big bs=64k count=40 status=none"),
    ("mode changed", "chmod 0640 {m}/a"),
    ("owner changed", "chown 1234:5678 {m}/a"),
    ("mtime set", "touch -d '2001-02-03 04:05:06' {m}/a"),
    ("an xattr set", XATTR.format("setxattr('{m}/a', 'user.colour', b'blue')")),
    ("an xattr replaced and another set",
     XATTR.format("setxattr('{m}/a', 'user.colour', b'green'); "
                  "setxattr('{m}/big', 'user.size', b'large' * 100)")),
    ("an xattr removed", XATTR.format("removexattr('{m}/a', 'user.colour')")),
    ("directories made", "mkdir -p {m}/d1/sub {m}/d2 && printf x > {m}/d1/f"),
    ("renamed across directories", "mv {m}/d1/f {m}/d2/g"),
    ("a directory renamed into another", "mv {m}/d1/sub {m}/d2/sub2"),
    ("a hard link made", "ln {m}/d2/g {m}/d1/g-link"),
    ("a symlink made", "ln -s ../d2/g {m}/d1/sym"),
    ("a name unlinked", "rm {m}/d2/g"),
    ("truncated longer and shorter", "truncate -s 1M {m}/big && truncate -s 1000 {m}/big"),
    ("many files made", "for i in $(seq 1 60); do echo $i > {m}/d2/n$i; done"),
    ("many files removed", "rm {m}/d2/n1* && rmdir {m}/d2/sub2"),
    ("a file replaced by rename", "printf new > {m}/tmp && mv {m}/tmp {m}/a"),
    # past what an inode holds inline: directory blocks and extent blocks
    ("a directory grown past its inode",
     "mkdir {m}/wide && for i in $(seq 1 300); do : > {m}/wide/a-rather-long-name-$i; done"),
    ("names renamed and removed in it",
     "mv {m}/wide/a-rather-long-name-7 {m}/wide/renamed-7 && rm {m}/wide/a-rather-long-name-2*"),
    ("a file of many extents", PIECES.format(f="{m}/sparse", step=3, fill="a")),
    ("its extents rewritten", PIECES.format(f="{m}/sparse", step=2, fill="b")),
]


# Run in node N's namespaces (argv[1] N, argv[2] the mount point): 40 steps
# of changes in a directory of its own and in one all nodes share; the last
# state of each file follows from the steps alone (expected_tree).
LOOP = r"""
set -e
n=$1; m=$2
mkdir -p $m/own$n
i=0
while [ $i -lt 40 ]; do
    printf 'n%s step %s\n' $n $i >> $m/own$n/log
    printf '%s' $i > $m/own$n/f$i
    if [ $((i % 3)) = 0 ]; then mv $m/own$n/f$i $m/own$n/moved$i
    elif [ $((i % 4)) = 1 ]; then rm $m/own$n/f$i; fi
    printf 'from n%s at %s' $n $i > $m/shared/n$n-$i
    printf 'record n%s %s\n' $n $i >> $m/shared/appends
    if [ $((i % 5)) = 2 ]; then rm $m/shared/n$n-$i; fi
    i=$((i + 1))
done
"""

# Inside a node: {relative name: content} of the loops' directories.
CONTENTS = """
import json, os, sys
root = sys.argv[1]
out = {}
for d in sorted(os.listdir(root)):
    if d == "shared" or d.startswith("own"):
        for f in os.listdir(os.path.join(root, d)):
            with open(os.path.join(root, d, f)) as fh:
                out[d + "/" + f] = fh.read()
print(json.dumps(out))
"""


def expected_tree(n):
    """What node n's loop leaves behind: name -> content."""
    want = {f"own{n}/log": "".join(f"n{n} step {i}\n" for i in range(40))}
    for i in range(40):
        if i % 3 == 0:
            want[f"own{n}/moved{i}"] = str(i)
        elif i % 4 != 1:
            want[f"own{n}/f{i}"] = str(i)
        if i % 5 != 2:
            want[f"shared/n{n}-{i}"] = f"from n{n} at {i}"
    return want


def all_at_once(nodes):
    mnt = nodes[0].mnt
    nodes[0].sh(f"mkdir {mnt}/shared")
    run_at_once(nodes, lambda m: ["sh", "-c", LOOP, "loop", str(m.node.nodeid), mnt], 120,
                "the loops on every node at once")
    want = {}
    for m in nodes:
        want.update(expected_tree(m.node.nodeid))
    tree = same_everywhere(nodes[0], nodes[1:], "after the loops on every node at once")
    # every node's tree is the same (above): read the contents on one
    r = nodes[0].node.run(["python3", "-c", CONTENTS, mnt])
    if r.returncode != 0:
        fail(f"n1: reading the loops' files: {r.stderr.strip()[-2000:]}")
    got = json.loads(r.stdout)
    # O_APPEND from every node: every record whole, none lost, each node's in order
    records = got.pop("shared/appends", "").split("\n")
    if records[-1] != "" or sorted(records[:-1]) != sorted(
            f"record n{m.node.nodeid} {i}" for m in nodes for i in range(40)):
        fail(f"O_APPEND from every node at once lost or broke records: {records[:200]}")
    for m in nodes:
        mine = [r for r in records if r.startswith(f"record n{m.node.nodeid} ")]
        if mine != [f"record n{m.node.nodeid} {i}" for i in range(40)]:
            fail(f"n{m.node.nodeid}'s appends are out of order: {mine}")
    if got != want:
        diff = {k: (want.get(k), got.get(k)) for k in sorted(set(want) | set(got))
                if want.get(k) != got.get(k)}
        fail(f"after the loops the files are not what they imply: {json.dumps(diff)[:3000]}")
    return tree


def run(ctl, img, mnt, n1, n2, n3):
    nodes = (n1, n2, n3)
    for m in nodes:
        m.must_mount()
    live = json.loads(n2.node.run([ctl, "--json", "slots", mnt], check=True).stdout)
    if sorted((m["node"], m["state"]) for m in live["members"]) != [(1, "live"), (2, "live"),
                                                                    (3, "live")]:
        fail(f"`ocfs2ctl slots` on n2: {live}")
    if slot_map(ctl, img) != {0: 1, 1: 2, 2: 3} or [m.slot() for m in nodes] != [0, 1, 2]:
        fail(f"slot map with three writers: {slot_map(ctl, img)}")
    print(f"1. n1, n2 and n3 mounted read-write on slots 0, 1 and 2; members "
          f"{[m['node'] for m in live['members']]}")

    for i, (what, script) in enumerate(ROUNDS):
        writer = nodes[i % 3]
        writer.sh(script.format(m=mnt))
        tree = same_everywhere(writer, [m for m in nodes if m is not writer],
                               f"{what} (on n{writer.node.nodeid})")
    print(f"2. {len(ROUNDS)} rounds of changes made in turn on n1, n2 and n3, each seen at "
          f"once by the other two ({len(tree)} names at the end)")
    readers = (n2, n3)

    n2.sh(f"cat {mnt}/a > /dev/null && ls -l {mnt}/d1 > /dev/null && stat {mnt}/d1/g-link >/dev/null"
          f" && ! stat {mnt}/d1/later 2>/dev/null")
    n1.sh(f"truncate -s 0 {mnt}/d1/g-link && printf 'rewritten' >> {mnt}/d1/g-link && "
          f"mv {mnt}/d1/g-link {mnt}/d1/renamed && echo new > {mnt}/d1/later")
    got = n2.sh(f"cat {mnt}/d1/renamed; ls {mnt}/d1; cat {mnt}/d1/later; "
                f"stat {mnt}/d1/g-link 2>/dev/null || echo gone")
    if got != "rewrittenlater\nrenamed\nsym\nnew\ngone\n":
        fail(f"the stale-cache trap: n2 reads {got!r}")
    same_everywhere(n1, readers, "after the trap")
    attrs_follow(n1, n2)
    reused_inode(n1, n2)
    print("3. n2 read a file and listed its directory; n1 truncated, rewrote and renamed it; "
          "n2 read the new state; n2's fstat of an open file and directory saw n1's changes; "
          "a file on an inode n1 freed and reused, which n2's kernel forgot meanwhile, read "
          "on n2")

    # what earlier steps left going settles first: a node that only cached
    # the open lock of a file another node removed lets it go when asked,
    # and the orphan is freed a second or so later
    quiet(n1, n2, n3)
    before = n2.locks()
    n2.sh(f"for i in $(seq 1 100); do stat {mnt}/a {mnt}/big > /dev/null; done")
    after = n2.locks()
    idle = after["messages"] - before["messages"]
    if idle != 0:
        fail(f"200 stats on n2 of files nobody changes sent {idle} lock messages: "
             f"{ {k: after[k] - before[k] for k in after if isinstance(after[k], int)} }")
    b1, b2 = lock_messages(n1), lock_messages(n2)
    n1.sh(f"printf again >> {mnt}/a")
    n2.sh(f"cat {mnt}/a > /dev/null")
    cost = lock_messages(n1) - b1 + lock_messages(n2) - b2
    if cost > 12:
        fail(f"one change on n1 and one read on n2 cost {cost} lock messages")
    print(f"4. 200 stats on n2 sent no lock message; a change on n1 read on n2 cost {cost}")

    before, after = open_unlinked(n1, n3, readers)
    open_unlinked(n1, n3, readers, unmount=True)
    print(f"5. a file open on n3 and unlinked on n1 read whole on n3; freed once closed: "
          f"{before} -> {after} free clusters, the same on every node; freed by n3 when n1 "
          f"had unmounted before the close")

    all_at_once(nodes)
    print("6. n1, n2 and n3 changed private and shared directories at once and appended "
          "to one file; every node sees the tree their loops imply, every record whole")

    n3.umount()
    n3.must_mount("ro")
    if slot_map(ctl, img) != {0: 1, 1: 2}:
        fail(f"slot map with two writers and a reader: {slot_map(ctl, img)}")
    n1.sh(f"mkdir {mnt}/late")
    for i, (what, script) in enumerate(ROUNDS[:6]):
        writer = nodes[i % 2]
        writer.sh(script.format(m=mnt + "/late"))
        same_everywhere(writer, [m for m in nodes if m is not writer],
                        f"{what} (on n{writer.node.nodeid}, n3 read-only)")
    print("7. n3 mounted again read-only (no slot); changes on n1 and n2 seen there at once")

    for m in (n3, n2, n1):
        m.umount()
    if slot_map(ctl, img):
        fail(f"after every unmount the slot map holds {slot_map(ctl, img)}")
    fsck_clean(img, "after every unmount")
    print("8. all unmounted: slot map empty, fsck.ocfs2 -fn clean")


def main():
    ctl, _ = shared_volume_args(__doc__)
    with shared_volume(ctl, "ocfs2d-share-", 256 << 20, ["-b", "4096", "-J", "size=4M"]) as (
            img, mnt, (n1, n2, n3)):
        run(ctl, img, mnt, n1, n2, n3)
    print("PASS")


if __name__ == "__main__":
    main()
