#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Full volumes through FUSE (issue 25, "the faults users meet first").

enospc: on each geometry (512-byte and 4 KiB blocks, 4 KiB and 1 MiB
clusters, with and without discontig-bg) a volume is filled to its last
free cluster and then to the last free inode of its inode allocator and
the last block its extent allocator gives to anything but a deletion.
Then every operation that must allocate is tried through FUSE: each gets
ENOSPC and changes nothing (the tree, its extended attributes and statfs
as before; fsck.ocfs2 -fn after a plain unmount prints what it printed
for the fresh volume - no journal to replay - and the tree is the same
after mounting again).  Then every deleting operation works, and once
everything is deleted the volume has exactly its fresh free space and
its allocators are as mkfs.ocfs2 made them (empty groups go back).

fsstress: eight processes run random operations (creates, writes,
appends, truncates, punches, fallocate, xattrs, links, renames,
symlinks, directories, unlinks and rmdirs), as xfstests' fsstress does
(it is not packaged in Debian), on a small volume they fill several
times over, for a bounded time.  Every failure is a clean ENOSPC (or a
name another process just changed), the volume never turns read-only,
and fsck.ocfs2 -fn is clean after a plain unmount.
"""

import ast
import errno
import os
import random
import re
import shutil
import subprocess
import sys
import time

from o2test.check import Failure
from o2test.harness import main
from o2test.proc import log
from o2test.syscalls import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, fallocate
from o2test.tree import snapshot, compare_snapshots


# ---- helpers ----

def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def xattr_model(root):
    """{path: {name: value}} for every file and directory under root."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in [None] + dirnames + filenames:
            p = dirpath if n is None else os.path.join(dirpath, n)
            if os.path.islink(p):
                continue
            out[os.path.relpath(p, root)] = {a: os.getxattr(p, a) for a in os.listxattr(p)}
    return out


def inode_group_clusters(env, img):
    """Clusters per group of slot 0's inode allocator."""
    out = subprocess.run([env.debugfs, "-R", "stat //inode_alloc:0000", img], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, universal_newlines=True).stdout
    m = re.search(r"Clusters per Group: (\d+)", out)
    if not m:
        raise Failure("debugfs.ocfs2 stat //inode_alloc:0000: no group size:\n%s" % out)
    return int(m.group(1))


def allocator_clusters(env, img):
    """Clusters slot 0's inode and extent allocators hold, as debugfs.ocfs2 says."""
    n = {}
    for f in ("inode_alloc:0000", "extent_alloc:0000"):
        out = subprocess.run([env.debugfs, "-R", "stat //" + f, img], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True).stdout
        m = re.search(r"Clusters: (\d+)", out)
        if not m:
            raise Failure("debugfs.ocfs2 stat //%s: no cluster count:\n%s" % (f, out))
        n[f] = int(m.group(1))
    return n


def until_enospc(fn, limit, what):
    """Call fn(i) for i = 0, 1, ... until it raises ENOSPC: how many succeeded."""
    for i in range(limit):
        try:
            fn(i)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                return i
            raise Failure("%s: %s, not ENOSPC" % (what, ename(e)))
    raise Failure("%s: no ENOSPC after %d" % (what, limit))


def append(path, size):
    with open(path, "ab") as f:
        f.write(b"\xa5" * size)


# ---- enospc ----

# attributes of 80 bytes, more than a 4 KiB inode's 256 bytes of inline room hold
XATTRS = 4

# block size, cluster size, volume size, mkfs.ocfs2 journal arguments
GEOMETRIES = ((512, 4096, "40M", ("-J", "size=4M")),
              (4096, 4096, "48M", ("-J", "size=4M")),
              (512, 1 << 20, "160M", ()),
              (4096, 1 << 20, "160M", ()))


def fill_everything(chk, tag, top, cs, cpg):
    """Fill the mounted volume under top: clusters, inodes, extent
    blocks.  Returns the empty files made (they hold the attributes)."""
    # the bulk as preallocated (unwritten) clusters: quick at any size
    st = os.statvfs(top)
    big = os.path.join(top, "big")
    fd = os.open(big, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fallocate(fd, 0, 0, max(cs, (st.f_bfree - 96) * cs))
    finally:
        os.close(fd)
    # the last clusters: whole clusters, then a little, appended
    tail = os.path.join(top, "tail")
    for size in (cs, 512):
        until_enospc(lambda i: append(tail, size), 1 << 16, "%s: appending %d bytes" % (tag, size))
    # free clusters in runs of a quarter of an inode group, apart: two
    # groups' worth an allocator can grow by only with discontig-bg (or
    # with groups of one cluster); data takes them otherwise
    piece = max(1, cpg // 4)
    fd = os.open(big, os.O_RDWR)
    try:
        # (groups of one cluster hold up to 2048 inodes: two clusters, one
        # of them for the first directory's block)
        for k in range(8 if cpg > 1 else 2):
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (1 + k * (piece + 1)) * cs,
                      piece * cs)
    finally:
        os.close(fd)
    # inodes: empty files, a directory at a time, until even a directory
    # with room in its blocks cannot have one
    files = []
    for d in range(1000):
        dd = os.path.join(top, "i%d" % d)
        try:
            os.mkdir(dd)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            break

        def create(i):
            p = os.path.join(dd, "e%d" % i)
            open(p, "wb").close()
            files.append(p)
        if until_enospc(create, 1 << 20, "%s: empty files" % tag) == 0:
            break
    # whatever clusters the allocators left: data
    until_enospc(lambda i: append(tail, 512), 1 << 16, "%s: appending again" % tag)
    # extent blocks: attributes that no longer fit in the inode move to a
    # block of their own (values up to 80 bytes stay in their entry)
    def attrs(i):
        for k in range(XATTRS):
            os.setxattr(files[i], "user.blk%d" % k, b"v" * 80)
    made = until_enospc(attrs, len(files), "%s: attributes in blocks" % tag)
    log("%s: full: %d empty files, %d attribute blocks" % (tag, len(files), made))
    return files, made


def expect_enospc(chk, tag, what, fn):
    try:
        fn()
    except OSError as e:
        chk.ok(e.errno == errno.ENOSPC, "%s: %s on the full volume: %s, want ENOSPC" % (tag, what, ename(e)))
        return
    chk.ok(False, "%s: %s on the full volume succeeded" % (tag, what))


def allocating_ops(chk, tag, top, cs, files, made):
    """Every operation that must allocate: each must say ENOSPC."""
    d = os.path.join(top, "i0")
    P = lambda *a: os.path.join(top, *a)

    def write_at(path, off, data):
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, off)
        finally:
            os.close(fd)

    def falloc(path, mode, off, length):
        fd = os.open(path, os.O_RDWR)
        try:
            fallocate(fd, mode, off, length)
        finally:
            os.close(fd)

    def copy_range(src, dst):
        fi, fo = os.open(src, os.O_RDONLY), os.open(dst, os.O_WRONLY)
        try:
            os.copy_file_range(fi, fo, cs, 0, os.path.getsize(dst) + cs)
        finally:
            os.close(fi)
            os.close(fo)

    ops = [
        ("create", lambda: open(os.path.join(d, "new"), "wb").close()),
        ("mkdir", lambda: os.mkdir(os.path.join(d, "newdir"))),
        ("mknod (a FIFO)", lambda: os.mkfifo(os.path.join(d, "fifo"))),
        ("symlink (fast)", lambda: os.symlink("t", os.path.join(d, "ln"))),
        ("symlink (a cluster)", lambda: os.symlink("t" * 1000, os.path.join(d, "ln2"))),
        ("append", lambda: append(P("tail"), 1 + cs)),
        ("write into a hole", lambda: write_at(P("big"), cs, b"h")),
        ("write past the end", lambda: write_at(P("tail"), os.path.getsize(P("tail")) + 4 * cs, b"p")),
        ("fallocate", lambda: falloc(P("tail"), 0, os.path.getsize(P("tail")), 2 * cs)),
        ("fallocate a hole", lambda: falloc(P("big"), FALLOC_FL_KEEP_SIZE, 3 * cs, cs)),
        ("copy-on-write of a reflinked cluster", lambda: write_at(P("shared-b"), 10, b"cow")),
        ("copy_file_range", lambda: copy_range(P("shared-a"), P("tail"))),
        # the attribute the fill could not set: its file's inode is full
        ("an attribute in a block", lambda: os.setxattr(files[made], "user.blk%d" % len(
            os.listxattr(files[made])), b"w" * 80)),
        ("an attribute value in clusters", lambda: os.setxattr(P("tail"), "user.big", b"c" * 60000)),
    ]
    for what, fn in ops:
        expect_enospc(chk, tag, what, fn)


def deleting_ops(chk, tag, top, cs, files, made):
    """Every deleting operation on the full volume works."""
    P = lambda *a: os.path.join(top, *a)
    try:
        for p in files[:min(made, 20)]:
            for k in range(XATTRS):
                os.removexattr(p, "user.blk%d" % k)
        fd = os.open(P("big"), os.O_RDWR)
        try:
            # a hole inside a record: the record is cut in two
            fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 200 * cs, cs)
        finally:
            os.close(fd)
        os.truncate(P("tail"), os.path.getsize(P("tail")) // 2)
        os.truncate(P("shared-b"), 0)
        for p in files[:50]:
            os.unlink(p)
        os.rmdir(P("empty-dir"))
        os.unlink(P("shared-a"))
        shutil.rmtree(top)
    except OSError as e:
        chk.ok(False, "%s: deleting on the full volume: %s: %s" % (tag, e.filename, ename(e)))


def enospc_one(env, chk, bs, cs, size, journal, discontig):
    tag = "b%d-C%d%s" % (bs, cs, "-discontig" if discontig else "")
    features = ("--fs-features=discontig-bg",) if discontig else ("--fs-features=nodiscontig-bg",)
    vol = env.volume("enospc-" + tag, size=size, mkfs="mkfs",
                     mkfs_args=("-b", str(bs), "-C", str(cs)) + journal + features)
    held_mkfs = allocator_clusters(env, vol.img)
    cpg = inode_group_clusters(env, vol.img)
    # a reflinked file of two clusters, made offline, to copy on write later
    host = os.path.join(env.tmp, "shared-" + tag)
    with open(host, "wb") as f:
        f.write(os.urandom(2 * cs))
    for args in (["put", vol.img, host, "/shared-a"], ["reflink", vol.img, "/shared-a", "/shared-b"]):
        p = subprocess.run([env.ctl] + args, capture_output=True, text=True)
        if p.returncode != 0:
            raise Failure("ocfs2ctl %s: %s" % (args[0], p.stderr.strip()))
    held0 = allocator_clusters(env, vol.img)
    vol.mount()
    fresh = os.statvfs(vol.mnt)
    top = os.path.join(vol.mnt, "top")
    os.mkdir(top)
    os.mkdir(os.path.join(top, "empty-dir"))
    for n in ("shared-a", "shared-b"):
        os.rename(os.path.join(vol.mnt, n), os.path.join(top, n))
    t0 = time.time()
    files, made = fill_everything(chk, tag, top, cs, cpg)
    full = os.statvfs(vol.mnt)
    chk.eq((full.f_bfree, full.f_ffree), (0, 0), "%s: no cluster and no inode left" % tag)
    before, xbefore = snapshot(vol.mnt), xattr_model(vol.mnt)
    allocating_ops(chk, tag, top, cs, files, made)
    after, xafter = snapshot(vol.mnt), xattr_model(vol.mnt)
    compare_snapshots(chk, before, after, "%s: the tree after the ENOSPC calls" % tag)
    chk.ok(xbefore == xafter, "%s: the attributes after the ENOSPC calls" % tag)
    now = os.statvfs(vol.mnt)
    chk.eq((now.f_bfree, now.f_ffree), (0, 0), "%s: statfs after the ENOSPC calls" % tag)
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("read-only" not in tail, "%s: the volume never turned read-only: %s" % (tag, tail[-500:]))
    # a plain unmount leaves a clean journal: fsck needs no replay
    vol.umount()
    vol.fsck(chk, "%s, full, after the ENOSPC calls" % tag)
    vol.mount()
    compare_snapshots(chk, before, snapshot(vol.mnt), "%s: the tree mounted again" % tag)
    chk.ok(xbefore == xattr_model(vol.mnt), "%s: the attributes mounted again" % tag)
    deleting_ops(chk, tag, top, cs, files, made)
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("read-only" not in tail, "%s: not read-only after the deletes: %s" % (tag, tail[-500:]))
    vol.umount()
    vol.fsck(chk, "%s, emptied" % tag)
    # Every cluster is back: the allocators gave back every group they
    # grew by, and mkfs.ocfs2's own groups when they emptied too (the
    # clusters of those that still hold an inode - the root's - stay)
    held = allocator_clusters(env, vol.img)
    vol.mount()
    again = os.statvfs(vol.mnt)
    log("%s: %d clusters free again (fresh %d), allocators %s (fresh %s)" % (
        tag, again.f_bfree, fresh.f_bfree, held, held0))
    chk.ok(all(held[f] <= held_mkfs[f] for f in held), "%s: no allocator keeps a group it grew "
           "by: %s, mkfs.ocfs2 made %s" % (tag, held, held_mkfs))
    # fresh: before the two clusters of the shared files were freed
    chk.eq(again.f_bfree + sum(held.values()), fresh.f_bfree + sum(held0.values()) + 2,
           "%s: every cluster is free or an allocator's" % tag)
    vol.umount()
    log("%s: %.1fs" % (tag, time.time() - t0))
    vol.cleanup()
    os.unlink(vol.img)
    return len(files), cpg


def case_enospc(env, chk):
    # FUSE_ENOSPC_CLUSTERS=4096 or 1048576: only the geometries of that
    # cluster size (meson runs the two halves as two tests)
    only = int(os.environ.get("FUSE_ENOSPC_CLUSTERS", "0"))
    for bs, cs, size, journal in GEOMETRIES:
        if only and cs != only:
            continue
        plain, cpg = enospc_one(env, chk, bs, cs, size, journal, False)
        pieced, _ = enospc_one(env, chk, bs, cs, size, journal, True)
        # the scattered runs made an inode group only where groups may be pieced
        if cpg > 1:
            chk.ok(pieced > plain, "b%d-C%d: discontig-bg made an inode group of pieces: %d "
                   "inodes, %d without" % (bs, cs, pieced, plain))


# ---- fsstress ----

OPS = ["creat", "write", "write", "append", "append", "truncate", "punch", "falloc", "setxattr",
       "setxattr", "rmxattr", "link", "rename", "symlink", "mkdir", "unlink", "unlink", "unlink",
       "rmdir", "fsync", "read"]

# a name another process changed under us: not a fault of the filesystem
RACES = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENODATA, errno.EISDIR, errno.ENOTDIR,
         errno.EMLINK}


def fsstress_worker(root, seed, seconds, cs, share, out):
    """One process: random operations in its own directory and, for
    renames and links, its neighbours', until it wrote share bytes or
    seconds passed.  Writes {op errno: count} to out."""
    rnd = random.Random(seed)
    mine = os.path.join(root, "p%d" % seed)
    os.makedirs(mine, exist_ok=True)
    errs, done, written = {}, 0, 0
    deadline = time.time() + seconds

    def any_path(kind=None):
        base = os.path.join(root, "p%d" % rnd.randrange(8)) if rnd.random() < 0.2 else mine
        d = base
        for _ in range(rnd.randrange(3)):
            try:
                subs = [n for n in os.listdir(d) if n.startswith("d")]
            except OSError:
                break
            if not subs:
                break
            d = os.path.join(d, rnd.choice(subs))
        try:
            names = os.listdir(d)
        except OSError:
            names = []
        if kind:
            names = [n for n in names if n.startswith(kind)]
        return d, (os.path.join(d, rnd.choice(names)) if names else None)

    while time.time() < deadline and written < share:
        op = rnd.choice(OPS)
        d, p = any_path("f")
        try:
            if op == "creat":
                with open(os.path.join(d, "f%d" % rnd.randrange(1 << 20)), "wb") as f:
                    written += f.write(os.urandom(rnd.choice([0, 100, 5000, cs, 3 * cs + 7, 300000])))
            elif op in ("write", "append", "truncate", "punch", "falloc", "fsync", "read") and p:
                fd = os.open(p, os.O_RDWR)
                try:
                    size = os.fstat(fd).st_size
                    if op == "write":
                        written += os.pwrite(fd, os.urandom(rnd.choice([1, 3000, cs, 70000])),
                                             rnd.randrange(size + 4 * cs + 1))
                    elif op == "append":
                        written += os.pwrite(fd, os.urandom(rnd.choice([10, 5000, 2 * cs, 200000,
                                                                        1 << 20])), size)
                    elif op == "truncate":
                        os.ftruncate(fd, rnd.randrange(size * 2 + 1))
                    elif op == "punch":
                        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                  rnd.randrange(size + 1), rnd.randrange(1, 4 * cs))
                    elif op == "falloc" and rnd.random() < 0.5:
                        fallocate(fd, 0, rnd.randrange(size + cs), rnd.randrange(1, 8 * cs))
                    elif op == "falloc" and size:
                        # inside the file: fsck.ocfs2 1.8.7 calls clusters past
                        # i_size INODE_SPARSE_SIZE, unwritten ones too
                        o = rnd.randrange(size)
                        fallocate(fd, FALLOC_FL_KEEP_SIZE, o, rnd.randrange(1, size - o + 1))
                    elif op == "fsync":
                        os.fsync(fd)
                    else:
                        os.pread(fd, 1 << 16, rnd.randrange(size + 1))
                finally:
                    os.close(fd)
            elif op == "setxattr" and p:
                os.setxattr(p, "user.s%d" % rnd.randrange(8),
                            os.urandom(rnd.choice([10, 150, 400, 3000, 9000, 60000])))
            elif op == "rmxattr" and p:
                os.removexattr(p, "user.s%d" % rnd.randrange(8))
            elif op == "link" and p:
                os.link(p, os.path.join(mine, "f%d" % rnd.randrange(1 << 20)))
            elif op == "rename" and p:
                os.rename(p, os.path.join(any_path()[0], "f%d" % rnd.randrange(1 << 20)))
            elif op == "symlink":
                os.symlink("t" * rnd.choice([5, 200, 3000]), os.path.join(d, "l%d" % rnd.randrange(1 << 20)))
            elif op == "mkdir":
                os.mkdir(os.path.join(d, "d%d" % rnd.randrange(1 << 20)))
            elif op == "unlink":
                _, q = any_path(rnd.choice(["f", "l"]))
                if q:
                    os.unlink(q)
            elif op == "rmdir":
                _, q = any_path("d")
                if q:
                    if rnd.random() < 0.3:
                        shutil.rmtree(q)
                    else:
                        os.rmdir(q)
            done += 1
        except OSError as e:
            if e.errno in RACES:
                continue
            key = "%s %s" % (op, ename(e))
            errs[key] = errs.get(key, 0) + 1
            if e.errno == errno.EROFS:
                break
    errs["done"], errs["written"] = done, written
    with open(out, "w") as f:
        f.write(repr(errs))


def case_fsstress(env, chk):
    # a bound on the time; the run normally ends when the processes wrote
    # three times the volume's size between them
    seconds = float(os.environ.get("FUSE_FSSTRESS_SECONDS", "150"))
    bs, cs = 1024, 4096
    vol = env.volume("fsstress", size="32M", mkfs="mkfs",
                     mkfs_args=("-b", str(bs), "-C", str(cs), "-J", "size=4M"))
    held0 = allocator_clusters(env, vol.img)
    vol.mount()
    fresh = os.statvfs(vol.mnt)
    pids, outs = [], []
    for i in range(8):
        out = os.path.join(env.tmp, "fsstress-%d" % i)
        outs.append(out)
        pids.append(env.fork(fsstress_worker, vol.mnt, i, seconds, cs,
                             3 * fresh.f_blocks * cs // 8, out))
    for pid in pids:
        chk.eq(env.wait(pid, seconds + 120), 0, "an fsstress process exits 0")
    total, written, errs = 0, 0, {}
    for out in outs:
        with open(out) as f:
            e = ast.literal_eval(f.read())
        total += e.pop("done")
        written += e.pop("written")
        for k, v in e.items():
            errs[k] = errs.get(k, 0) + v
    log("fsstress: %d operations, %d MiB written, failures %s" % (
        total, written >> 20, sorted(errs.items())))
    # several times the volume's size went through it (three, unless the
    # time bound cut the run short on a slow machine)
    chk.ok(written >= 2 * fresh.f_blocks * cs, "fsstress wrote %d MiB, 2 volumes' worth at least" % (
        written >> 20))
    chk.ok(all(k.endswith(" ENOSPC") for k in errs), "only ENOSPC: %s" % errs)
    chk.ok(any(k.endswith(" ENOSPC") for k in errs), "the volume was full at times: %s" % errs)
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("read-only" not in tail, "the volume never turned read-only: %s" % tail[-500:])
    vol.umount()
    vol.fsck(chk, "after fsstress")
    vol.mount()
    for n in os.listdir(vol.mnt):
        p = os.path.join(vol.mnt, n)
        if n != "lost+found":
            shutil.rmtree(p)
    vol.umount()
    vol.fsck(chk, "after deleting everything")
    held = allocator_clusters(env, vol.img)
    vol.mount()
    again = os.statvfs(vol.mnt)
    chk.eq(again.f_bfree + sum(held.values()), fresh.f_bfree + sum(held0.values()),
           "every cluster is free or an allocator's after deleting it all")
    chk.ok(all(held[f] <= held0[f] for f in held), "no allocator keeps a group it grew by: %s, "
           "mkfs.ocfs2 made %s" % (held, held0))
    vol.umount()


CASES = {"enospc": case_enospc, "fsstress": case_fsstress}

if __name__ == "__main__":
    sys.exit(main(CASES))
