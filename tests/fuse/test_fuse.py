#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ocfs2d through real FUSE mounts, judged by fsck.ocfs2 -fn after each case.

    test_fuse.py OCFS2D OCFS2CTL CASE

CASE: ops (namespace operations), data (file contents and attributes),
perms (a non-root user: the default access, noallow_other), ctl (ocfs2ctl mount/umount through
the control socket, forced unmounts), stress (concurrent random operations,
verified after a remount), crash (SIGKILL of the daemon mid-workload, the
journal replayed, fsynced files intact), fault (the Nth read, write or
flush of the image fails, through the faultshim LD_PRELOAD module named by
FUSE_FAULT_SHIM), enomem (the daemon's Nth fscore allocation fails, through
the same shim), fsx (one file under a random mix of reads, writes, mmap,
truncate, fallocate, copy_file_range and O_DIRECT, checked against a model
after each operation, on three volume geometries: fsx.py), helper (mount(8)
and umount(8) through mount.fuse.ocfs2: mount -t, an fstab line, plain
umount, in a private mount namespace), log (syslog and ocfs2ctl log),
fsync (the commits and flushes fsync and fdatasync cost, alone and from
concurrent threads, by the daemon's statistics).
Needs root,
/dev/fuse and ocfs2-tools (else exit 77).  FUSE_STRESS_SECONDS bounds the stress case's
operations (default 40), FUSE_FSX_SECONDS the fsx case's (60);
FUSE_TEST_WATCHDOG the whole case (540 s).  The harness is o2test's
(tests/o2test); by hand, from the top of the tree:

    PYTHONPATH=tests python3 tests/fuse/test_fuse.py build/daemon/ocfs2d build/cli/ocfs2ctl ops
"""

import ctypes
import errno
import hashlib
import json
import mmap
import os
import re
import struct
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

from fsx import case_fsx
from o2test.check import Failure
from o2test.harness import main
from o2test.proc import log, preload_env, run, sanitizer_report, tool_env
from o2test.syscalls import (NOBODY_ACCESS_WANT, nobody_access, unshare_mounts, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE, RENAME_EXCHANGE,
                             RENAME_NOREPLACE, SEEK_DATA, SEEK_HOLE, UTIME_NOW, UTIME_OMIT, as_user, dirents, errno_of, getdents,
                             fallocate, libc, renameat2, utimensat)
from o2test.tree import compare_snapshots, file_sha, read_file, snapshot
from o2test.volume import lazy_umount, mount_entry


def write_file(path, data, mode=0o644):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)


def pwrite_all(fd, data, off):
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, off)
        view, off = view[n:], off + n


def drop_inode_caches():
    """Make the kernel forget unused dentries and inodes (FORGET requests)."""
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2")
    except OSError:
        pass


def remount_and_compare(chk, vol, root=None, opts=None):
    """Snapshot, unmount, fsck, mount again: everything must still be there."""
    root = root or vol.mnt
    before = snapshot(root)
    vol.umount()
    vol.fsck(chk, "after unmount")
    vol.mount(opts)
    after = snapshot(root)
    compare_snapshots(chk, before, after, "%s after remount" % vol.name)
    return after


def rdump_compare(chk, env, vol, subdir):
    """debugfs.ocfs2 rdump of /subdir (unmounted volume) equals the mounted
    tree's regular files, directories and symlinks (snapshot taken before)."""
    if not env.debugfs:
        return
    out = os.path.join(env.tmp, "rdump-" + vol.name)
    os.mkdir(out)
    rc, text, got = vol.rdump("/" + subdir, out)
    chk.ok(rc == 0, "debugfs rdump /%s: exit %d: %s" % (subdir, rc, text))
    return got


# ====================================================================
# ops: the namespace
# ====================================================================

def case_ops(env, chk):
    vol = env.volume("ops")
    vol.mount()
    m = vol.mnt
    P = lambda *a: os.path.join(m, *a)  # noqa: E731

    # -- mkdir, lookup, getattr, rmdir
    root_links = os.stat(m).st_nlink
    os.mkdir(P("d1"), 0o755)
    st = os.stat(P("d1"))
    chk.ok(stat.S_ISDIR(st.st_mode), "mkdir: a directory")
    chk.eq(stat.S_IMODE(st.st_mode), 0o755, "mkdir mode")
    chk.eq(st.st_nlink, 2, "new directory's links")
    chk.eq(os.stat(m).st_nlink, root_links + 1, "parent's links after mkdir")
    chk.err(lambda: os.mkdir(P("d1")), errno.EEXIST, "mkdir over an existing dir")
    chk.err(lambda: os.stat(P("nope")), errno.ENOENT, "lookup of a missing name")
    chk.err(lambda: os.stat(P("nope", "x")), errno.ENOENT, "lookup under a missing dir")
    os.mkdir(P("d1", "sub"), 0o700)
    chk.eq(os.stat(P("d1", "sub", "..")).st_ino, st.st_ino, "'..' of a subdirectory")
    chk.err(lambda: os.rmdir(P("d1")), errno.ENOTEMPTY, "rmdir of a non-empty dir")
    os.rmdir(P("d1", "sub"))
    chk.eq(os.stat(P("d1")).st_nlink, 2, "links after rmdir of the subdir")
    write_file(P("d1", "f"), b"file")
    chk.err(lambda: os.rmdir(P("d1", "f")), errno.ENOTDIR, "rmdir of a file")
    chk.err(lambda: os.unlink(P("d1")), errno.EISDIR, "unlink of a dir")
    chk.err(lambda: os.rmdir(P("d1", "none")), errno.ENOENT, "rmdir of a missing name")
    chk.err(lambda: os.unlink(P("d1", "none")), errno.ENOENT, "unlink of a missing name")
    chk.err(lambda: os.mkdir(P("d1", "f", "x")), errno.ENOTDIR, "mkdir under a file")

    # -- mknod: fifo, char and block devices, sockets
    os.mkdir(P("nodes"))
    os.mkfifo(P("nodes", "fifo"), 0o640)
    st = os.lstat(P("nodes", "fifo"))
    chk.ok(stat.S_ISFIFO(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o640, "mkfifo: %o" % st.st_mode)
    os.mknod(P("nodes", "null"), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    st = os.lstat(P("nodes", "null"))
    chk.ok(stat.S_ISCHR(st.st_mode), "mknod S_IFCHR: %o" % st.st_mode)
    chk.eq(st.st_rdev, os.makedev(1, 3), "char device number")
    # libfuse mounts nodev: device nodes on the volume do not open
    chk.err(lambda: open(P("nodes", "null"), "rb"), errno.EACCES, "opening a device node (nodev)")
    os.mknod(P("nodes", "blk"), stat.S_IFBLK | 0o600, os.makedev(259, 70000 & 0xfffff))
    st = os.lstat(P("nodes", "blk"))
    chk.ok(stat.S_ISBLK(st.st_mode), "mknod S_IFBLK")
    chk.eq(st.st_rdev, os.makedev(259, 70000 & 0xfffff), "block device number (big minor)")
    os.mknod(P("nodes", "sock1"), stat.S_IFSOCK | 0o755)
    chk.ok(stat.S_ISSOCK(os.lstat(P("nodes", "sock1")).st_mode), "mknod S_IFSOCK")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(P("nodes", "sock2"))
    s.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(P("nodes", "sock2"))
    a, _ = s.accept()
    c.sendall(b"ping")
    chk.eq(a.recv(4), b"ping", "a socket bound on the volume works")
    for x in (a, c, s):
        x.close()
    chk.ok(stat.S_ISSOCK(os.lstat(P("nodes", "sock2")).st_mode), "bind() made a socket node")
    chk.err(lambda: os.mknod(P("nodes", "fifo"), stat.S_IFIFO | 0o600), errno.EEXIST, "mknod over a name")
    types = {e.name: (e.is_fifo() if hasattr(e, "is_fifo") else None) for e in os.scandir(P("nodes"))}
    chk.eq(sorted(types), ["blk", "fifo", "null", "sock1", "sock2"], "readdir of nodes/")
    dtypes = {}
    for e in os.scandir(P("nodes")):
        dtypes[e.name] = stat.S_IFMT(e.stat(follow_symlinks=False).st_mode)
    chk.eq(dtypes, {"blk": stat.S_IFBLK, "fifo": stat.S_IFIFO, "null": stat.S_IFCHR,
                    "sock1": stat.S_IFSOCK, "sock2": stat.S_IFSOCK}, "node types via scandir")

    # -- symlinks: fast (in the inode) and extent-based, up to PATH_MAX - 1
    os.mkdir(P("links"))
    write_file(P("links", "target"), b"the target")
    lengths = [1, 10, 59, 60, 61, 100, 500, 800, 1000, 2000, 4000, 4095]
    for n in lengths:
        t = ("t" * n) if n < 20 else ("./" * ((n - 6) // 2) + "target")
        t = t + "x" * (n - len(t))
        os.symlink(t, P("links", "l%d" % n))
    for n in lengths:
        p = P("links", "l%d" % n)
        t = os.readlink(p)
        chk.eq(len(t), n, "readlink length of a %d-byte target" % n)
        chk.eq(os.lstat(p).st_size, n, "lstat size of a %d-byte symlink" % n)
        chk.ok(stat.S_ISLNK(os.lstat(p).st_mode), "symlink type (%d)" % n)
    os.symlink("target", P("links", "rel"))
    chk.eq(read_file(P("links", "rel")), b"the target", "following a symlink")
    os.symlink("./" * 40 + "target", P("links", "long-rel"))
    chk.eq(read_file(P("links", "long-rel")), b"the target", "following an 86-byte symlink")
    chk.err(lambda: os.symlink("x" * 4096, P("links", "toolong")), errno.ENAMETOOLONG,
            "symlink target of PATH_MAX bytes")
    chk.err(lambda: os.readlink(P("links", "target")), errno.EINVAL, "readlink of a file")
    chk.err(lambda: os.symlink("x", P("links", "rel")), errno.EEXIST, "symlink over a name")

    # -- hard links
    os.mkdir(P("hl"))
    write_file(P("hl", "a"), b"linked")
    os.link(P("hl", "a"), P("hl", "b"))
    os.link(P("hl", "a"), P("d1", "c"))
    sa, sb = os.stat(P("hl", "a")), os.stat(P("hl", "b"))
    chk.eq(sa.st_ino, sb.st_ino, "hard link: same inode")
    chk.eq(sb.st_nlink, 3, "links after two link()s")
    os.unlink(P("hl", "a"))
    chk.eq(os.stat(P("hl", "b")).st_nlink, 2, "links after an unlink")
    chk.eq(read_file(P("d1", "c")), b"linked", "content through the other link")
    chk.err(lambda: os.link(P("d1"), P("hl", "dirlink")), errno.EPERM, "hard link to a directory")
    chk.err(lambda: os.link(P("hl", "b"), P("d1", "c")), errno.EEXIST, "link over a name")
    chk.err(lambda: os.link(P("hl", "zz"), P("hl", "zz2")), errno.ENOENT, "link of a missing file")
    os.link(P("links", "rel"), P("hl", "symlink-link"))
    chk.eq(os.readlink(P("hl", "symlink-link")), "target", "hard link to a symlink")

    # -- name lengths
    os.mkdir(P("names"))
    n255, n256 = "n" * 255, "n" * 256
    write_file(P("names", n255), b"255")
    chk.eq(read_file(P("names", n255)), b"255", "a 255-byte name")
    os.mkdir(P("names", "D" * 255))
    os.symlink("x", P("names", "S" * 255))
    os.link(P("names", n255), P("names", "L" * 255))
    u255 = "\u00e9" * 127 + "e"  # 255 bytes of UTF-8
    write_file(P("names", u255), b"utf8")
    chk.eq(len(os.fsencode(u255)), 255, "utf-8 name length")
    chk.eq(sorted(os.listdir(P("names"))), sorted([n255, "D" * 255, "S" * 255, "L" * 255, u255]),
           "readdir of 255-byte names")
    for what, fn in [("create", lambda: write_file(P("names", n256), b"")),
                     ("mkdir", lambda: os.mkdir(P("names", n256))),
                     ("lookup", lambda: os.stat(P("names", n256))),
                     ("symlink", lambda: os.symlink("x", P("names", n256))),
                     ("link", lambda: os.link(P("names", n255), P("names", n256))),
                     ("rename", lambda: os.rename(P("names", n255), P("names", n256))),
                     ("mknod", lambda: os.mkfifo(P("names", n256))),
                     ("unlink", lambda: os.unlink(P("names", n256)))]:
        chk.err(fn, errno.ENAMETOOLONG, "256-byte name: " + what)
    os.rename(P("names", n255), P("names", "short"))
    os.rename(P("names", "short"), P("names", "m" * 255))
    chk.eq(read_file(P("names", "m" * 255)), b"255", "rename to a 255-byte name")

    # -- rename
    os.mkdir(P("r"))
    os.mkdir(P("r", "A"))
    os.mkdir(P("r", "B"))
    A, B = P("r", "A"), P("r", "B")
    write_file(os.path.join(A, "f1"), b"one")
    ino = os.stat(os.path.join(A, "f1")).st_ino
    os.rename(os.path.join(A, "f1"), os.path.join(A, "f2"))
    chk.err(lambda: os.stat(os.path.join(A, "f1")), errno.ENOENT, "rename: old name gone")
    chk.eq(os.stat(os.path.join(A, "f2")).st_ino, ino, "rename: same inode under the new name")
    os.rename(os.path.join(A, "f2"), os.path.join(B, "f3"))
    chk.eq(read_file(os.path.join(B, "f3")), b"one", "rename across directories")
    # a directory across directories: links and '..' follow
    os.mkdir(os.path.join(A, "sd"))
    os.mkdir(os.path.join(A, "sd", "inner"))
    la, lb = os.stat(A).st_nlink, os.stat(B).st_nlink
    # listed before the move: the kernel keeps listings, and '..' in this one changes
    chk.eq(dirents(os.path.join(A, "sd"))[".."], os.stat(A).st_ino, "'..' listed before a move")
    os.rename(os.path.join(A, "sd"), os.path.join(B, "sd"))
    chk.eq((os.stat(A).st_nlink, os.stat(B).st_nlink), (la - 1, lb + 1), "links after moving a dir")
    chk.eq(os.stat(os.path.join(B, "sd", "..")).st_ino, os.stat(B).st_ino, "'..' of a moved dir")
    chk.eq(dirents(os.path.join(B, "sd"))[".."], os.stat(B).st_ino, "'..' listed after a move")
    chk.eq(os.listdir(os.path.join(B, "sd")), ["inner"], "moved dir keeps its entries")
    # a kept listing follows the changes made through this mount
    names = set(os.listdir(A))
    write_file(os.path.join(A, "listed"), b"")
    chk.eq(set(os.listdir(A)), names | {"listed"}, "a listing after a create")
    os.rename(os.path.join(A, "listed"), os.path.join(B, "listed"))
    chk.eq(set(os.listdir(A)), names, "a listing after a rename away")
    chk.ok("listed" in os.listdir(B), "a listing after a rename in")
    os.unlink(os.path.join(B, "listed"))
    chk.ok("listed" not in os.listdir(B), "a listing after an unlink")
    # A listing the kernel kept, resumed by a readdir of ours from another
    # moment's snapshot: the first names, already read, are removed, then
    # the kept listing goes (its directory moves), and the rest is read
    # through us from where the kernel was - every name that stayed, once.
    L = os.path.join(A, "L")
    os.mkdir(L)
    names = [f"entry-{i:05d}" for i in range(1500)]
    for n in names:
        os.close(os.open(os.path.join(L, n), os.O_CREAT | os.O_WRONLY, 0o644))
    chk.eq(sorted(os.listdir(L)), names, "a listing of 1500 names")
    fd = os.open(L, os.O_RDONLY | os.O_DIRECTORY)
    seen = [n for n, _ in getdents(fd, 4096) if n not in (".", "..")]
    for n in seen:
        os.unlink(os.path.join(L, n))
    os.rename(L, os.path.join(B, "L"))
    while True:
        got = getdents(fd, 4096)
        if not got:
            break
        seen += [n for n, _ in got]
    os.close(fd)
    missing = sorted(set(names) - set(seen))
    chk.eq((len(missing), missing[:3], len(seen) - len(set(seen))), (0, [], 0),
           "a kept listing resumed from another snapshot: names missing, some, twice")
    shutil.rmtree(os.path.join(B, "L"))
    # over an existing file: the old target goes, its space with it
    write_file(os.path.join(A, "victim"), b"v" * 100000)
    write_file(os.path.join(A, "winner"), b"w")
    victim_links = os.stat(os.path.join(A, "victim")).st_nlink
    os.rename(os.path.join(A, "winner"), os.path.join(A, "victim"))
    chk.eq(victim_links, 1, "victim link count")
    chk.eq(read_file(os.path.join(A, "victim")), b"w", "rename over an existing file")
    chk.ok("winner" not in os.listdir(A), "rename over a file: the source name is gone")
    # over a hard-linked file: the other link survives
    write_file(os.path.join(A, "hl1"), b"keep me")
    os.link(os.path.join(A, "hl1"), os.path.join(B, "hl2"))
    write_file(os.path.join(A, "new"), b"new")
    os.rename(os.path.join(A, "new"), os.path.join(A, "hl1"))
    chk.eq((read_file(os.path.join(B, "hl2")), os.stat(os.path.join(B, "hl2")).st_nlink),
           (b"keep me", 1), "rename over one of two links")
    # over an empty dir, over a non-empty one, file over dir, dir over file
    os.mkdir(os.path.join(A, "src"))
    write_file(os.path.join(A, "src", "inside"), b"in")
    os.mkdir(os.path.join(B, "empty"))
    os.rename(os.path.join(A, "src"), os.path.join(B, "empty"))
    chk.eq(read_file(os.path.join(B, "empty", "inside")), b"in", "rename dir over an empty dir")
    os.mkdir(os.path.join(A, "full"))
    write_file(os.path.join(A, "full", "x"), b"")
    os.mkdir(os.path.join(A, "d2"))
    chk.err(lambda: os.rename(os.path.join(A, "d2"), os.path.join(A, "full")), (errno.ENOTEMPTY, errno.EEXIST),
            "rename over a non-empty dir")
    chk.err(lambda: os.rename(os.path.join(A, "victim"), os.path.join(A, "d2")), errno.EISDIR,
            "rename a file over a dir")
    chk.err(lambda: os.rename(os.path.join(A, "d2"), os.path.join(A, "victim")), errno.ENOTDIR,
            "rename a dir over a file")
    chk.err(lambda: os.rename(os.path.join(A, "d2"), os.path.join(A, "d2", "in")), errno.EINVAL,
            "rename a dir into itself")
    chk.err(lambda: os.rename(os.path.join(A, "missing"), os.path.join(A, "m2")), errno.ENOENT,
            "rename of a missing name")
    os.rename(os.path.join(A, "victim"), os.path.join(A, "victim"))  # same name: nothing happens
    chk.eq(read_file(os.path.join(A, "victim")), b"w", "rename onto itself")
    # RENAME_NOREPLACE
    write_file(os.path.join(A, "nr1"), b"nr1")
    write_file(os.path.join(A, "nr2"), b"nr2")
    chk.err(lambda: renameat2(os.path.join(A, "nr1"), os.path.join(A, "nr2"), RENAME_NOREPLACE),
            errno.EEXIST, "RENAME_NOREPLACE over a file")
    chk.eq(read_file(os.path.join(A, "nr2")), b"nr2", "NOREPLACE left the target")
    renameat2(os.path.join(A, "nr1"), os.path.join(B, "nr3"), RENAME_NOREPLACE)
    chk.eq(read_file(os.path.join(B, "nr3")), b"nr1", "RENAME_NOREPLACE to a free name")
    # RENAME_EXCHANGE of a file and a directory in different directories
    write_file(os.path.join(A, "xf"), b"exchanged file")
    os.mkdir(os.path.join(B, "xd"))
    write_file(os.path.join(B, "xd", "in"), b"in xd")
    fino, dino = os.stat(os.path.join(A, "xf")).st_ino, os.stat(os.path.join(B, "xd")).st_ino
    la, lb = os.stat(A).st_nlink, os.stat(B).st_nlink
    renameat2(os.path.join(A, "xf"), os.path.join(B, "xd"), RENAME_EXCHANGE)
    chk.eq(os.stat(os.path.join(A, "xf")).st_ino, dino, "EXCHANGE: A/xf is the dir")
    chk.eq(os.stat(os.path.join(B, "xd")).st_ino, fino, "EXCHANGE: B/xd is the file")
    chk.eq(read_file(os.path.join(B, "xd")), b"exchanged file", "EXCHANGE: file content")
    chk.eq(read_file(os.path.join(A, "xf", "in")), b"in xd", "EXCHANGE: dir content")
    chk.eq((os.stat(A).st_nlink, os.stat(B).st_nlink), (la + 1, lb - 1), "EXCHANGE: parents' links")
    chk.eq(os.stat(os.path.join(A, "xf", "..")).st_ino, os.stat(A).st_ino, "EXCHANGE: '..' of the dir")
    chk.err(lambda: renameat2(os.path.join(A, "xf"), os.path.join(B, "none"), RENAME_EXCHANGE),
            errno.ENOENT, "EXCHANGE with a missing target")
    chk.err(lambda: renameat2(os.path.join(A, "xf"), os.path.join(B, "none"),
                              RENAME_EXCHANGE | RENAME_NOREPLACE), errno.EINVAL,
            "EXCHANGE|NOREPLACE")
    # exchange two files in one directory
    write_file(os.path.join(A, "e1"), b"e1")
    write_file(os.path.join(A, "e2"), b"e2" * 5000)
    renameat2(os.path.join(A, "e1"), os.path.join(A, "e2"), RENAME_EXCHANGE)
    chk.eq((read_file(os.path.join(A, "e1")), read_file(os.path.join(A, "e2"))), (b"e2" * 5000, b"e1"),
           "EXCHANGE of two files")

    # -- a directory of a few thousand entries, listed completely and exactly
    big = P("big")
    os.mkdir(big)
    rnd = random.Random(7)
    names = set()
    while len(names) < 3000:
        names.add("e%05d-%s" % (len(names), "x" * rnd.randrange(0, 120)))
    for i, n in enumerate(sorted(names)):
        if i % 10 == 0:
            os.mkdir(os.path.join(big, n))
        else:
            os.close(os.open(os.path.join(big, n), os.O_CREAT | os.O_WRONLY, 0o644))
    chk.eq(sorted(os.listdir(big)), sorted(names), "readdir of 3000 entries")
    listed = [e.name for e in os.scandir(big)]
    chk.eq(len(listed), len(set(listed)), "readdir: no duplicates")
    gone = set(rnd.sample(sorted(names), 1000))
    for n in gone:
        p = os.path.join(big, n)
        if os.path.isdir(p):
            os.rmdir(p)
        else:
            os.unlink(p)
    names -= gone
    chk.eq(sorted(os.listdir(big)), sorted(names), "readdir after removing 1000")
    # a directory changing while it is read: every untouched entry once
    fd = os.open(big, os.O_RDONLY | os.O_DIRECTORY)
    it = os.scandir(big)
    seen = [next(it).name for _ in range(100)]
    for i in range(200):
        write_file(os.path.join(big, "during-%d" % i), b"")
    seen += [e.name for e in it]
    it.close()
    chk.ok(names <= set(seen), "readdir while entries are added: lost %d" % len(names - set(seen)))
    chk.eq(len(seen), len(set(seen)), "readdir while entries are added: no duplicates")
    os.fsync(fd)  # fsyncdir
    os.close(fd)
    for i in range(200):
        names.add("during-%d" % i)
    # ... and while entries are removed and their inodes reused (between
    # opendir and the first readdir, which is a readdirplus): no errors, and
    # what is listed and still exists is what the name is now
    order = os.listdir(big)
    it = os.scandir(big)
    doomed = [n for n in order if n in names and not os.path.isdir(os.path.join(big, n))][:300]
    for n in doomed:
        os.unlink(os.path.join(big, n))
    for i in range(300):
        write_file(os.path.join(big, "reuse-%d" % i), b"r")
    try:
        listed = list(it)
        chk.ok(True, "readdir while entries are removed")
    except OSError as e:
        listed = []
        chk.ok(False, "readdir while entries are removed: %s" % e)
    it.close()
    wrong = []
    for e in listed:
        try:
            st = os.stat(os.path.join(big, e.name), follow_symlinks=False)
        except FileNotFoundError:
            continue
        if st.st_ino != e.inode():
            wrong.append(e.name)
    chk.eq(wrong, [], "readdir entries whose inode is not the name's")
    alive_doomed = [n for n in doomed if os.path.lexists(os.path.join(big, n))]
    chk.eq(alive_doomed, [], "removed names that readdir brought back")
    names -= set(doomed)
    names |= {"reuse-%d" % i for i in range(300)}
    chk.eq(sorted(os.listdir(big)), sorted(names), "readdir after removing and reusing")
    d_types = {e.name: e.is_dir(follow_symlinks=False) for e in os.scandir(big)}
    chk.ok(all(d_types[n] == os.path.isdir(os.path.join(big, n)) for n in names), "readdir d_type")

    # -- access
    chk.ok(os.access(P("d1", "f"), os.R_OK | os.W_OK), "access R|W")
    chk.ok(not os.access(P("d1", "f"), os.X_OK), "access X on a 0644 file (root)")
    chk.ok(not os.access(P("nope"), os.F_OK), "access F_OK of a missing name")

    # -- lookup/forget: the kernel forgets everything it can, then looks it up again
    before_drop = snapshot(m)
    drop_inode_caches()
    compare_snapshots(chk, before_drop, snapshot(m), "after the kernel forgot its inodes")
    # many lookups of names that then disappear
    for i in range(300):
        p = P("d1", "tmp%d" % i)
        write_file(p, b"x")
        os.stat(p)
        os.unlink(p)
    chk.eq(sorted(os.listdir(P("d1"))), ["c", "f"], "d1 after temporary files")

    before = snapshot(m)
    remount_and_compare(chk, vol)
    chk.eq(sorted(os.listdir(big)), sorted(names), "big dir after remount")
    vol.umount()
    vol.fsck(chk, "at the end")
    out = rdump_compare(chk, env, vol, "r")
    if out:
        for rel, e in before.items():
            if not rel.startswith("r/"):
                continue
            p = os.path.join(out, rel[2:])
            if stat.S_ISREG(e["mode"]):
                chk.ok(os.path.isfile(p) and file_sha(p) == e["sha"], "rdump: %s" % rel)
            elif stat.S_ISDIR(e["mode"]):
                chk.ok(os.path.isdir(p), "rdump: dir %s" % rel)


# ====================================================================
# data: contents and attributes
# ====================================================================

def case_data(env, chk):
    vol = env.volume("data", mkfs="mkfs")
    vol.mount()
    m = vol.mnt
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    rnd = random.Random(11)
    cs = os.statvfs(m).f_frsize

    # -- create/write/read of many sizes (inline data, one cluster, many)
    os.mkdir(P("sizes"))
    for n in [0, 1, 100, 500, 1000, 3000, 4095, 4096, 4097, 65536 + 7, (1 << 20) + 13, 5 << 20]:
        data = rnd.randbytes(n)
        write_file(P("sizes", "s%d" % n), data)
        chk.eq(os.stat(P("sizes", "s%d" % n)).st_size, n, "size of a %d-byte file" % n)
        chk.eq(read_file(P("sizes", "s%d" % n)), data, "content of a %d-byte file" % n)
    # pread/pwrite at odd offsets, growing an inline file past its limit
    data = bytearray(rnd.randbytes(300))
    fd = os.open(P("sizes", "grow"), os.O_RDWR | os.O_CREAT, 0o600)
    pwrite_all(fd, data, 0)
    for off, n in [(290, 50), (1000, 3000), (7000, 10), (200000, 5000), (5, 4)]:
        chunk = rnd.randbytes(n)
        pwrite_all(fd, chunk, off)
        if off > len(data):
            data += bytes(off - len(data))
        data[off:off + n] = chunk
    chk.eq(os.fstat(fd).st_size, len(data), "size after scattered writes")
    chk.eq(os.pread(fd, len(data) + 10, 0), bytes(data), "content after scattered writes")
    chk.eq(os.pread(fd, 100, 100000), bytes(100), "a hole reads as zeros")
    chk.eq(os.pread(fd, 100, len(data) + 5), b"", "read past the end")
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)

    # -- mmap, O_DIRECT, the largest offsets
    p = P("mapped")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, 3 * cs)
    mp = mmap.mmap(fd, 3 * cs)
    mp[100:105] = b"hello"
    mp[2 * cs:2 * cs + 5] = b"world"
    mp.flush()
    mp.close()
    os.close(fd)
    d = read_file(p)
    chk.eq((d[100:105], d[2 * cs:2 * cs + 5], len(d)), (b"hello", b"world", 3 * cs), "shared mmap writes")
    fd = os.open(P("direct"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, 2 * cs)
    blob = rnd.randbytes(2 * cs)
    buf.write(blob)
    chk.eq(os.pwrite(fd, buf, cs), 2 * cs, "O_DIRECT write")
    back = mmap.mmap(-1, 3 * cs)
    chk.eq(os.preadv(fd, [back], 0), 3 * cs, "O_DIRECT read")
    chk.eq(back[:], bytes(cs) + blob, "O_DIRECT content")
    # unaligned O_DIRECT: EINVAL, as ext4, XFS and kernel OCFS2 answer
    # (offsets and lengths in 512-byte sectors; the buffers stay aligned)
    mv = memoryview(buf)
    chk.err(lambda: os.pwrite(fd, mv[:cs], 100), errno.EINVAL, "O_DIRECT write at an unaligned offset")
    chk.err(lambda: os.pwrite(fd, mv[:1000], cs), errno.EINVAL, "O_DIRECT write of an unaligned length")
    chk.err(lambda: os.preadv(fd, [memoryview(back)[:cs]], 700), errno.EINVAL,
            "O_DIRECT read at an unaligned offset")
    chk.err(lambda: os.preadv(fd, [memoryview(back)[:1536 + 100]], 0), errno.EINVAL,
            "O_DIRECT read of an unaligned length")
    chk.eq(os.pwrite(fd, mv[:1536], cs + 512), 1536, "O_DIRECT write of whole sectors inside a cluster")
    chk.eq(os.preadv(fd, [back], 0), 3 * cs, "O_DIRECT read after it")
    chk.eq(back[:], bytes(cs) + blob[:512] + blob[:1536] + blob[2048:], "O_DIRECT content after it")
    os.close(fd)
    maxoff = (0xffffffff << (cs.bit_length() - 1))  # the first cluster past the largest file
    fd = os.open(P("huge"), os.O_RDWR | os.O_CREAT, 0o644)
    chk.eq(os.pwrite(fd, b"end", maxoff - 3), 3, "a write ending at the largest offset")
    chk.eq(os.fstat(fd).st_size, maxoff, "the largest file size")
    chk.err(lambda: os.pwrite(fd, b"x", maxoff), errno.EFBIG, "a write past the largest offset")
    chk.err(lambda: os.ftruncate(fd, maxoff + 1), errno.EFBIG, "truncate past the largest size")
    chk.eq(os.pread(fd, 10, maxoff - 5), b"\0\0end", "reading at the largest offset")
    os.ftruncate(fd, 0)
    os.close(fd)

    # -- chmod, chown, ctime
    p = P("attr")
    write_file(p, b"attributes")
    st0 = os.stat(p)
    time.sleep(0.02)
    os.chmod(p, 0o4751)
    st = os.stat(p)
    chk.eq(stat.S_IMODE(st.st_mode), 0o4751, "chmod")
    chk.ok(st.st_ctime_ns > st0.st_ctime_ns, "chmod changes ctime")
    chk.eq(st.st_mtime_ns, st0.st_mtime_ns, "chmod keeps mtime")
    os.chown(p, 1234, 5678)
    st = os.stat(p)
    chk.eq((st.st_uid, st.st_gid), (1234, 5678), "chown")
    os.chown(p, -1, 42)
    chk.eq((os.stat(p).st_uid, os.stat(p).st_gid), (1234, 42), "chown with uid -1")
    os.chown(p, 0xfffffffe, 0xfffffffe)
    chk.eq((os.stat(p).st_uid, os.stat(p).st_gid), (0xfffffffe, 0xfffffffe), "chown to 2^32-2")
    os.chown(p, 0, 0)
    os.chmod(p, 0o644)

    # -- truncate up and down
    p = P("trunc")
    data = rnd.randbytes(3 * cs + 100)
    write_file(p, data)
    m0 = os.stat(p).st_mtime_ns
    time.sleep(0.02)
    os.truncate(p, 10 * cs)
    chk.eq(read_file(p), data + bytes(10 * cs - len(data)), "truncate up: zeros after the data")
    chk.ok(os.stat(p).st_mtime_ns > m0, "truncate changes mtime")
    os.truncate(p, cs + 10)
    chk.eq(read_file(p), data[:cs + 10], "truncate down")
    os.truncate(p, 4 * cs)
    chk.eq(read_file(p), data[:cs + 10] + bytes(4 * cs - cs - 10),
           "truncate down then up: no old data comes back")
    with open(p, "r+b") as f:
        f.truncate(5)
    chk.eq(read_file(p), data[:5], "ftruncate")
    os.truncate(p, 0)
    chk.eq((os.stat(p).st_size, os.stat(p).st_blocks), (0, 0), "truncate to 0 frees the clusters")
    write_file(p, b"abc")
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    os.close(fd)
    chk.eq(os.stat(p).st_size, 0, "O_TRUNC")
    write_file(p, b"abc")
    os.close(os.open(p, os.O_RDONLY | os.O_TRUNC))
    chk.eq(os.stat(p).st_size, 0, "O_RDONLY|O_TRUNC truncates (as Linux does)")
    write_file(p, rnd.randbytes(1 << 20))
    os.truncate(p, 1 << 40)
    chk.eq(os.stat(p).st_size, 1 << 40, "truncate up to 1 TiB (sparse)")
    with open(p, "rb") as f:
        f.seek((1 << 40) - 10)
        chk.eq(f.read(), bytes(10), "the end of a 1 TiB sparse file")
    os.truncate(p, 100)

    # -- utimens: explicit, UTIME_NOW, UTIME_OMIT
    p = P("times")
    write_file(p, b"t")
    os.utime(p, ns=(1_000_000_123, 2_000_000_456))
    st = os.stat(p)
    chk.eq((st.st_atime_ns, st.st_mtime_ns), (1_000_000_123, 2_000_000_456), "utime with nanoseconds")
    c0 = st.st_ctime_ns
    utimensat(p, UTIME_NOW, UTIME_OMIT)
    st = os.stat(p)
    chk.ok(abs(st.st_atime - time.time()) < 5, "UTIME_NOW atime: %s" % st.st_atime)
    chk.eq(st.st_mtime_ns, 2_000_000_456, "UTIME_OMIT keeps mtime")
    chk.ok(st.st_ctime_ns >= c0, "utimensat changes ctime")
    utimensat(p, (5, 6), UTIME_NOW)
    st = os.stat(p)
    chk.eq(st.st_atime_ns, 5_000_000_006, "explicit atime with UTIME_NOW mtime")
    chk.ok(abs(st.st_mtime - time.time()) < 5, "UTIME_NOW mtime")
    a1, m1 = st.st_atime_ns, st.st_mtime_ns
    utimensat(p, UTIME_OMIT, UTIME_OMIT)
    st = os.stat(p)
    chk.eq((st.st_atime_ns, st.st_mtime_ns), (a1, m1), "UTIME_OMIT for both")
    os.utime(p, (-1_000_000, 4_000_000_000))
    st = os.stat(p)
    chk.eq((st.st_atime, st.st_mtime), (-1_000_000, 4_000_000_000), "times before 1970 and after 2038")
    os.utime(p)
    chk.ok(abs(os.stat(p).st_mtime - time.time()) < 5, "utime(NULL)")
    os.utime(p, ns=(1, 2))
    # mtime changes on write
    with open(p, "r+b") as f:
        f.write(b"u")
    chk.ok(os.stat(p).st_mtime > 100, "write updates mtime")

    # -- statfs
    sv = os.statvfs(m)
    chk.eq(sv.f_frsize, cs, "f_frsize is the cluster size")
    chk.eq(sv.f_blocks * sv.f_frsize, 256 << 20, "f_blocks * f_frsize is the volume size")
    chk.ok(0 < sv.f_bfree <= sv.f_blocks and sv.f_bavail <= sv.f_bfree, "free clusters: %s" % (sv,))
    chk.ok(0 < sv.f_ffree <= sv.f_files, "free inodes: %s" % (sv,))
    chk.eq(sv.f_namemax, 255, "f_namemax")
    rc, df = run(["df", "-B1", m])
    chk.ok(rc == 0 and str(256 << 20) in df, "df: %s" % df)
    free0 = sv.f_bfree
    write_file(P("bulk"), rnd.randbytes(16 << 20))
    free1 = os.statvfs(m).f_bfree
    chk.ok(free0 - free1 >= (16 << 20) // cs, "16 MiB written: free clusters %d -> %d" % (free0, free1))
    chk.ok(free0 - free1 <= (16 << 20) // cs + 64, "16 MiB written: not too many clusters used (%d -> %d)"
           % (free0, free1))
    os.unlink(P("bulk"))
    # (that the space comes back is the pending case "space")

    # -- fallocate: default mode, KEEP_SIZE, unsupported modes
    p = P("falloc")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 1 << 20)
    st = os.fstat(fd)
    chk.eq(st.st_size, 1 << 20, "posix_fallocate extends the size")
    chk.ok(st.st_blocks * 512 >= 1 << 20, "posix_fallocate allocates: %d blocks" % st.st_blocks)
    chk.eq(os.pread(fd, 1 << 20, 0), bytes(1 << 20), "fallocated space reads as zeros")
    fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20)
    st2 = os.fstat(fd)
    chk.eq(st2.st_size, 1 << 20, "KEEP_SIZE keeps the size")
    chk.ok(st2.st_blocks >= st.st_blocks + (1 << 20) // 512, "KEEP_SIZE allocates: %d -> %d"
           % (st.st_blocks, st2.st_blocks))
    chk.err(lambda: fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), errno.EOPNOTSUPP,
            "PUNCH_HOLE without KEEP_SIZE")
    chk.err(lambda: fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4096), errno.EOPNOTSUPP, "ZERO_RANGE")
    chunk = rnd.randbytes(10000)
    pwrite_all(fd, chunk, 5000)
    exp = bytearray(1 << 20)
    exp[5000:15000] = chunk
    chk.eq(os.pread(fd, 2 << 20, 0), bytes(exp), "writing into fallocated space")
    os.ftruncate(fd, 3 << 20)
    chk.eq(os.pread(fd, 2 << 20, 1 << 20), bytes(2 << 20), "KEEP_SIZE space beyond the old size: zeros")
    os.close(fd)

    # -- punching holes: partial clusters zeroed, whole ones freed, the size kept
    p = P("punched")
    data = bytearray(rnd.randbytes(256 << 10))
    write_file(p, data)
    fd = os.open(p, os.O_RDWR)
    blocks = os.fstat(fd).st_blocks
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10000, 100000)
    data[10000:110000] = bytes(100000)
    st = os.fstat(fd)
    chk.eq(st.st_size, len(data), "a punched file keeps its size")
    first, last = (10000 + cs - 1) // cs * cs, 110000 // cs * cs
    chk.eq(st.st_blocks, blocks - (last - first) // 512, "punching frees the whole clusters in the hole")
    chk.eq(os.pread(fd, len(data), 0), bytes(data), "a punched hole reads as zeros, the rest unchanged")
    if first < last:
        chk.eq((os.lseek(fd, 0, SEEK_HOLE), os.lseek(fd, first, SEEK_DATA)), (first, last),
               "SEEK_HOLE/SEEK_DATA around a punched hole")
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, len(data) - 5, 1 << 20)
    data[-5:] = bytes(5)
    chk.eq((os.fstat(fd).st_size, os.pread(fd, len(data), 0)), (len(data), bytes(data)),
           "a hole punched across the end of the file")
    pwrite_all(fd, b"refill", 50000)
    data[50000:50006] = b"refill"
    chk.eq(os.pread(fd, len(data), 0), bytes(data), "writing into a punched hole")
    os.close(fd)
    p = P("punched-inline")
    write_file(p, b"x" * 300)
    fd = os.open(p, os.O_RDWR)
    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 50)
    chk.eq(os.pread(fd, 400, 0), b"x" * 100 + bytes(50) + b"x" * 150, "a hole punched in inline data")
    os.close(fd)

    # -- SEEK_DATA / SEEK_HOLE on a sparse file
    p = P("sparse")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    blob = rnd.randbytes(cs)
    for off in (0, 1 << 20, 3 << 20):
        pwrite_all(fd, blob, off)
    os.ftruncate(fd, 5 << 20)
    chk.ok(os.fstat(fd).st_blocks * 512 <= 8 * cs, "a sparse file uses little space: %d blocks"
           % os.fstat(fd).st_blocks)
    for off, whence, want in [(0, SEEK_DATA, 0), (0, SEEK_HOLE, cs), (cs, SEEK_DATA, 1 << 20),
                              (100, SEEK_HOLE, cs), ((1 << 20) + 5, SEEK_DATA, (1 << 20) + 5),
                              ((1 << 20) + 5, SEEK_HOLE, (1 << 20) + cs),
                              ((1 << 20) + cs, SEEK_DATA, 3 << 20), ((3 << 20) + cs, SEEK_HOLE, (3 << 20) + cs),
                              ((3 << 20) + cs, SEEK_DATA, None), ((5 << 20) - 1, SEEK_HOLE, (5 << 20) - 1),
                              (5 << 20, SEEK_HOLE, None), (5 << 20, SEEK_DATA, None)]:
        what = "lseek(%d, %s)" % (off, "SEEK_DATA" if whence == SEEK_DATA else "SEEK_HOLE")
        if want is None:
            chk.err(lambda: os.lseek(fd, off, whence), errno.ENXIO, what)
        else:
            try:
                chk.eq(os.lseek(fd, off, whence), want, what)
            except OSError as e:
                chk.ok(False, "%s: %s" % (what, e))
    # walking the data segments finds exactly what was written
    segs, pos = [], 0
    while True:
        try:
            d = os.lseek(fd, pos, SEEK_DATA)
        except OSError:
            break
        h = os.lseek(fd, d, SEEK_HOLE)
        segs.append((d, h))
        pos = h
    chk.eq(segs, [(0, cs), (1 << 20, (1 << 20) + cs), (3 << 20, (3 << 20) + cs)], "data segments")
    # unwritten (fallocated) extents read as zeros and count as holes
    fallocate(fd, 0, 2 << 20, cs * 4)
    chk.eq(os.lseek(fd, 2 << 20, SEEK_HOLE), 2 << 20, "an unwritten extent is a hole")
    chk.eq(os.lseek(fd, (1 << 20) + cs, SEEK_DATA), 3 << 20, "SEEK_DATA skips unwritten extents")
    os.close(fd)
    small = P("small-inline")
    write_file(small, b"tiny")
    fd = os.open(small, os.O_RDONLY)
    chk.eq((os.lseek(fd, 0, SEEK_DATA), os.lseek(fd, 1, SEEK_HOLE)), (0, 4), "SEEK_* on an inline file")
    os.close(fd)

    # -- copy_file_range
    src = P("cfr-src")
    sdata = rnd.randbytes(3 * (1 << 20) + 777)
    write_file(src, sdata)
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(P("cfr-dst"), os.O_RDWR | os.O_CREAT, 0o644)
    done = 0
    while done < len(sdata):
        n = os.copy_file_range(fi, fo, len(sdata) - done, done, done)
        if n == 0:
            break
        done += n
    chk.eq(read_file(P("cfr-dst")), sdata, "copy_file_range of a whole file")
    n = os.copy_file_range(fi, fo, 5000, 100, 1 << 20)
    chk.eq(n, 5000, "copy_file_range length")
    exp = bytearray(sdata)
    exp[1 << 20:(1 << 20) + 5000] = sdata[100:5100]
    chk.eq(read_file(P("cfr-dst")), bytes(exp), "copy_file_range into the middle")
    n = os.copy_file_range(fi, fo, 10000, len(sdata) - 10, len(sdata) + 100)
    chk.eq(n, 10, "copy_file_range short at the source's end")
    chk.eq(os.copy_file_range(fi, fo, 10, len(sdata) + 5, 0), 0, "copy_file_range past the end")
    exp += bytes(100) + sdata[-10:]
    chk.eq(read_file(P("cfr-dst")), bytes(exp), "copy_file_range beyond the destination's end")
    os.close(fi)
    os.close(fo)

    # -- O_APPEND from two processes: no record lost or torn
    p = P("append")
    write_file(p, b"")
    rec, count = 128, 1500

    def appender(tag):
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        for i in range(count):
            line = ("%s %06d " % (tag, i)).encode()
            line += b"." * (rec - len(line) - 1) + b"\n"
            chk_n = os.write(fd, line)
            if chk_n != rec:
                raise Failure("short append")
        os.close(fd)

    pids = [env.fork(appender, t) for t in ("A", "B")]
    for pid in pids:
        chk.eq(env.wait(pid, 120), 0, "appender exit status")
    data = read_file(p)
    chk.eq(len(data), 2 * rec * count, "size after concurrent appends")
    seq = {"A": [], "B": []}
    torn = 0
    for i in range(0, len(data), rec):
        r = data[i:i + rec]
        parts = r.split(b" ")
        if len(r) != rec or r[-1:] != b"\n" or parts[0] not in (b"A", b"B"):
            torn += 1
            continue
        seq[parts[0].decode()].append(int(parts[1]))
    chk.eq(torn, 0, "torn append records")
    chk.eq((seq["A"], seq["B"]), (list(range(count)), list(range(count))), "append records in order")

    # -- an open unlinked file: usable until closed, then its space comes back
    # (a sync first: space freed earlier is counted free once synced)
    dfd = os.open(m, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    free0 = os.statvfs(m).f_bfree
    p = P("orphan")
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    odata = bytearray(rnd.randbytes(8 << 20))
    pwrite_all(fd, odata, 0)
    os.fsync(fd)
    os.unlink(p)
    chk.err(lambda: os.stat(p), errno.ENOENT, "the unlinked name is gone")
    chk.eq(os.fstat(fd).st_nlink, 0, "an unlinked open file has no links")
    more = rnd.randbytes(1 << 20)
    pwrite_all(fd, more, 8 << 20)
    odata += more
    chk.eq(os.pread(fd, 10 << 20, 0), bytes(odata), "the open unlinked file reads back")
    free1 = os.statvfs(m).f_bfree
    chk.ok(free1 <= free0 - (9 << 20) // cs, "its space is still used while open: %d -> %d" % (free0, free1))
    drop_inode_caches()  # the kernel keeps the open inode: the daemon must too
    chk.eq(os.pread(fd, 100, 0), bytes(odata[:100]), "the open unlinked file after dropping caches")
    # a second process keeps it open too
    fd2 = os.open("/proc/self/fd/%d" % fd, os.O_RDONLY)
    os.close(fd)
    chk.eq(os.pread(fd2, 100, 0), bytes(odata[:100]), "open through /proc after the first close")
    os.close(fd2)

    # -- fsync of a directory
    fd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)

    remount_and_compare(chk, vol)
    # once more after writing to the remounted volume
    write_file(P("after-remount"), b"more")
    os.truncate(P("sizes", "s%d" % (5 << 20)), 12345)
    remount_and_compare(chk, vol)
    vol.umount()
    vol.fsck(chk, "at the end")

    # -- reflinks made offline (ocfs2ctl reflink), changed through the mount:
    # writes copy the shared clusters first, the other files keep theirs
    src = rnd.randbytes((3 << 20) + 5)
    host = os.path.join(env.tmp, "reflink-src")
    with open(host, "wb") as f:
        f.write(src)
    for args in (["put", vol.img, host, "/r-a"], ["reflink", vol.img, "/r-a", "/r-b"],
                 ["reflink", vol.img, "/r-b", "/r-c"]):
        p = subprocess.run([env.ctl] + args, capture_output=True, text=True)
        chk.ok(p.returncode == 0, "ocfs2ctl %s: %s" % (" ".join(args[:1]), p.stderr.strip()))
    vol.mount()
    chk.eq(read_file(P("r-c")), src, "a reflink of a reflink reads as its source")
    patch = rnd.randbytes(5000)
    fd = os.open(P("r-b"), os.O_RDWR)
    pwrite_all(fd, patch, (1 << 20) + 100)
    os.fsync(fd)
    os.close(fd)
    b = bytearray(src)
    b[(1 << 20) + 100:(1 << 20) + 5100] = patch
    os.truncate(P("r-c"), 5000)
    os.unlink(P("r-a"))
    drop_inode_caches()
    chk.eq(read_file(P("r-b")), bytes(b), "a written reflink has its own copy")
    chk.eq(read_file(P("r-c")), src[:5000], "a truncated reflink")
    vol.umount()
    vol.fsck(chk, "after changing reflinks through the mount")
    vol.mount()
    chk.eq(read_file(P("r-b")), bytes(b), "a written reflink after a remount")
    os.unlink(P("r-b"))
    os.unlink(P("r-c"))
    vol.umount()
    vol.fsck(chk, "after deleting the reflinks")


def case_space(env, chk):
    """Freed space comes back: statfs counts it and new files can use it.
    Pending: freed clusters stay in the truncate log until it is half full
    or the volume is unmounted (nothing flushes it on a timer or on ENOSPC)."""
    vol = env.volume("space")
    vol.mount()
    m = vol.mnt
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    cs = os.statvfs(m).f_frsize
    free0 = os.statvfs(m).f_bfree
    write_file(P("bulk"), os.urandom(16 << 20))
    free1 = os.statvfs(m).f_bfree
    os.unlink(P("bulk"))
    free2 = wait_free(m, free0 - 64)
    chk.ok(free2 >= free0 - 64, "unlink gives the space back: %d -> %d -> %d" % (free0, free1, free2))
    # an open unlinked file: its space comes back after the last close
    free0 = os.statvfs(m).f_bfree
    fd = os.open(P("orphan"), os.O_RDWR | os.O_CREAT, 0o644)
    pwrite_all(fd, os.urandom(8 << 20), 0)
    os.unlink(P("orphan"))
    free1 = os.statvfs(m).f_bfree
    chk.ok(free1 <= free0 - (8 << 20) // cs, "used while open: %d -> %d" % (free0, free1))
    os.close(fd)
    free2 = wait_free(m, free0 - 64)
    chk.ok(free2 >= free0 - 64, "the last close frees the space: %d -> %d -> %d" % (free0, free1, free2))
    # most of the volume written, deleted and written again
    big = (os.statvfs(m).f_bavail * cs * 3 // 4) & ~0xfffff
    for i in range(2):
        p = P("big%d" % i)
        try:
            with open(p, "wb") as f:
                for _ in range(big >> 20):
                    f.write(bytes(1 << 20))
            ok = True
        except OSError as e:
            ok = False
            chk.ok(False, "writing %d MiB the %s time: %s (free %d clusters)" % (
                big >> 20, "second" if i else "first", e, os.statvfs(m).f_bfree))
        if os.path.exists(p):
            os.unlink(p)
        if not ok:
            break
    vol.umount()
    vol.fsck(chk, "at the end")


# ====================================================================
# xattr: extended attributes
# ====================================================================

def xattrs_of(path, follow=True):
    """Every attribute of path the caller may list, with its value."""
    return {n: os.getxattr(path, n, follow_symlinks=follow)
            for n in sorted(os.listxattr(path, follow_symlinks=follow))}


libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t


def getxattr_errno(path, name, size):
    """getxattr(2) with a buffer of size bytes: (errno name or "OK", value length)."""
    buf = ctypes.create_string_buffer(max(size, 1))
    n = libc.getxattr(os.fsencode(path), os.fsencode(name), buf if size else None, size)
    if n < 0:
        return errno.errorcode[ctypes.get_errno()], -1
    return "OK", n


NOTSUP = errno.errorcode[errno.EOPNOTSUPP]


def fill_xattrs(chk, path, block_size):
    """Set 400 60-byte attributes on a new file, far more than its tail and
    a block hold: the block becomes indexed (buckets), all read back."""
    write_file(path, b"")
    got, err = {}, "OK"
    for i in range(400):
        n, v = "user.fill%03d" % i, bytes([i % 251]) * 60
        err = errno_of(lambda: os.setxattr(path, n, v))
        if err != "OK":
            break
        got[n] = v
    per_entry = 16 + 12 + 60  # entry, padded name, value
    block_alone = (block_size - 48 - 20) // per_entry
    chk.eq(err, "OK", "%d-byte blocks: 400 attributes, past the inode's tail and its block (%d "
           "set; the block alone holds %d)" % (block_size, len(got), block_alone))
    chk.eq(xattrs_of(path), got, "%d-byte blocks: a full inode's attributes read back" % block_size)
    return got


def case_xattr(env, chk):
    """Extended attributes through the mount: every store (the inode's
    tail, an xattr block, values in clusters), the setxattr flags, the
    kernel's limits, ENOSPC when both stores are full, namespaces and who
    may list them, xattrs kept across writes that move inline data out,
    through hard links, open-unlinked files and a remount, and their space
    given back on unlink (more values than one transaction frees).  fsck
    (name hashes, layout, leaks) after each unmount."""
    vol = env.volume("xattr", mkfs="mkfs.ocfs2")  # 4K blocks: a roomy xattr block
    os.chmod(env.tmp, 0o755)
    vol.mount("allow_other")
    m = vol.mnt
    os.chmod(m, 0o777)
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    f, d = P("f"), P("d")
    write_file(f, b"small")
    os.mkdir(d)
    os.symlink("f", P("l"))
    os.mkfifo(P("fifo"))
    want = {}

    # the three namespaces, short values (in the inode) and long ones (in clusters)
    values = {"user.a": b"hello", "user.empty": b"", "user.eighty": b"8" * 80,
              "user.eightyone": b"9" * 81, "user.block4k": os.urandom(4000),
              "user.max": os.urandom(65536), "security.label": b"system_u:object_r:x:s0",
              "trusted.t": b"root only", "user.\u00e9t\u00e9": b"high bytes in the name"}
    for n, v in values.items():
        chk.eq(errno_of(lambda: os.setxattr(f, n, v)), "OK", "setxattr %s (%d bytes)" % (n, len(v)))
    want[f] = dict(sorted(values.items()))
    chk.eq(xattrs_of(f), want[f], "every attribute reads back")
    chk.eq(getxattr_errno(f, "user.a", 0), ("OK", 5), "size probe")
    chk.eq(getxattr_errno(f, "user.block4k", 100), ("ERANGE", -1), "a buffer too small")
    chk.eq(getxattr_errno(f, "user.none", 10), ("ENODATA", -1), "a missing attribute")

    # the flags, replacing, removing
    chk.eq(errno_of(lambda: os.setxattr(f, "user.a", b"x", os.XATTR_CREATE)), "EEXIST", "XATTR_CREATE on one")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.none", b"x", os.XATTR_REPLACE)), "ENODATA",
           "XATTR_REPLACE on none")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.new", b"n", os.XATTR_CREATE)), "OK", "XATTR_CREATE on none")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.max", b"short now", os.XATTR_REPLACE)), "OK",
           "a long value replaced by a short one")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.a", os.urandom(3000))), "OK", "a short value made long")
    want[f]["user.new"] = b"n"
    want[f]["user.max"] = b"short now"
    want[f]["user.a"] = os.getxattr(f, "user.a")
    chk.eq(errno_of(lambda: os.removexattr(f, "user.empty")), "OK", "removexattr")
    chk.eq(errno_of(lambda: os.removexattr(f, "user.empty")), "ENODATA", "removexattr again")
    del want[f]["user.empty"]
    want[f] = dict(sorted(want[f].items()))
    chk.eq(xattrs_of(f), want[f], "after replacing and removing")

    # what is not served, and the kernel's limits
    chk.eq(errno_of(lambda: os.setxattr(f, "system.posix_acl_access", b"\x02\0\0\0")), NOTSUP,
           "POSIX ACLs (not enforced, so not stored)")
    chk.eq(errno_of(lambda: os.setxattr(f, "os2.x", b"v")), NOTSUP, "a namespace OCFS2 lacks")
    chk.eq(errno_of(lambda: os.setxattr(f, "user." + "n" * 250, b"v")), "OK", "a name of 255 bytes")
    chk.eq(errno_of(lambda: os.setxattr(f, "user." + "n" * 251, b"v")), "ERANGE", "a name of 256 bytes")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.", b"v")), "EINVAL", "an empty name after the prefix")
    chk.eq(errno_of(lambda: os.setxattr(f, "user.big", bytes(65537))), "E2BIG", "a value over 64 KiB")
    want[f]["user." + "n" * 250] = b"v"
    want[f] = dict(sorted(want[f].items()))
    chk.eq(errno_of(lambda: os.setxattr(P("l"), "user.x", b"v", follow_symlinks=False)), "EPERM",
           "user.* on a symlink (the kernel's rule)")
    chk.eq(errno_of(lambda: os.setxattr(P("l"), "trusted.x", b"v", follow_symlinks=False)), "OK",
           "trusted.* on a symlink")
    want[P("l")] = {"trusted.x": b"v"}
    chk.eq(errno_of(lambda: os.setxattr(P("fifo"), "security.s", b"fifo")), "OK", "security.* on a FIFO")
    want[P("fifo")] = {"security.s": b"fifo"}

    # ctime moves, directories have them too
    c0 = os.stat(d).st_ctime_ns
    time.sleep(0.01)
    os.setxattr(d, "user.dir", b"on a directory")
    chk.ok(os.stat(d).st_ctime_ns > c0, "setxattr sets ctime")
    want[d] = {"user.dir": b"on a directory"}
    for i in range(40):  # a directory that grows out of its inode keeps them
        write_file(os.path.join(d, "entry-with-a-long-name-%03d" % i), b"")

    # inline data moved out to clusters: the inode's xattr tail stays
    write_file(P("g"), b"tiny")
    os.setxattr(P("g"), "user.keep", b"kept")
    with open(P("g"), "r+b") as fh:
        fh.seek(0, 2)
        fh.write(os.urandom(20000))
    want[P("g")] = {"user.keep": b"kept"}
    chk.eq(xattrs_of(P("g")), want[P("g")], "xattrs after the data left the inode")
    chk.eq(len(read_file(P("g"))), 20004, "and the data")
    os.link(P("g"), P("g-link"))
    chk.eq(xattrs_of(P("g-link")), want[P("g")], "a hard link sees the same attributes")
    want[P("g-link")] = want[P("g")]

    # more than the inode's tail and a block hold: buckets; all readable
    h = P("full")
    got = fill_xattrs(chk, h, 4096)
    os.removexattr(h, "user.fill000")
    del got["user.fill000"]
    chk.eq(errno_of(lambda: os.setxattr(h, "user.again", b"y" * 20)), "OK", "room again after a removal")
    got["user.again"] = b"y" * 20
    want[h] = dict(sorted(got.items()))

    # who may list what
    listed = as_user(NOBODY, NOBODY, lambda: sorted(os.listxattr(f)))
    chk.eq(listed, sorted(n for n in want[f] if not n.startswith("trusted.")),
           "a user's list leaves out trusted.*")

    # an open-unlinked file keeps its attributes until the last close
    fd = os.open(P("u"), os.O_RDWR | os.O_CREAT, 0o644)
    os.setxattr(fd, "user.orphan", b"still here" * 20)
    os.unlink(P("u"))
    chk.eq(os.getxattr(fd, "user.orphan"), b"still here" * 20, "an unlinked open file's attribute")
    os.close(fd)

    # remount: everything read back
    for p in sorted(want):
        chk.eq(xattrs_of(p, follow=not p.endswith("/l")), want[p], "%s before the remount" % p)
    vol.umount()
    vol.fsck(chk, "after setting xattrs")
    vol.mount("allow_other")
    for p in sorted(want):
        chk.eq(xattrs_of(p, follow=not p.endswith("/l")), want[p], "%s after the remount" % p)

    # their space back on unlink: more values in clusters than one transaction frees
    cs = os.statvfs(m).f_frsize
    free0 = os.statvfs(m).f_bfree
    k = P("many")
    write_file(k, b"")
    for i in range(30):
        os.setxattr(k, "user.v%02d" % i, os.urandom(cs))
    free1 = os.statvfs(m).f_bfree
    chk.ok(free1 <= free0 - 30, "30 values took clusters: %d -> %d" % (free0, free1))
    os.unlink(k)
    for p in (f, h, P("g"), P("g-link")):
        os.unlink(p)
    free2 = wait_free(m, free0)
    chk.ok(free2 >= free0, "unlink gave their clusters back: %d -> %d -> %d" % (free0, free1, free2))
    vol.umount()
    vol.fsck(chk, "after unlinking files with xattrs")

    # nouser_xattr: user.* refused, the others still served
    vol.mount("nouser_xattr")
    chk.eq(errno_of(lambda: os.setxattr(d, "user.y", b"v")), NOTSUP, "user.* under nouser_xattr")
    chk.eq(errno_of(lambda: os.getxattr(d, "user.dir")), NOTSUP, "reading user.* under nouser_xattr")
    chk.eq(sorted(os.listxattr(d)), [], "nothing listed under nouser_xattr")
    chk.eq(errno_of(lambda: os.setxattr(d, "security.z", b"v")), "OK", "security.* under nouser_xattr")
    vol.umount()
    vol.fsck(chk, "at the end")

    # noxattr: nothing served (the kernel stops asking); acl cannot go with it
    vol.mount("noxattr")
    chk.eq(errno_of(lambda: os.getxattr(d, "security.z")), NOTSUP, "noxattr: getxattr")
    chk.eq(errno_of(lambda: os.setxattr(d, "user.y", b"v")), NOTSUP, "noxattr: setxattr")
    chk.eq(errno_of(lambda: os.listxattr(d)), NOTSUP, "noxattr: listxattr")
    vol.umount()
    rc, out = run([env.daemon, "-f", "-o", "acl,noxattr", vol.img, vol.mnt], timeout=30)
    chk.ok(rc != 0 and "exclude each other" in out, "acl,noxattr refused: %d %s" % (rc, out.strip()))

    # ocfs2ctl's default for a small volume, 1K blocks: a smaller block fills sooner
    small = env.volume("xattr-1k")
    small.mount()
    fill_xattrs(chk, os.path.join(small.mnt, "full"), 1024)
    small.umount()
    small.fsck(chk, "1K blocks, a full inode")


# ====================================================================
# acl: POSIX ACLs (the acl mount option)
# ====================================================================

ACL_USER_OBJ, ACL_USER, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_OTHER = 1, 2, 4, 8, 0x10, 0x20
ACL_ACCESS, ACL_DEFAULT = "system.posix_acl_access", "system.posix_acl_default"


def acl_bytes(entries):
    """The system.posix_acl_* value of [(tag, perm, id)] (id -1 where none)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i & 0xffffffff)
                                            for t, p, i in entries)


def acl_entries(value):
    n = (len(value) - 4) // 8
    return [tuple(struct.unpack_from("<HHI", value, 4 + 8 * k)) for k in range(n)]


def case_acl(env, chk):
    """POSIX ACLs with -o acl: the kernel enforces them (named users, the
    mask), setting one sets the mode and an ACL the mode says all of is
    not kept, chmod rewrites the ACL, new files and directories inherit a
    default ACL (and the umask then does not apply; elsewhere it does),
    all kept across a remount; fsck.ocfs2 -fn clean."""
    vol = env.volume("acl", mkfs="mkfs.ocfs2")
    os.chmod(env.tmp, 0o755)
    vol.mount("acl,allow_other")
    m = vol.mnt
    os.chmod(m, 0o777)
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    old_umask = os.umask(0o022)
    U = 0xffffffff
    f = P("f")
    write_file(f, b"guarded", 0o640)
    reader = lambda: errno_of(lambda: read_file(f))  # noqa: E731
    chk.eq(as_user(NOBODY, NOBODY, reader), "EACCES", "mode 0640: another user cannot read")

    # a named user, under a mask
    acl = [(ACL_USER_OBJ, 6, U), (ACL_USER, 4, NOBODY), (ACL_GROUP_OBJ, 4, U), (ACL_MASK, 4, U),
           (ACL_OTHER, 0, U)]
    chk.eq(errno_of(lambda: os.setxattr(f, ACL_ACCESS, acl_bytes(acl))), "OK", "setting an access ACL")
    chk.eq(acl_entries(os.getxattr(f, ACL_ACCESS)), [(t, p, i & U) for t, p, i in acl], "it reads back")
    chk.eq(oct(os.stat(f).st_mode & 0o777), oct(0o640), "the mode shows owner, mask and other")
    chk.ok(ACL_ACCESS in os.listxattr(f), "listed")
    chk.eq(as_user(NOBODY, NOBODY, reader), "OK", "the named user reads")
    chk.eq(as_user(OTHER, OTHER, reader), "EACCES", "someone else still cannot")
    chk.eq(as_user(NOBODY, NOBODY, lambda: errno_of(lambda: os.close(os.open(f, os.O_WRONLY)))),
           "EACCES", "the named user may not write")

    # chmod moves the mask: the named user loses read
    os.chmod(f, 0o600)
    got = dict(((t, i), p) for t, p, i in acl_entries(os.getxattr(f, ACL_ACCESS)))
    chk.eq((got[(ACL_MASK, U)], got[(ACL_USER, NOBODY)], got[(ACL_USER_OBJ, U)]), (0, 4, 6),
           "chmod 0600 sets the mask to ---, the named entry stays")
    chk.eq(as_user(NOBODY, NOBODY, reader), "EACCES", "after chmod 0600 the named user cannot read")
    os.chmod(f, 0o640)
    chk.eq(as_user(NOBODY, NOBODY, reader), "OK", "after chmod 0640 again it can")

    # an ACL the mode says all of is the mode
    g = P("g")
    write_file(g, b"", 0o600)
    os.setxattr(g, ACL_ACCESS, acl_bytes([(ACL_USER_OBJ, 7, U), (ACL_GROUP_OBJ, 5, U), (ACL_OTHER, 1, U)]))
    chk.eq(oct(os.stat(g).st_mode & 0o777), oct(0o751), "a minimal ACL sets the mode")
    chk.eq(errno_of(lambda: os.getxattr(g, ACL_ACCESS)), "ENODATA", "and is not kept")
    chk.ok(ACL_ACCESS not in os.listxattr(g), "nor listed")

    # removing an access ACL leaves the mode
    os.removexattr(f, ACL_ACCESS)
    chk.eq(errno_of(lambda: os.getxattr(f, ACL_ACCESS)), "ENODATA", "removexattr takes the ACL away")
    chk.eq(oct(os.stat(f).st_mode & 0o777), oct(0o640), "and leaves the mode")
    chk.eq(as_user(NOBODY, NOBODY, reader), "EACCES", "the named user is gone with it")
    chk.eq(errno_of(lambda: os.setxattr(f, ACL_DEFAULT, acl_bytes(acl))), "EACCES",
           "a default ACL on a file")

    # a default ACL: inherited, and it replaces the umask
    d = P("d")
    os.mkdir(d, 0o777)
    dacl = [(ACL_USER_OBJ, 7, U), (ACL_USER, 7, NOBODY), (ACL_GROUP_OBJ, 5, U), (ACL_MASK, 7, U),
            (ACL_OTHER, 0, U)]
    os.setxattr(d, ACL_DEFAULT, acl_bytes(dacl))
    write_file(os.path.join(d, "child"), b"inherits", 0o666)
    st = os.stat(os.path.join(d, "child"))
    chk.eq(oct(st.st_mode & 0o777), oct(0o660), "a new file: 0666 cut down by the default ACL, "
           "no umask")
    chk.eq(acl_entries(os.getxattr(os.path.join(d, "child"), ACL_ACCESS)),
           [(ACL_USER_OBJ, 6, U), (ACL_USER, 7, NOBODY), (ACL_GROUP_OBJ, 5, U), (ACL_MASK, 6, U),
            (ACL_OTHER, 0, U)], "its access ACL")
    chk.eq(errno_of(lambda: os.getxattr(os.path.join(d, "child"), ACL_DEFAULT)), "ENODATA",
           "a file inherits no default ACL")
    chk.eq(as_user(NOBODY, NOBODY, lambda: errno_of(lambda: write_file(os.path.join(d, "child"), b"x"))),
           "OK", "the named user writes the inherited file (mask rw-)")
    os.mkdir(os.path.join(d, "sub"), 0o777)
    sub = os.path.join(d, "sub")
    chk.eq(oct(os.stat(sub).st_mode & 0o777), oct(0o770), "a new directory")
    chk.eq(acl_entries(os.getxattr(sub, ACL_DEFAULT)), [(t, p, i & U) for t, p, i in dacl],
           "a new directory inherits the default ACL")
    chk.eq(as_user(NOBODY, NOBODY, lambda: errno_of(lambda: write_file(os.path.join(sub, "n"), b""))),
           "OK", "the named user creates in the inherited directory")
    # elsewhere the umask applies (the kernel leaves it to us under acl)
    write_file(P("plain"), b"", 0o666)
    chk.eq(oct(os.stat(P("plain")).st_mode & 0o777), oct(0o644), "without a default ACL the umask applies")
    os.mkdir(P("plaind"), 0o777)
    chk.eq(oct(os.stat(P("plaind")).st_mode & 0o777), oct(0o755), "for directories too")

    # kept across a remount
    want = {p: {n: os.getxattr(p, n) for n in os.listxattr(p)} for p in (f, g, d, sub, os.path.join(d, "child"))}
    vol.umount()
    vol.fsck(chk, "after setting ACLs")
    vol.mount("acl,allow_other")
    for p, w in want.items():
        chk.eq({n: os.getxattr(p, n) for n in os.listxattr(p)}, w, "%s after the remount" % p)
    chk.eq(as_user(NOBODY, NOBODY, lambda: errno_of(lambda: read_file(os.path.join(d, "child")))),
           "OK", "enforced after the remount")
    vol.umount()
    # without acl they are neither served nor enforced
    vol.mount("allow_other")
    chk.eq(errno_of(lambda: os.getxattr(os.path.join(d, "child"), ACL_ACCESS)), NOTSUP,
           "noacl: ACLs not served")
    chk.eq(oct(os.stat(os.path.join(d, "child")).st_mode & 0o777), oct(0o660), "noacl: the mode as it was")
    vol.umount()
    vol.fsck(chk, "at the end")
    os.umask(old_umask)


def wait_free(mnt, want, timeout=10):
    """Free clusters once they reach want (the kernel forgets unlinked
    inodes a little after the last close), or after timeout."""
    deadline = time.time() + timeout
    while True:
        free = os.statvfs(mnt).f_bfree
        if free >= want or time.time() > deadline:
            return free
        time.sleep(0.1)


# ====================================================================
# perms: a non-root user
# ====================================================================

NOBODY, OTHER = 65534, 65533


def case_perms(env, chk):
    vol = env.volume("perms")
    os.chmod(env.tmp, 0o755)  # mkdtemp's 0700 would stop other users before the mount
    # the default, as a kernel filesystem: every user, modes checked
    vol.mount()
    m = vol.mnt
    os.chmod(m, 0o755)
    chk.eq(nobody_access(m), NOBODY_ACCESS_WANT, "default options: a user, modes checked")
    # noallow_other: only root gets in
    vol.umount()
    vol.mount("noallow_other")
    res = as_user(NOBODY, NOBODY, lambda: [errno_of(lambda: os.stat(m + "/rootfile")),
                                           errno_of(lambda: os.listdir(m))])
    chk.eq(res, ["EACCES", "EACCES"], "noallow_other: a user cannot get in")
    vol.umount()

    vol.mount("allow_other")
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    os.mkdir(P("rootdir"), 0o755)
    write_file(P("rootdir", "inside"), b"x", 0o666)
    os.mkdir(P("open"), 0o777)
    os.mkdir(P("sticky"), 0o1777)
    write_file(P("sticky", "rootf"), b"root in sticky", 0o666)
    write_file(P("secret"), b"secret", 0o600)
    os.mkdir(P("private"), 0o700)
    write_file(P("private", "f"), b"", 0o644)
    os.mkdir(P("sgid"), 0o2777)
    os.chown(P("sgid"), 0, 100)
    os.chmod(P("sgid"), 0o2777)

    def user_ops():
        r = {}
        r["read 0644"] = errno_of(lambda: read_file(P("rootfile")))
        r["write 0644"] = errno_of(lambda: os.close(os.open(P("rootfile"), os.O_WRONLY)))
        r["truncate 0644"] = errno_of(lambda: os.truncate(P("rootfile"), 0))
        r["read 0600"] = errno_of(lambda: read_file(P("secret")))
        r["create in 0755"] = errno_of(lambda: write_file(P("rootdir", "mine"), b""))
        r["mkdir in 0755"] = errno_of(lambda: os.mkdir(P("rootdir", "md")))
        r["unlink in 0755"] = errno_of(lambda: os.unlink(P("rootdir", "inside")))
        r["write 0666 in 0755"] = errno_of(lambda: write_file(P("rootdir", "inside"), b"y"))
        r["lookup in 0700"] = errno_of(lambda: os.stat(P("private", "f")))
        r["readdir 0700"] = errno_of(lambda: os.listdir(P("private")))
        r["create in 0777"] = errno_of(lambda: write_file(P("open", "mine"), b"mine", 0o640))
        st = os.stat(P("open", "mine"))
        r["owner"] = [st.st_uid, st.st_gid]
        r["mkdir in 0777"] = errno_of(lambda: os.mkdir(P("open", "mydir"), 0o755))
        r["chmod own"] = errno_of(lambda: os.chmod(P("open", "mine"), 0o600))
        r["chmod root's"] = errno_of(lambda: os.chmod(P("rootfile"), 0o666))
        r["chown own to root"] = errno_of(lambda: os.chown(P("open", "mine"), 0, -1))
        r["chgrp own to a foreign group"] = errno_of(lambda: os.chown(P("open", "mine"), -1, 0))
        r["utime now root's 0644"] = errno_of(lambda: os.utime(P("rootfile")))
        r["utime set root's"] = errno_of(lambda: os.utime(P("rootfile"), (1, 1)))
        r["utime own"] = errno_of(lambda: os.utime(P("open", "mine"), (1, 1)))
        r["access W 0644"] = os.access(P("rootfile"), os.W_OK)
        r["access R 0644"] = os.access(P("rootfile"), os.R_OK)
        r["unlink root's in sticky"] = errno_of(lambda: os.unlink(P("sticky", "rootf")))
        r["rename root's in sticky"] = errno_of(lambda: os.rename(P("sticky", "rootf"), P("sticky", "r2")))
        r["write root's 0666 in sticky"] = errno_of(lambda: write_file(P("sticky", "rootf"), b"nobody"))
        r["create in sticky"] = errno_of(lambda: write_file(P("sticky", "nob"), b"n", 0o666))
        r["create 2 in sticky"] = errno_of(lambda: write_file(P("sticky", "nob2"), b"n", 0o666))
        r["unlink own in sticky"] = errno_of(lambda: os.unlink(P("sticky", "nob")))
        r["create in sgid"] = errno_of(lambda: write_file(P("sgid", "g"), b""))
        r["mkdir in sgid"] = errno_of(lambda: os.mkdir(P("sgid", "gd")))
        r["sgid file gid"] = os.stat(P("sgid", "g")).st_gid
        gd = os.stat(P("sgid", "gd"))
        r["sgid dir"] = [gd.st_gid, bool(gd.st_mode & stat.S_ISGID)]
        r["symlink in 0777"] = errno_of(lambda: os.symlink("/etc", P("open", "sl")))
        r["link to root's file"] = errno_of(lambda: os.link(P("rootfile"), P("open", "hl")))
        return r

    res = as_user(NOBODY, NOBODY, user_ops)
    want = {
        "read 0644": "OK", "write 0644": "EACCES", "truncate 0644": "EACCES", "read 0600": "EACCES",
        "create in 0755": "EACCES", "mkdir in 0755": "EACCES", "unlink in 0755": "EACCES",
        "write 0666 in 0755": "OK", "lookup in 0700": "EACCES", "readdir 0700": "EACCES",
        "create in 0777": "OK", "owner": [NOBODY, NOBODY], "mkdir in 0777": "OK", "chmod own": "OK",
        "chmod root's": "EPERM", "chown own to root": "EPERM", "chgrp own to a foreign group": "EPERM",
        "utime now root's 0644": "EACCES", "utime set root's": "EPERM", "utime own": "OK",
        "access W 0644": False, "access R 0644": True,
        "unlink root's in sticky": "EPERM", "rename root's in sticky": "EPERM",
        "write root's 0666 in sticky": "OK", "create in sticky": "OK", "create 2 in sticky": "OK",
        "unlink own in sticky": "OK", "create in sgid": "OK", "mkdir in sgid": "OK",
        "sgid file gid": 100, "sgid dir": [100, True], "symlink in 0777": "OK",
        # fs.protected_hardlinks forbids it for files the user cannot write
        "link to root's file": open("/proc/sys/fs/protected_hardlinks").read().strip() == "1" and "EPERM" or "OK",
    }
    for k in want:
        chk.eq(res.get(k), want[k], "as uid %d: %s" % (NOBODY, k))

    chk.eq(read_file(P("sticky", "rootf")), b"nobody", "the 0666 file was written")
    res = as_user(OTHER, OTHER, lambda: {
        "unlink nobody's in sticky": errno_of(lambda: os.unlink(P("sticky", "nob2"))),
        "write nobody's 0640": errno_of(lambda: write_file(P("open", "mine"), b"")),
        "unlink nobody's in 0777": errno_of(lambda: os.unlink(P("open", "mine"))),
    })
    chk.eq(res, {"unlink nobody's in sticky": "EPERM", "write nobody's 0640": "EACCES",
                 "unlink nobody's in 0777": "OK"}, "as uid %d" % OTHER)
    os.unlink(P("sticky", "nob2"))  # root may
    chk.eq(sorted(os.listdir(P("sticky"))), ["rootf"], "sticky dir at the end")
    # a group member may write a 0664 group file; supplementary groups count
    write_file(P("open", "grpfile"), b"g", 0o664)
    os.chown(P("open", "grpfile"), 0, 4242)

    def grp():
        return errno_of(lambda: write_file(P("open", "grpfile"), b"group"))

    chk.eq(as_user(NOBODY, 4242, grp), "OK", "group write permission")
    chk.eq(as_user(NOBODY, NOBODY, grp), "EACCES", "no group write permission for others")
    check_setid_clearing(chk, P)
    remount_and_compare(chk, vol, opts="allow_other")
    vol.umount()
    vol.fsck(chk, "at the end")


def check_setid_clearing(chk, P):
    """Set-user-ID and set-group-ID bits go as Linux drops them: a write or
    truncate by a caller without CAP_FSETID clears S_ISUID, and S_ISGID when
    the group may execute; chown clears them so for anyone, root included
    (an S_ISGID without group execute - a locking mark - stays)."""
    def setid_file(name, mode, owner):
        write_file(P("open", name), b"#!/bin/sh\n", 0o600)
        os.chown(P("open", name), owner, owner)
        os.chmod(P("open", name), mode)
        return P("open", name)

    def mode(path):
        return oct(stat.S_IMODE(os.stat(path).st_mode))

    w = setid_file("suid-w", 0o6775, NOBODY)
    t = setid_file("suid-t", 0o6775, NOBODY)
    g = setid_file("sgid-nox", 0o2764, NOBODY)

    def user():
        fd = os.open(w, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"echo hi\n")
        os.close(fd)
        os.truncate(t, 3)
        fd = os.open(g, os.O_WRONLY)
        os.write(fd, b"x")
        os.close(fd)
    as_user(NOBODY, NOBODY, user)
    chk.eq([mode(w), mode(t), mode(g)], ["0o775", "0o775", "0o2764"],
           "a user's write and truncate clear S_ISUID, and S_ISGID with group execute")
    r = setid_file("suid-root", 0o6755, 0)
    with open(r, "ab") as f:
        f.write(b"# root\n")
    chk.eq(mode(r), "0o6755", "root (CAP_FSETID) writes without clearing the bits")
    c = setid_file("suid-chown", 0o6755, 0)
    cg = setid_file("sgid-chown", 0o2745, 0)
    os.chown(c, NOBODY, NOBODY)
    os.chown(cg, NOBODY, -1)
    chk.eq([mode(c), mode(cg)], ["0o755", "0o2745"],
           "chown clears S_ISUID and S_ISGID with group execute, even by root")
    same = setid_file("suid-chown-same", 0o6775, NOBODY)
    os.chown(same, -1, -1)
    chk.eq(mode(same), "0o775", "chown(-1, -1) clears them too")

    # the other ways a user changes a file's data, and a write after the
    # kernel has seen the file without privileges (it then asks nothing)
    f = setid_file("suid-falloc", 0o6775, NOBODY)
    cfr = setid_file("suid-cfr", 0o6775, NOBODY)
    again = setid_file("suid-again", 0o775, NOBODY)
    src = setid_file("cfr-src", 0o644, NOBODY)

    def user2():
        fd = os.open(f, os.O_WRONLY)
        os.posix_fallocate(fd, 0, 65536)
        os.close(fd)
        fi, fo = os.open(src, os.O_RDONLY), os.open(cfr, os.O_WRONLY)
        n = os.copy_file_range(fi, fo, 4, 0, 0)
        os.close(fi)
        os.close(fo)
        fd = os.open(again, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"1")
        os.close(fd)
        return n
    chk.eq(as_user(NOBODY, NOBODY, user2), 4, "copy_file_range by a user")
    chk.eq([mode(f), mode(cfr)], ["0o775", "0o775"],
           "fallocate and copy_file_range by a user clear S_ISUID and S_ISGID")
    os.chmod(again, 0o4775)

    def user3():
        fd = os.open(again, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"2")
        os.close(fd)
        return mode(again)
    chk.eq(as_user(NOBODY, NOBODY, user3), "0o775",
           "a write clears S_ISUID set after earlier writes, and stat(2) sees it at once")

    # security.capability goes on any write (a v2 capability: CAP_NET_RAW)
    cap = struct.pack("<5I", 0x02000000, 1 << 13, 0, 0, 0)
    capf = setid_file("cap", 0o777, NOBODY)
    os.setxattr(capf, "security.capability", cap)

    def user4():
        with open(capf, "ab") as fh:
            fh.write(b"u")
        return os.listxattr(capf)
    chk.eq(as_user(NOBODY, NOBODY, user4), [], "a user's write drops security.capability")
    os.setxattr(capf, "security.capability", cap)
    with open(capf, "ab") as fh:
        fh.write(b"r")
        fh.flush()
        fh.write(b"s")
    chk.eq(os.listxattr(capf), [], "root's write drops security.capability")


# ====================================================================
# ctl: ocfs2ctl mount/umount through the D-Bus API on the control socket
# ====================================================================

def close_quietly(f):
    try:
        f.close()
    except OSError:
        pass


def alive(pid):
    """pid exists and is not a zombie (a dying process still holds its sockets)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def daemons_with_control(path):
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                envs = f.read().split(b"\0")
        except OSError:
            continue
        if ("OCFS2D_CONTROL=" + path).encode() in envs:
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if b"--server" in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


def check_status(chk, ctl_out, vols):
    """ocfs2ctl status, human and --json, against what ocfs2ctl info reads
    of each mounted image and what statvfs(2) says through the mount."""
    for v in vols:
        write_file(os.path.join(v.mnt, "status-probe"), os.urandom(300000))
    rc, out = ctl_out("status", "--json")
    try:
        got = {x["mountpoint"]: x for x in json.loads(out)}
    except ValueError:
        chk.ok(False, "status --json is not JSON: %r" % out)
        return
    chk.eq(rc, 0, "status --json exits 0")
    chk.eq(sorted(got), sorted(v.mnt for v in vols), "status --json lists every volume")
    for v in vols:
        s = got.get(v.mnt)
        if not s:
            continue
        rc, info = ctl_out("info", "--json", v.img)
        info = json.loads(info) if rc == 0 else {}
        vfs = os.statvfs(v.mnt)
        chk.eq((s["device"], s["state"], s["mode"], s["stack"], s["cluster"], s["node"], s["slot"]),
               (v.img, "mounted", "rw", "local", "", 0, 0), "status: %s's place" % v.name)
        chk.eq((s["uuid"], s["max_slots"], s["block_size"], s["cluster_size"]),
               (info.get("uuid"), info.get("max_slots"), info.get("block_size"), info.get("cluster_size")),
               "status: %s's geometry as info reads it" % v.name)
        chk.eq(s["journal"]["size"], info.get("journal_size"), "status: %s's journal size" % v.name)
        chk.ok(s["journal"]["state"] in ("clean", "pending"), "status: journal state %r" % s["journal"])
        chk.eq(s["space"]["total_bytes"], vfs.f_blocks * vfs.f_frsize, "status: %s's size as statfs" % v.name)
        chk.eq(s["space"]["total_bytes"], info.get("total_clusters", 0) * info.get("cluster_size", 0),
               "status: %s's size as info reads it" % v.name)
        chk.ok(0 < s["space"]["free_bytes"] < s["space"]["total_bytes"] and
               s["space"]["used_bytes"] == s["space"]["total_bytes"] - s["space"]["free_bytes"],
               "status: %s's free space %r" % (v.name, s["space"]))
        chk.ok(abs(s["space"]["free_bytes"] - vfs.f_bfree * vfs.f_frsize) < (64 << 20),
               "status: %s's free space near statfs's (%d, %d)" % (v.name, s["space"]["free_bytes"],
                                                                  vfs.f_bfree * vfs.f_frsize))
        chk.ok(0 < s["inodes"]["free"] < s["inodes"]["total"], "status: %s's inodes %r" % (v.name, s["inodes"]))
        chk.eq(s["readonly_reason"], "", "status: %s turned read-only by nothing" % v.name)
    chk.ok("commit=1" in got.get(vols[-1].mnt, {}).get("options", ""), "status: the options in effect")
    rc, out = ctl_out("status")
    chk.eq(rc, 0, "status exits 0")
    for v in vols:
        at = out.find("%s on %s" % (v.img, v.mnt))
        block = out[at:].split("\n\n")[0]
        chk.ok(at >= 0 and all(w in block for w in ("State: mounted (read-write)", "Journal: 4.0 MiB",
                                                    "Space: ", "Inodes: ", "slot 0 of 1")),
               "status shows %s in a block of its own:\n%s" % (v.name, out))


def case_ctl(env, chk):
    import signal as sig
    control = os.path.join(env.tmp, "control", "sock")
    ctl_log = os.path.join(env.tmp, "ctl.log")
    cenv = dict(os.environ, OCFS2D_CONTROL=control, OCFS2D=env.daemon)

    def ctl(*args):
        with open(ctl_log, "a") as lf:
            lf.write("=== ocfs2ctl %s\n" % " ".join(args))
            lf.flush()
            p = subprocess.run([env.ctl] + list(args), stdin=subprocess.DEVNULL, stdout=lf,
                               stderr=subprocess.STDOUT, env=cenv, timeout=120)
        return p.returncode

    def ctl_out(*args):
        p = subprocess.run([env.ctl] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                           env=cenv, timeout=60)
        return p.returncode, p.stdout.decode() + p.stderr.decode()

    def kill_server():
        for pid in daemons_with_control(control):
            os.kill(pid, sig.SIGTERM)

    env.cleanups.append(kill_server)
    # a daemon ocfs2ctl starts logs to ocfs2d.log next to the control socket
    server_log = os.path.join(os.path.dirname(control), "ocfs2d.log")

    def read_log(path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    env.extra_logs = [lambda: "---- ocfs2ctl log ----\n" + read_log(ctl_log)[-20000:],
                      lambda: "---- server ocfs2d.log ----\n" + read_log(server_log)[-20000:]]
    v1, v2 = env.volume("ctl1"), env.volume("ctl2")

    chk.eq(ctl_out("mounts")[0], 0, "mounts without a daemon")
    rc, out = ctl_out("status")
    chk.ok(rc == 0 and "not running" in out, "status without a daemon says so: %r" % out)
    rc, out = ctl_out("status", "--json")
    chk.ok(rc == 0 and out.strip() == "[]", "status --json without a daemon: an empty list: %r" % out)
    chk.eq(ctl("mount", v1.img, v1.mnt), 0, "ocfs2ctl mount starts a daemon")
    chk.ok(v1.mounted(), "mounted through the control socket")
    v1.conn = v1.mounted() and mount_entry(v1.mnt)[1]
    pids = daemons_with_control(control)
    chk.eq(len(pids), 1, "one daemon started")
    os.chmod(env.tmp, 0o755)  # mkdtemp's 0700 would stop other users before the mount
    if v1.mounted():
        os.chmod(v1.mnt, 0o755)
        chk.eq(nobody_access(v1.mnt), NOBODY_ACCESS_WANT, "ocfs2ctl mount's default: a user, modes checked")
    chk.eq(ctl("mount", "-o", "allow_other,commit=1", v2.img, v2.mnt), 0, "a second volume on the same daemon")
    v2.conn = v2.mounted() and mount_entry(v2.mnt)[1]
    chk.eq(daemons_with_control(control), pids, "still one daemon")
    rc, out = ctl_out("mounts")
    chk.ok(rc == 0 and v1.mnt in out and v2.mnt in out, "mounts lists both: %s" % out)
    rc, out = ctl_out("mounts", "--json")
    try:
        lst = json.loads(out)
        chk.eq(sorted(x["mountpoint"] for x in lst), sorted([v1.mnt, v2.mnt]), "mounts --json")
    except ValueError:
        chk.ok(False, "mounts --json is not JSON: %s" % out)
    check_status(chk, ctl_out, [v1, v2])
    other = os.path.join(env.tmp, "other.mnt")
    os.mkdir(other)
    chk.eq(ctl("mount", v1.img, other), 1, "mounting a volume twice fails")
    chk.ok(not mount_entry(other), "nothing mounted by the failed mount")
    chk.eq(ctl("mount", "-o", "bogus", v1.img, other), 1, "an unknown option fails")
    chk.eq(ctl("mount", os.path.join(env.tmp, "missing.img"), other), 1, "a missing image fails")
    chk.eq(ctl("mount", v2.img, v1.mnt), 1, "a busy mount point fails")

    for v in (v1, v2):
        os.mkdir(os.path.join(v.mnt, "dir"))
        for i in range(50):
            write_file(os.path.join(v.mnt, "dir", "f%d" % i), os.urandom(i * 1000))
    # reflinks on a mounted volume: ocfs2ctl asks the daemon, which makes
    # them and refreshes the kernel's view (a cached negative entry too)
    d1 = os.path.join(v1.mnt, "dir")
    chk.err(lambda: os.stat(os.path.join(d1, "snap")), errno.ENOENT, "before the reflink")
    chk.eq(ctl("reflink", v1.img, "/dir/f40", "/dir/snap"), 0, "reflink on a mounted volume")
    chk.eq(read_file(os.path.join(d1, "snap")), read_file(os.path.join(d1, "f40")),
           "the reflink, seen through the mount at once")
    chk.eq(ctl("reflink", v1.img, "/dir/f41", "/"), 0, "reflink into a directory")
    chk.eq(read_file(os.path.join(v1.mnt, "f41")), read_file(os.path.join(d1, "f41")),
           "the reflink made into a directory")
    rc, out = ctl_out("reflink", v1.img, "/dir/f40", "/dir/snap")
    chk.ok(rc == 1 and "ocfs2ctl: reflink: " in out and "exists" in out,
           "reflink over an existing name: %r" % out)
    rc, out = ctl_out("reflink", v1.img, "/dir", "/d2")
    chk.ok(rc == 1 and "is a directory" in out, "reflink of a directory: %r" % out)
    old40 = read_file(os.path.join(d1, "f40"))
    with open(os.path.join(d1, "snap"), "r+b") as f:
        f.seek(1000)
        f.write(b"changed")
    chk.eq(read_file(os.path.join(d1, "f40")), old40, "writing the reflink leaves its source")
    os.unlink(os.path.join(v1.mnt, "f41"))
    snap1 = snapshot(v1.mnt)
    # a busy volume: plain umount fails, -f detaches and closes it cleanly
    busy = open(os.path.join(v2.mnt, "dir", "f3"), "rb")
    chk.eq(ctl("umount", v2.mnt), 1, "umount of a busy volume fails")
    chk.ok(v2.mounted(), "still mounted after the failed umount")
    chk.eq(ctl("umount", "-f", v2.mnt), 0, "umount -f of a busy volume")
    chk.ok(not v2.mounted(), "umount -f detached it")
    chk.err(lambda: busy.read(), (errno.ENOTCONN, errno.EIO, errno.ECONNABORTED), "the open file after umount -f")
    close_quietly(busy)  # its flush fails on the aborted connection
    v2.conn = None
    v2.fsck(chk, "after umount -f")
    chk.eq(daemons_with_control(control), pids, "the daemon stays while a volume is mounted")
    chk.eq(ctl("umount", v1.mnt), 0, "umount")
    v1.conn = None
    v1.fsck(chk, "after ocfs2ctl umount")
    deadline = time.time() + 20
    while daemons_with_control(control) and time.time() < deadline:
        time.sleep(0.1)
    chk.eq(daemons_with_control(control), [], "the daemon exits after its last volume")
    chk.ok(not os.path.exists(control), "the control socket is removed")
    chk.eq(ctl("umount", v1.mnt), 1, "umount of what is not mounted fails")

    # a daemon exiting once idle never leaves between a client's connect
    # and its call: clients beside mount/umount cycles are always answered
    import threading
    cycling, failures = True, []

    def ask_repeatedly():
        while cycling:
            rc, out = ctl_out("mounts")
            if rc != 0:
                failures.append(out)
    askers = [threading.Thread(target=ask_repeatedly) for _ in range(2)]
    for t in askers:
        t.start()
    try:
        for i in range(12):
            rc, out = ctl_out("mount", v1.img, v1.mnt)
            if rc != 0:
                failures.append(out)
                break
            rc, out = ctl_out("umount", v1.mnt)
            if rc != 0:
                failures.append(out)
                break
    finally:
        cycling = False
        for t in askers:
            t.join()
    chk.eq(failures, [], "ocfs2ctl beside a daemon exiting once idle, 12 times")
    deadline = time.time() + 20
    while daemons_with_control(control) and time.time() < deadline:
        time.sleep(0.1)

    # mount again: contents persist
    chk.eq(ctl("mount", v1.img, v1.mnt), 0, "mount again")
    v1.conn = mount_entry(v1.mnt)[1]
    compare_snapshots(chk, snap1, snapshot(v1.mnt), "ctl1 after remount")
    # SIGKILL the server: a new one replaces its socket, detaches its dead
    # mount and replays the journal
    write_file(os.path.join(v1.mnt, "dir", "synced"), b"synced before SIGKILL")
    fd = os.open(os.path.join(v1.mnt, "dir", "synced"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    killed = daemons_with_control(control)
    for pid in killed:
        os.kill(pid, sig.SIGKILL)
    # at once, while its last threads may still hold the socket
    rc, out = ctl_out("mounts")
    chk.ok(rc == 0, "ocfs2ctl mounts right after the server was killed: %r" % out)
    deadline = time.time() + 20
    # until its last thread is gone and the socket refuses connections
    while (any(alive(pid) for pid in killed) or connectable(control)) and time.time() < deadline:
        time.sleep(0.05)
    chk.ok(os.path.exists(control), "a killed server leaves its socket")
    chk.eq(ctl("mount", v1.img, v1.mnt), 0, "mount after the server was killed")
    v1.conn = mount_entry(v1.mnt)[1]
    chk.eq(read_file(os.path.join(v1.mnt, "dir", "synced")), b"synced before SIGKILL",
           "an fsynced file after the server was killed")
    # SIGTERM to the server: it unmounts everything cleanly (forced) and exits
    busy = open(os.path.join(v1.mnt, "dir", "f7"), "rb")
    for pid in daemons_with_control(control):
        os.kill(pid, sig.SIGTERM)
    deadline = time.time() + 30
    while daemons_with_control(control) and time.time() < deadline:
        time.sleep(0.1)
    chk.eq(daemons_with_control(control), [], "SIGTERM stops the server")
    close_quietly(busy)  # its flush fails on the aborted connection
    chk.ok(not v1.mounted(), "SIGTERM unmounted the volume")
    v1.conn = None
    v1.fsck(chk, "after SIGTERM to the server")
    log_text = read_log(ctl_log) + read_log(server_log)
    chk.ok("(clean)" in log_text and "WARNING" not in log_text and not sanitizer_report(log_text),
           "the server's log: clean closes, no warnings or sanitizer reports")

    # a foreground daemon: ocfs2ctl umount unmounts it directly
    v2.mount()
    write_file(os.path.join(v2.mnt, "fg"), b"foreground")
    chk.eq(ctl("umount", v2.mnt), 0, "ocfs2ctl umount of a foreground daemon's volume")
    v2.wait_exit(30)
    v2.fsck(chk, "after the direct umount")
    # SIGTERM with a busy file: forced, clean
    v2.mount()
    busy = open(os.path.join(v2.mnt, "fg"), "rb")
    v2.sigterm()
    close_quietly(busy)  # its flush fails on the aborted connection
    v2.fsck(chk, "after SIGTERM with an open file")
    v2.mount()
    chk.eq(read_file(os.path.join(v2.mnt, "fg")), b"foreground", "content after SIGTERM")
    # read-only mount
    v2.umount()
    v2.mount("ro")
    chk.err(lambda: write_file(os.path.join(v2.mnt, "ro"), b""), errno.EROFS, "writing to a ro mount")
    chk.eq(read_file(os.path.join(v2.mnt, "fg")), b"foreground", "reading a ro mount")
    v2.umount()
    v2.fsck(chk, "at the end")


# ====================================================================
# stress: concurrent random operations, verified after a remount
# ====================================================================

def stress_worker(root, seed, seconds, out):
    rnd = random.Random(seed)
    files = {}   # relpath -> bytearray
    links = {}   # relpath -> symlink target
    dirs = {""}
    deadline = time.time() + seconds
    ops = 0
    total_limit = 24 << 20

    def P(rel):
        return os.path.join(root, rel)

    def pick_dir():
        return rnd.choice(sorted(dirs))

    def new_name(d):
        return os.path.join(d, "%s%d" % (rnd.choice("fgh"), rnd.randrange(100000)))

    fds = {}
    while time.time() < deadline:
        ops += 1
        op = rnd.choices(["create", "write", "truncate", "rename", "unlink", "mkdir", "rmdir", "fsync",
                          "verify", "append", "fallocate", "symlink", "unlink-symlink", "exchange"],
                         [10, 25, 8, 8, 6, 3, 2, 3, 5, 6, 2, 2, 1, 2])[0]
        total = sum(len(v) for v in files.values())
        if op == "symlink":
            rel = new_name(pick_dir())
            if rel in files or rel in dirs or rel in links:
                continue
            target = "t-" + "x" * rnd.choice([1, 50, 100, 1500])
            os.symlink(target, P(rel))
            links[rel] = target
            continue
        if op == "unlink-symlink" and links:
            rel = rnd.choice(sorted(links))
            os.unlink(P(rel))
            del links[rel]
            continue
        if op == "create" or not files:
            rel = new_name(pick_dir())
            if rel in files or rel in dirs or rel in links:
                continue
            data = bytearray(rnd.randbytes(rnd.choice([0, 10, 700, 4096, 20000, 300000])))
            write_file(P(rel), data)
            files[rel] = data
            continue
        rel = rnd.choice(sorted(files))
        if op == "write" and total < total_limit:
            data = files[rel]
            off = rnd.randrange(0, len(data) + 200000) if rnd.random() < 0.3 else rnd.randrange(0, len(data) + 1)
            chunk = rnd.randbytes(rnd.choice([1, 100, 4096, 5000, 65536, 200000]))
            fd = os.open(P(rel), os.O_WRONLY)
            pwrite_all(fd, chunk, off)
            if rnd.random() < 0.1:
                os.fsync(fd)
            os.close(fd)
            if off > len(data):
                data += bytes(off - len(data))
            data[off:off + len(chunk)] = chunk
        elif op == "append" and total < total_limit:
            chunk = rnd.randbytes(rnd.randrange(1, 9000))
            fd = os.open(P(rel), os.O_WRONLY | os.O_APPEND)
            os.write(fd, chunk)
            os.close(fd)
            files[rel] += chunk
        elif op == "truncate":
            data = files[rel]
            n = rnd.randrange(0, len(data) * 2 + 5000) if total < total_limit else rnd.randrange(0, len(data) + 1)
            os.truncate(P(rel), n)
            if n < len(data):
                del data[n:]
            else:
                data += bytes(n - len(data))
        elif op == "fallocate" and total < total_limit:
            data = files[rel]
            fd = os.open(P(rel), os.O_WRONLY)
            off, n = rnd.randrange(0, len(data) + 100000), rnd.randrange(1, 300000)
            # KEEP_SIZE only inside the file: fsck.ocfs2 1.8.7 reports
            # unwritten extents past i_size (as the kernel makes them too)
            # as INODE_SPARSE_SIZE
            keep = rnd.random() < 0.5 and off + n <= len(data)
            fallocate(fd, FALLOC_FL_KEEP_SIZE if keep else 0, off, n)
            os.close(fd)
            if not keep and off + n > len(data):
                data += bytes(off + n - len(data))
        elif op == "exchange" and len(files) > 1:
            other = rnd.choice(sorted(files))
            if other == rel:
                continue
            renameat2(P(rel), P(other), RENAME_EXCHANGE)
            files[rel], files[other] = files[other], files[rel]
        elif op == "rename":
            if rnd.random() < 0.3 and len(files) > 1:
                dst = rnd.choice(sorted(files))  # over an existing file
            else:
                dst = new_name(pick_dir())
            if dst == rel or dst in dirs or dst in links:
                continue
            os.rename(P(rel), P(dst))
            files[dst] = files.pop(rel)
        elif op == "unlink":
            os.unlink(P(rel))
            del files[rel]
        elif op == "mkdir":
            d = new_name(pick_dir())
            if d in files or d in dirs or d in links:
                continue
            os.mkdir(P(d))
            dirs.add(d)
        elif op == "rmdir":
            d = pick_dir()
            if d == "" or any(os.path.dirname(x) == d for x in list(files) + list(dirs) + list(links)):
                continue
            os.rmdir(P(d))
            dirs.discard(d)
        elif op == "fsync":
            fd = os.open(P(rel), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        elif op == "verify":
            got = read_file(P(rel))
            if got != files[rel]:
                raise Failure("%s: content differs while running (%d bytes, want %d)" % (
                    rel, len(got), len(files[rel])))
    for fd in fds.values():
        os.close(fd)
    with open(out, "w") as f:
        json.dump({"ops": ops, "dirs": sorted(dirs), "links": links,
                   "files": {k: [len(v), hashlib.sha256(v).hexdigest()] for k, v in files.items()}}, f)


def case_stress(env, chk):
    vol = env.volume("stress", size="512M")
    vol.mount()
    seconds = float(os.environ.get("FUSE_STRESS_SECONDS", "40"))
    nproc = 4
    pids, outs = [], []
    for i in range(nproc):
        root = os.path.join(vol.mnt, "w%d" % i)
        os.mkdir(root)
        out = os.path.join(env.tmp, "stress-%d.json" % i)
        outs.append(out)
        pids.append(env.fork(stress_worker, root, 1000 + i, seconds, out))
    # the main process reads the tree meanwhile (readdir of changing dirs, statfs)
    deadline = time.time() + seconds
    last_drop = time.time()
    while time.time() < deadline:
        for dirpath, dirnames, filenames in os.walk(vol.mnt):
            pass
        os.statvfs(vol.mnt)
        if time.time() - last_drop > 5:
            drop_inode_caches()  # forgets while the workers run
            last_drop = time.time()
        time.sleep(0.2)
    for i, pid in enumerate(pids):
        chk.eq(env.wait(pid, seconds + 120), 0, "stress worker %d exit status" % i)
    models = []
    for out in outs:
        try:
            with open(out) as f:
                models.append(json.load(f))
        except (OSError, ValueError):
            models.append(None)
    log("stress: %s operations" % [m and m["ops"] for m in models])
    vol.umount()
    vol.fsck(chk, "after the stress run")
    vol.mount()
    verify_stress(chk, vol.mnt, models, "after remount")
    vol.umount()
    vol.fsck(chk, "at the end")


def verify_stress(chk, mnt, models, what):
    chk.eq(sorted(os.listdir(mnt)), sorted(["lost+found"] + ["w%d" % i for i in range(len(models))]),
           "top level %s" % what)
    for i, model in enumerate(models):
        if model is None:
            continue
        root = os.path.join(mnt, "w%d" % i)
        got_files, got_dirs, got_links = {}, set(), {}
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            got_dirs.add("" if rel == "." else rel)
            for n in filenames:
                p = os.path.join(dirpath, n)
                if os.path.islink(p):
                    got_links[os.path.relpath(p, root)] = os.readlink(p)
                else:
                    got_files[os.path.relpath(p, root)] = [os.path.getsize(p), file_sha(p)]
        chk.eq(sorted(got_dirs), model["dirs"], "w%d: directories %s" % (i, what))
        chk.eq(got_links, model["links"], "w%d: symlinks %s" % (i, what))
        chk.eq(sorted(got_files), sorted(model["files"]), "w%d: file names %s" % (i, what))
        bad = [k for k in model["files"] if k in got_files and got_files[k] != model["files"][k]]
        chk.eq(bad, [], "w%d: files whose content differs %s" % (i, what))


# ====================================================================
# crash: SIGKILL the daemon mid-workload; fsynced files survive
# ====================================================================

def crash_content(name, size):
    seed = int(hashlib.sha256(name.encode()).hexdigest()[:16], 16)
    return random.Random(seed).randbytes(size)


def crash_writer(root, seed, journal):
    """Write files; fsync some and record them (name, size, sha) in journal
    once fsync returned.  Runs until the mount dies."""
    rnd = random.Random(seed)
    jf = open(journal, "a")
    n = 0
    while True:
        n += 1
        d = os.path.join(root, "d%d" % (n // 50))
        try:
            if n % 50 == 0 or not os.path.isdir(d):
                os.makedirs(d, exist_ok=True)
            name = os.path.join(d, "s%d-%d" % (seed, n))
            size = rnd.choice([100, 3000, 4096, 20000, 65536, 300000, 1 << 20] if n % 10 == 0
                              else [100, 3000, 4096, 20000, 65536])
            data = crash_content(name, size)
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            # written in pieces, out of order sometimes
            pieces = list(range(0, size, 65536))
            if rnd.random() < 0.3:
                rnd.shuffle(pieces)
            for off in pieces:
                pwrite_all(fd, data[off:off + 65536], off)
            if rnd.random() < 0.4:
                os.fsync(fd)
                os.close(fd)
                jf.write(json.dumps([os.path.relpath(name, root), size,
                                     hashlib.sha256(data).hexdigest()]) + "\n")
                jf.flush()
            else:
                os.close(fd)
                # churn on files nobody relies on: overwrite, truncate, rename, unlink
                r = rnd.random()
                if r < 0.3:
                    os.truncate(name, rnd.randrange(0, size + 1))
                elif r < 0.5:
                    os.rename(name, name + ".tmp")
                elif r < 0.8:
                    os.unlink(name)
        except OSError as e:
            if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO, errno.ENOENT):
                return
            if e.errno == errno.ENOSPC:
                print("crash writer %d: volume full after %d files" % (seed, n), flush=True)
                return
            raise


def case_crash(env, chk):
    vol = env.volume("crash", size="1G")
    root = vol.mnt
    journals = []
    delays = [float(x) for x in os.environ.get("FUSE_CRASH_DELAYS", "1.5,4,0.7,7").split(",")]
    for rnd_i, delay in enumerate(delays):
        vol.mount("commit=%d" % (1 if rnd_i % 2 else 5))
        if rnd_i == 0:
            os.mkdir(os.path.join(root, "base"))
            write_file(os.path.join(root, "base", "before"), b"before any crash")
            fd = os.open(os.path.join(root, "base", "before"), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        sub = "r%d" % rnd_i
        os.mkdir(os.path.join(root, sub))
        writers = []
        for w in range(2):
            j = os.path.join(env.tmp, "crash-%d-%d.journal" % (rnd_i, w))
            journals.append((sub, j))
            writers.append(env.fork(crash_writer, os.path.join(root, sub), rnd_i * 10 + w, j))
        time.sleep(delay)
        log("crash round %d: SIGKILL after %.1fs" % (rnd_i, delay))
        vol.kill(detach=False)
        # the writers die with the daemon: a writer left running would carry
        # on in the directory under a detached mount point
        for pid in writers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in writers:
            st = env.wait(pid, 60)
            chk.ok(st is not None, "writer stopped after the kill")
        if rnd_i % 2 == 0:  # else the next ocfs2d must detach the dead mount
            lazy_umount(vol.mnt)
        # the journal is dirty: fsck -n must not be clean-compared now; mount replays it
        vol.mount()
        if rnd_i % 2:
            chk.ok("detached a stale FUSE mount" in vol.log_text().rsplit("=== mount", 1)[-1],
                   "round %d: the new ocfs2d detached the dead mount" % rnd_i)
        total = 0
        for s, j in journals:
            with open(j) as f:
                for line in f:
                    rel, size, sha = json.loads(line)
                    total += 1
                    p = os.path.join(root, s, rel)
                    try:
                        got = read_file(p)
                    except OSError as e:
                        chk.ok(False, "round %d: fsynced %s/%s: %s" % (rnd_i, s, rel, e))
                        continue
                    chk.ok(len(got) == size and hashlib.sha256(got).hexdigest() == sha,
                           "round %d: fsynced %s/%s: %d bytes, want %d (content %s)" % (
                               rnd_i, s, rel, len(got), size,
                               "differs" if len(got) == size else "-"))
        chk.eq(read_file(os.path.join(root, "base", "before")), b"before any crash", "file before the crashes")
        # whatever else is there must be readable
        for dirpath, dirnames, filenames in os.walk(root):
            for n in filenames:
                read_file(os.path.join(dirpath, n))
        log("crash round %d: %d fsynced files intact" % (rnd_i, total))
        vol.umount()
        vol.fsck(chk, "after crash round %d" % rnd_i)


def case_cluster(env, chk):
    """A clustered volume needs its cluster: with no corosync on this machine
    the mount is refused, naming the way out (nocluster).  With nocluster it
    is mounted only while no other node uses it: a slot in use in the slot
    map, or another slot's dirty journal, is refused with a message naming
    the slot; once fsck.ocfs2 has recovered it, it mounts.  (Mounts through
    a real cluster: tests/cluster/test_cluster_mount.py.)"""
    vol = env.volume("cluster", mkfs="pcmk")

    def refused(what, *words, opts="nocluster"):
        try:
            vol.mount(opts)
        except Failure:
            tail = vol.log_text().rsplit("=== mount", 1)[-1]
            chk.ok(vol.proc.returncode == 1, "%s: ocfs2d exits 1 (got %s)" % (what, vol.proc.returncode))
            chk.ok(all(w in tail for w in words), "%s: the message names %s: %s" % (what, words, tail))
            chk.ok(not vol.mounted(), "%s: nothing mounted" % what)
            return
        chk.ok(False, "%s: the mount was not refused" % what)
        vol.umount()

    if subprocess.run(["sh", "-c", "corosync-cmapctl totem.cluster_name"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        refused("no corosync", "fusetest", "corosync", "nocluster", opts=None)
    # another node (slot 1) writes, fsyncs and dies: its journal stays dirty
    vol.mount("slot=1,nocluster")
    chk.ok("WITHOUT the cluster" in vol.log_text(), "nocluster is logged loudly")
    data = os.urandom(300000)
    write_file(os.path.join(vol.mnt, "from-slot-1"), data)
    fd = os.open(os.path.join(vol.mnt, "from-slot-1"), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    vol.kill()
    refused("a dirty journal in slot 1", "slot 1", "needs recovery")
    # recovery by the real fsck (no cluster stack here: -F); 1.8.7 replays,
    # then exits 8 trying to start the cluster stack: run it again
    for _ in range(2):
        p = subprocess.run([env.fsck, "-F", "-fy", vol.img], input=b"y\n", stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env=tool_env())
        if p.returncode != 8:
            break
    chk.ok(p.returncode in (0, 1), "fsck.ocfs2 -F -fy replays slot 1 (exit %d): %s" %
           (p.returncode, p.stdout.decode(errors="replace")[-2000:]))
    vol.mount("nocluster")
    chk.eq(read_file(os.path.join(vol.mnt, "from-slot-1")), data, "slot 1's fsynced file after recovery")
    vol.umount()
    vol.fsck(chk, "after recovery")

    # the slot map says node 7 holds slot 1 (extended slot map: 8 bytes a slot)
    rc, out = run([env.debugfs, "-R", "stat //slot_map", vol.img])
    m = re.search(r"^\s*0\s+0\s+\d+\s+(\d+)\s", out, re.M)
    chk.ok(m is not None, "the slot map's block from debugfs: %s" % out[-500:])
    if m:
        off = int(m.group(1)) * 4096 + 8  # the volume has 4K blocks
        with open(vol.img, "r+b") as f:
            f.seek(off)
            saved = f.read(8)
            f.seek(off)
            f.write(struct.pack("<B3xI", 1, 7))
        refused("slot 1 in use by node 7", "slot 1", "node 7")
        with open(vol.img, "r+b") as f:
            f.seek(off)
            f.write(saved)
        vol.mount("nocluster")
        chk.ok(os.path.exists(os.path.join(vol.mnt, "from-slot-1")), "mounts once the slot is free")
        vol.umount()
        vol.fsck(chk, "at the end")

def case_rocrash(env, chk):
    """A read-only mount after a crash shows every file fsynced before it: the
    journal a SIGKILL left dirty is replayed first, as the kernel does.  On a
    read-only device that cannot be done: the mount is refused, naming the
    journal; ro,norecovery mounts anyway and says that what it shows is older."""
    vol = env.volume("rocrash")
    vol.mount()
    want = {}
    for i in range(3):
        path = os.path.join(vol.mnt, "f%d" % i)
        want["f%d" % i] = os.urandom(5000 + 3000 * i)
        write_file(path, want["f%d" % i])
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    vol.kill()

    p = subprocess.run(["losetup", "-r", "-f", "--show", vol.img], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        log("no read-only loop device (%s): that part is left out" % p.stderr.decode().strip())
    else:
        loop, img = p.stdout.decode().strip(), vol.img
        vol.img = loop
        try:
            try:
                vol.mount("ro")
                chk.ok(False, "a read-only mount on a read-only device with a dirty journal "
                       "was not refused")
                vol.umount(judge=False)
            except Failure:
                tail = vol.log_text().rsplit("=== mount", 1)[-1]
                chk.ok("slot 0" in tail and "needs replay" in tail and "norecovery" in tail,
                       "the refusal names the journal and norecovery: %s" % tail[-600:])
                chk.ok(not vol.mounted(), "nothing mounted after the refusal")
            vol.mount("ro,norecovery")
            tail = vol.log_text().rsplit("=== mount", 1)[-1]
            chk.ok("not replayed (norecovery)" in tail, "norecovery says the view is older: %s" % tail[-600:])
            vol.umount(judge=False)
        finally:
            vol.img = img
            subprocess.run(["losetup", "-d", loop])

    vol.mount("ro")
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("replayed the journal of slot 0 before mounting read-only" in tail,
           "the read-only mount replayed the journal: %s" % tail[-600:])
    for name, data in sorted(want.items()):
        chk.eq(read_file(os.path.join(vol.mnt, name)), data, "%s, fsynced before the kill, read-only" % name)
    vol.umount()
    vol.fsck(chk, "after the read-only mount")


def fill_workload(root, seed, ops):
    """Random creates, xattr sets and removals, directories, truncates,
    unlinks and appends, until well past full: {(op, errno name): count}."""
    rnd = random.Random(seed)
    errs, files = {}, []
    for i in range(ops):
        op = rnd.choice(["create", "xattr", "xattr", "xattr", "rmxattr", "mkdir", "truncate",
                         "unlink", "append"])
        d = os.path.join(root, "d%d" % rnd.randrange(20))
        try:
            if op == "create":
                os.makedirs(d, exist_ok=True)
                p = os.path.join(d, "f%d" % i)
                with open(p, "wb") as f:
                    f.write(os.urandom(rnd.choice([0, 100, 3000, 9000, 70000])))
                files.append(p)
            elif op == "xattr" and files:
                os.setxattr(rnd.choice(files), "user.k%d" % rnd.randrange(40),
                            os.urandom(rnd.choice([20, 81, 200, 700, 2000, 3900, 20000, 60000])))
            elif op == "rmxattr" and files:
                os.removexattr(rnd.choice(files), "user.k%d" % rnd.randrange(40))
            elif op == "mkdir":
                os.makedirs(os.path.join(d, "sub%d" % i), exist_ok=True)
            elif op == "truncate" and files:
                os.truncate(rnd.choice(files), rnd.randrange(1 << 20))
            elif op == "unlink" and files and rnd.random() < 0.3:
                os.unlink(files.pop(rnd.randrange(len(files))))
            elif op == "append" and files:
                with open(rnd.choice(files), "ab") as f:
                    f.write(os.urandom(rnd.choice([10, 5000, 50000])))
        except (FileNotFoundError, FileExistsError):
            pass
        except OSError as e:
            if e.errno == errno.ENODATA:
                continue
            key = (op, errno.errorcode.get(e.errno, str(e.errno)))
            errs[key] = errs.get(key, 0) + 1
            if e.errno == errno.EROFS:
                break
    return errs


def case_full(env, chk):
    """A full volume never goes read-only: a workload of creates, large
    extended attributes (values in clusters of their own), directories,
    truncates and appends runs far past full on small volumes; every failure
    is a clean ENOSPC for that call alone, deletes still work, and after a
    plain unmount (no replay) fsck.ocfs2 -fn is clean."""
    for bs in (512, 4096):
        vol = env.volume("full-b%d" % bs, size="40M", mkfs="mkfs",
                         mkfs_args=("-b", str(bs), "-C", "4096", "-J", "size=4M"))
        vol.mount()
        errs = fill_workload(vol.mnt, 3 + bs, 9000)
        log("b%d: %s" % (bs, sorted(errs.items())))
        chk.ok(errs and all(e == "ENOSPC" for _, e in errs), "b%d: only ENOSPC: %s" % (bs, errs))
        tail = vol.log_text().rsplit("=== mount", 1)[-1]
        chk.ok("read-only" not in tail, "b%d: the volume never turned read-only: %s" % (bs, tail[-500:]))
        victim = None
        for dirpath, _, names in os.walk(vol.mnt):
            if names:
                victim = os.path.join(dirpath, names[0])
                break
        if chk.ok(victim is not None, "b%d: a file to delete" % bs):
            os.unlink(victim)
            chk.ok(not os.path.exists(victim), "b%d: a delete on the full volume works" % bs)
        vol.umount()
        vol.fsck(chk, "b%d after filling" % bs)


def fill_mix(root, seed, seconds, cluster):
    """Random writes, extended attributes with values in clusters of their
    own, directories, empty files and symlinks until the volume is full:
    every call answers success or ENOSPC (EROFS ends it).  Then appends
    of a cluster, and of 512 bytes, until even those fail.  Returns
    ({(op, errno name): count}, the files written, [(file, xattr set)])."""
    rnd = random.Random(seed)
    errs, files, dirs, xattrs = {}, [], [root], []
    deadline = time.time() + seconds
    streak = 0
    i = 0
    while time.time() < deadline and streak < 300:
        i += 1
        op = rnd.choice(["write", "write", "append", "xattr", "xattr", "mkdir", "create",
                         "symlink"])
        try:
            if op == "write":
                p = os.path.join(rnd.choice(dirs), "f%d" % i)
                files.append(p)
                with open(p, "wb") as f:
                    f.write(os.urandom(rnd.choice([100, 3000, cluster + 1, 3 * cluster, 70000,
                                                   200000])))
            elif op == "append" and files:
                with open(rnd.choice(files), "ab") as f:
                    f.write(os.urandom(rnd.choice([10, 5000, cluster, 50000])))
            elif op == "xattr" and files:
                p, name = rnd.choice(files), "user.k%d" % rnd.randrange(30)
                os.setxattr(p, name, os.urandom(rnd.choice([81, 700, 3900, 20000, 60000])))
                xattrs.append((p, name))
            elif op == "mkdir":
                p = os.path.join(rnd.choice(dirs), "d%d" % i)
                os.mkdir(p)
                dirs.append(p)
            elif op == "create":
                p = os.path.join(rnd.choice(dirs), "e%d" % i)
                open(p, "wb").close()
                files.append(p)
            elif op == "symlink":
                os.symlink("t" * rnd.choice([10, 300, 2000]), os.path.join(rnd.choice(dirs), "s%d" % i))
            streak = 0
        except (FileNotFoundError, FileExistsError):
            pass
        except OSError as e:
            key = (op, errno.errorcode.get(e.errno, str(e.errno)))
            errs[key] = errs.get(key, 0) + 1
            if e.errno == errno.EROFS:
                return errs, files, xattrs
            streak += 1
    # the last clusters: whole clusters, then a little, appended
    files = [p for p in files if os.path.exists(p)]
    for size in (cluster, 512):
        for p in files[-40:]:
            while True:
                try:
                    with open(p, "ab") as f:
                        f.write(os.urandom(size))
                except OSError as e:
                    key = ("fill%d" % size, errno.errorcode.get(e.errno, str(e.errno)))
                    errs[key] = errs.get(key, 0) + 1
                    if e.errno == errno.EROFS:
                        return errs, files, xattrs
                    break
    return errs, files, xattrs


def suballoc_clusters(env, img):
    """Clusters slot 0's inode and extent allocators and its orphan
    directory hold, as debugfs.ocfs2 says."""
    n = 0
    for f in ("//inode_alloc:0000", "//extent_alloc:0000", "//orphan_dir:0000"):
        out = subprocess.run([env.debugfs, "-R", "stat " + f, img], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True).stdout
        m = re.search(r"Clusters: (\d+)", out)
        if not m:
            raise Failure("debugfs.ocfs2 stat //%s: no cluster count:\n%s" % (f, out))
        n += int(m.group(1))
    return n


def fill_one(env, chk, bs, cs, size, seed, journal):
    """case_fill on one volume."""
    tag = "b%d-C%d" % (bs, cs)
    vol = env.volume("fill-" + tag, size=size, mkfs="mkfs",
                     mkfs_args=("-b", str(bs), "-C", str(cs)) + journal)
    held0 = suballoc_clusters(env, vol.img)
    vol.mount()
    try:
        fill_mounted(env, chk, vol, tag, cs, seed, held0)
    except Failure as e:
        chk.ok(False, "%s: %s" % (tag, e))
        if vol.proc and vol.proc.poll() is None:
            vol.kill()


def fill_mounted(env, chk, vol, tag, cs, seed, held0):
    fresh = os.statvfs(vol.mnt)
    t0 = time.time()
    # all of it below one directory, which goes too: no directory is
    # left with the blocks it grew by
    top = os.path.join(vol.mnt, "top")
    os.mkdir(top)
    errs, files, xattrs = fill_mix(top, seed, 25, cs)
    full = os.statvfs(vol.mnt)
    log("%s: %.1fs, %d of %d clusters free when full: %s" % (
        tag, time.time() - t0, full.f_bfree, full.f_blocks, sorted(errs.items())))
    chk.ok(errs and all(e == "ENOSPC" for _, e in errs), "%s: only ENOSPC: %s" % (tag, errs))
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("read-only" not in tail, "%s: the volume never turned read-only: %s" % (tag, tail[-500:]))
    # a volume full of data, not stopped early by a reserve held back
    chk.ok(full.f_bfree * cs <= max(16 * cs, full.f_blocks * cs // 100),
           "%s: full to the last clusters: %d of %d free" % (tag, full.f_bfree, full.f_blocks))
    written = [p for p in files if os.path.exists(p) and os.path.getsize(p) > 0]
    if chk.ok(written, "%s: a file with data" % tag):
        p = written[0]
        try:
            fd = os.open(p, os.O_RDWR)
            try:
                pwrite_all(fd, b"x" * min(100, os.path.getsize(p)), 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            chk.eq(read_file(p)[:3], b"xxx", "%s: a write into allocated space on the full volume" % tag)
        except OSError as e:
            chk.ok(False, "%s: a write into allocated space on the full volume: %s" % (tag, e))
    # deletions on the full volume: holes punched inside extents,
    # truncates, attributes removed; then everything
    big = [p for p in written if os.path.getsize(p) >= 3 * cs]
    for p in big[:10]:
        try:
            fd = os.open(p, os.O_RDWR)
            try:
                fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, cs, cs)
            finally:
                os.close(fd)
        except OSError as e:
            chk.ok(False, "%s: punching a hole on the full volume: %s" % (tag, e))
    for p in big[10:20]:
        try:
            os.truncate(p, os.path.getsize(p) // 2)
        except OSError as e:
            chk.ok(False, "%s: a truncate on the full volume: %s" % (tag, e))
    removed = 0
    for p, name in xattrs[:20]:
        try:
            os.removexattr(p, name)
            removed += 1
        except OSError as e:
            if e.errno not in (errno.ENODATA, errno.ENOENT):
                chk.ok(False, "%s: removing an attribute on the full volume: %s" % (tag, e))
    log("%s: on the full volume, %d holes punched, %d truncates, %d attributes removed" % (
        tag, len(big[:10]), len(big[10:20]), removed))
    try:
        shutil.rmtree(top)
    except OSError as e:
        chk.ok(False, "%s: deleting everything on the full volume: %s" % (tag, e))
    tail = vol.log_text().rsplit("=== mount", 1)[-1]
    chk.ok("read-only" not in tail, "%s: not read-only after the deletes: %s" % (tag, tail[-500:]))
    # the freed space is there for new files and names at once (the
    # allocators' grown groups aside, at most a fifth of these volumes)
    os.mkdir(top)
    p = os.path.join(top, "again")
    want = fresh.f_bfree * cs * 7 // 10
    try:
        with open(p, "wb") as f:
            for _ in range(want >> 20):
                f.write(bytes(1 << 20))
        for i in range(200):
            os.mkdir(os.path.join(top, "d%d" % i))
    except OSError as e:
        chk.ok(False, "%s: %d MiB and 200 directories after emptying the volume: %s" % (
            tag, want >> 20, e))
    shutil.rmtree(top)
    vol.umount()
    vol.fsck(chk, "%s after filling and emptying" % tag)
    # empty allocator groups went back (an empty group mkfs.ocfs2 made
    # too, at the first mount, before "fresh" was counted): every cluster
    # is free again
    grown = suballoc_clusters(env, vol.img) - held0
    vol.mount()
    again = os.statvfs(vol.mnt)
    log("%s: %d clusters free again, allocators %+d clusters" % (tag, again.f_bfree, grown))
    chk.ok(grown <= 0, "%s: no allocator keeps a group it grew by (%+d clusters)" % (tag, grown))
    chk.eq(again.f_bfree, fresh.f_bfree, "%s: every cluster is free again" % tag)
    vol.umount()


def case_fill(env, chk):
    """Volumes filled to their last cluster never go read-only: a random
    mix of writes, large extended attributes, directories, files and
    symlinks until nothing more fits, on several block and cluster sizes
    (2K blocks and 8K clusters is the issue's volume, where the extent
    allocator needs a new group from a bitmap in >100 pieces).  Every
    failure is a clean ENOSPC, a write into a file's allocated range still
    works, the volume is nearly full, deleting everything gives all the
    space back, and fsck.ocfs2 -fn is clean after a plain unmount."""
    # 1M clusters: mkfs.ocfs2's smallest journal for them is its default
    for bs, cs, size, seed, journal in ((512, 4096, "40M", 1, ("-J", "size=4M")),
                                        (4096, 4096, "48M", 2, ("-J", "size=4M")),
                                        (2048, 8192, "48M", 3, ("-J", "size=4M")),
                                        (4096, 1 << 20, "200M", 4, ())):
        fill_one(env, chk, bs, cs, size, seed, journal)


def case_once(env, chk):
    """One volume, one mount on a machine, however it is reached: an image
    mounted, then a loop device over it (and the reverse), is refused with
    the first mount point named; after the first is unmounted, it mounts."""
    vol = env.volume("once")
    p = subprocess.run(["losetup", "-f", "--show", vol.img], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        log("SKIP: no loop device: %s" % p.stderr.decode().strip())
        return
    loop, img = p.stdout.decode().strip(), vol.img
    other = os.path.join(env.tmp, "once-other.mnt")
    os.mkdir(other)
    try:
        for first, second in ((img, loop), (loop, img)):
            vol.img = first
            vol.mount()
            d = subprocess.run([env.daemon, "-f", second, other], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            out = d.stdout.decode(errors="replace")
            chk.ok(d.returncode != 0, "%s mounted while %s is: %s" % (second, first, out[-500:]))
            chk.ok("already mounted on this machine, on %s" % vol.mnt in out,
                   "the refusal names the first mount point: %s" % out[-500:])
            chk.ok(mount_entry(other) is None, "nothing mounted on the second mount point")
            vol.umount()
        vol.img = loop
        vol.mount()
        chk.ok(vol.mounted(), "the loop device mounts once the image is unmounted")
        vol.umount()
    finally:
        vol.img = img
        subprocess.run(["losetup", "-d", loop])
    vol.fsck(chk, "after the mounts")


# ---- fsync and fdatasync: what they cost ----

def private_server(env):
    """A control socket of the case's own, its daemon stopped at cleanup: the
    socket's path and ctl(*args) -> (exit status, stdout and stderr) of
    ocfs2ctl on it."""
    control = os.path.join(env.tmp, "control", "sock")
    cenv = dict(os.environ, OCFS2D_CONTROL=control, OCFS2D=env.daemon)

    def ctl(*args):
        p = subprocess.run([env.ctl] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                           env=cenv, timeout=120)
        return p.returncode, p.stdout.decode() + p.stderr.decode()

    def kill_server():
        for pid in daemons_with_control(control):
            os.kill(pid, signal.SIGTERM)

    env.cleanups.append(kill_server)
    return control, ctl


def ctl_stats(ctl, mnt):
    """A mounted volume's Statistics, through ocfs2ctl stats --json."""
    rc, out = ctl("stats", "--json", mnt)
    if rc != 0:
        raise Failure("ocfs2ctl stats: %s" % out)
    return json.loads(out)


def stats_delta(before, after):
    """What each counter of two ctl_stats() readings grew by."""
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], int)}


def case_fsync(env, chk):
    """fsync and fdatasync do only what they must (issue 23), as the
    daemon's Statistics count it: fdatasync after a write inside a file
    flushes the device once and commits nothing; after an extending write
    it commits once; fsync commits the file's times; threads fsync'ing at
    once share commits, whether the daemon serves on several threads or on
    its default single polling thread (fsyncs then run in its sync pool)."""
    import threading
    control, ctl = private_server(env)
    server_log = os.path.join(os.path.dirname(control), "ocfs2d.log")
    env.extra_logs = [lambda: "---- server ocfs2d.log ----\n" + (
        open(server_log, errors="replace").read()[-20000:] if os.path.exists(server_log) else "")]

    def stats():
        return ctl_stats(ctl, vol.mnt)

    delta = stats_delta
    vol = env.volume("fsync")
    # no timed commit inside the measurements; requests served on 8 threads
    rc, out = ctl("mount", "-o", "commit=600,poll=0,threads=8", vol.img, vol.mnt)
    if not chk.eq(rc, 0, "ocfs2ctl mount: %s" % out):
        return
    path = os.path.join(vol.mnt, "f")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        body = bytes(range(256)) * 256
        pwrite_all(fd, body, 0)
        os.fsync(fd)

        # a write inside the file: its data and times change, nothing else
        s0 = stats()
        pwrite_all(fd, b"d" * 4096, 8192)
        os.fdatasync(fd)
        d = delta(s0, stats())
        log("fdatasync after a write inside the file: %r" % d)
        chk.eq(d.get("journal_commits"), 0, "fdatasync of data written in place commits nothing: %r" % d)
        chk.eq(d.get("device_flushes"), 1, "... and flushes the device once: %r" % d)
        chk.eq((d.get("fsyncs"), d.get("fsync_commits")), (1, 0), "... counted as an fsync without a commit: %r" % d)

        # nothing written since: nothing to do
        s0 = stats()
        os.fdatasync(fd)
        d = delta(s0, stats())
        chk.eq((d.get("journal_commits"), d.get("device_flushes")), (0, 0),
               "fdatasync with nothing new since the last flush costs nothing: %r" % d)

        # plain fsync after a write inside: the times must become durable
        s0 = stats()
        pwrite_all(fd, b"t" * 100, 100)
        os.fsync(fd)
        d = delta(s0, stats())
        log("fsync after a write inside the file: %r" % d)
        chk.eq(d.get("journal_commits"), 1, "fsync after a write inside the file commits its times: %r" % d)

        # an extending write: the size and the clusters must be committed
        s0 = stats()
        pwrite_all(fd, b"e" * 4096, len(body))
        os.fdatasync(fd)
        d = delta(s0, stats())
        log("fdatasync after an extending write: %r" % d)
        chk.eq(d.get("journal_commits"), 1, "fdatasync after an extending write commits once: %r" % d)
        chk.eq(d.get("device_flushes"), 2, "... with the commit's two flushes and no other: %r" % d)
    finally:
        os.close(fd)

    def concurrent(how, tag):
        """N threads, each appending to a file of its own and fsync'ing each time."""
        nthreads, rounds = 8, 25
        errors = []
        start = threading.Barrier(nthreads)

        def worker(i):
            try:
                wfd = os.open(os.path.join(vol.mnt, "%s%d" % (tag, i)),
                              os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    start.wait()
                    for r in range(rounds):
                        os.write(wfd, bytes([i + 1]) * 4096)
                        os.fsync(wfd)
                finally:
                    os.close(wfd)
            except Exception as e:  # reported below
                errors.append("thread %d: %r" % (i, e))

        s0 = stats()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        d = delta(s0, stats())
        log("%s: %d threads x %d appends and fsyncs: %r" % (how, nthreads, rounds, d))
        chk.ok(not errors, "%s: the fsync'ing threads: %s" % (how, errors))
        fsyncs = nthreads * rounds
        chk.eq(d.get("fsyncs"), fsyncs, "%s: every fsync counted: %r" % (how, d))
        # one at a time, each fsync would commit (its append changed the size)
        # and flush twice; 8 at once share: 55-90 commits and 110-220 flushes
        # here, depending on how busy the machine is (more sharing when it is)
        chk.ok(0 < d.get("journal_commits", 0) < fsyncs * 3 // 4,
               "%s: concurrent fsyncs share commits: %r commits for %d fsyncs"
               % (how, d.get("journal_commits"), fsyncs))
        chk.ok(d.get("device_flushes", 0) < 2 * fsyncs,
               "%s: ... and flushes, fewer than two per fsync: %r for %d fsyncs"
               % (how, d.get("device_flushes"), fsyncs))
        for i in range(nthreads):
            with open(os.path.join(vol.mnt, "%s%d" % (tag, i)), "rb") as f:
                chk.ok(f.read() == bytes([i + 1]) * 4096 * rounds, "%s: %s%d holds every append" % (how, tag, i))

    concurrent("served on 8 threads", "t")
    rc, out = ctl("umount", vol.mnt)
    if not chk.eq(rc, 0, "ocfs2ctl umount: %s" % out):
        return
    vol.fsck(chk, "after the fsyncs on 8 threads")

    # the default mount: one polling thread serves, fsyncs run on threads of
    # their own (the sync pool) and reply from there
    rc, out = ctl("mount", "-o", "commit=600", vol.img, vol.mnt)
    if not chk.eq(rc, 0, "ocfs2ctl mount (default threads): %s" % out):
        return
    concurrent("default mount", "d")
    rc, out = ctl("umount", vol.mnt)
    chk.eq(rc, 0, "ocfs2ctl umount: %s" % out)
    vol.fsck(chk, "after the fsyncs")


def case_writeback(env, chk):
    """-o writeback_cache (issue 23): the kernel keeps written pages and
    hands them over in batches.  Many small writes reach the daemon as a
    few requests at fdatasync, which still commits nothing for data written
    in place (the kernel's times come as a times-only setattr) and flushes
    once; a full volume's ENOSPC shows at fsync or close, never lost;
    pages closed without fsync survive the unmount, and a forced unmount
    takes what an open file still held; fsck.ocfs2 is clean after."""
    control, ctl = private_server(env)
    vol = env.volume("wb", size="96M")

    def mount(opts="writeback_cache,commit=600"):
        rc, out = ctl("mount", "-o", opts, vol.img, vol.mnt)
        if rc != 0:
            raise Failure("ocfs2ctl mount -o %s: %s" % (opts, out))

    def umount(*flags):
        rc, out = ctl("umount", *(list(flags) + [vol.mnt]))
        if rc != 0:
            raise Failure("ocfs2ctl umount %s: %s" % (" ".join(flags), out))

    mount()
    P = lambda name: os.path.join(vol.mnt, name)
    model = bytearray(bytes(range(256)) * 256)
    fd = os.open(P("f"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        pwrite_all(fd, bytes(model), 0)
        os.fsync(fd)
        rng = random.Random(23)
        s0 = ctl_stats(ctl, vol.mnt)
        for i in range(200):
            off = rng.randrange(0, 8192 - 16)
            piece = bytes([rng.randrange(256)]) * 16
            pwrite_all(fd, piece, off)
            model[off:off + 16] = piece
        os.fdatasync(fd)
        d = stats_delta(s0, ctl_stats(ctl, vol.mnt))
        log("200 small writes and an fdatasync: %r" % d)
        chk.ok(1 <= d.get("requests_write", 0) <= 2,
               "200 small writes in two pages reach the daemon as one or two writes: %r" % d)
        chk.eq(d.get("journal_commits"), 0, "... and their fdatasync commits nothing: %r" % d)
        chk.eq(d.get("device_flushes"), 1, "... and flushes the device once: %r" % d)
    finally:
        os.close(fd)
    chk.eq(read_file(P("f")), bytes(model), "the file reads as written")

    # a reflink through the daemon shares what the source's open file still
    # holds in the kernel
    r = os.open(P("r"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        rdata = bytes(rng.randrange(256) for _ in range(3 * 4096))
        pwrite_all(r, rdata, 0)
        rc, out = ctl("reflink", vol.img, "/r", "/r2")
        chk.eq(rc, 0, "ocfs2ctl reflink on the mounted volume: %s" % out)
        chk.eq(read_file(P("r2")), rdata, "the reflink holds the source's unsynced writes")
    finally:
        os.close(r)

    # a file bigger than the free space: the error shows, at the latest at close
    free = os.statvfs(vol.mnt).f_bavail * os.statvfs(vol.mnt).f_frsize
    errs, written = [], 0
    f = os.open(P("big"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        chunk = b"B" * (1 << 20)
        while written < free + (16 << 20):
            written += os.write(f, chunk)
    except OSError as e:
        errs.append(("write", e.errno))
    try:
        os.fsync(f)
    except OSError as e:
        errs.append(("fsync", e.errno))
    try:
        os.close(f)
    except OSError as e:
        errs.append(("close", e.errno))
    log("writing %d MiB past %d MiB free: %r" % (written >> 20, free >> 20, errs))
    chk.ok(errs and all(e == errno.ENOSPC for _, e in errs),
           "a full volume says ENOSPC at write, fsync or close: %r" % errs)
    os.unlink(P("big"))

    # closed without fsync, then unmounted: the kernel hands the pages over
    g = bytes(rng.randrange(256) for _ in range(5000)) * 3
    write_file(P("g"), g)
    # an open file's pages, and a forced unmount
    h = os.open(P("h"), os.O_WRONLY | os.O_CREAT, 0o644)
    hdata = b"held by the kernel " * 1000
    os.write(h, hdata)
    umount("-f")
    try:
        os.close(h)
    except OSError:
        pass
    mount("commit=600")
    chk.eq(read_file(P("g")), g, "a file closed without fsync survives the unmount")
    chk.eq(read_file(P("h")), hdata, "a forced unmount takes what an open file still held")
    chk.eq(read_file(P("f")), bytes(model), "the small writes survive the unmount")
    umount()
    dest = os.path.join(env.tmp, "wb-rdump")
    os.mkdir(dest)
    rc, out, copy = vol.rdump("/g", dest)
    chk.ok(rc == 0 and read_file(copy) == g, "debugfs.ocfs2 rdump reads g as written: %s" % out[-300:])
    vol.fsck(chk, "after the write-back cache's writes")


# ---- I/O faults under a real mount ----

def fault_content(name, size):
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


FAULT_FILES = {"small": 700, "big": 160000, "mid": 20000, "gone": 3000, "last": 9000}


def fault_workload(root, out_path, fired_path):
    """The fixed workload of case_fault, one syscall an op.  Each op is
    written to out_path as it starts and again when it ends (so a hang shows
    which op): [index, name, writing, fired before, fired after, errno].
    An op whose prerequisite failed is skipped (errno None)."""
    d = os.path.join(root, "d")
    fds, status = {}, {}
    out = open(out_path, "w", buffering=1)

    def op(name, writing, fn, needs=()):
        before = os.path.exists(fired_path)
        if any(status.get(n) != 0 for n in needs):
            status[name] = None
            out.write(json.dumps([len(status), name, writing, before, before, None]) + "\n")
            return
        out.write(json.dumps(["start", name]) + "\n")
        try:
            fn()
            e = 0
        except OSError as ex:
            e = ex.errno
        status[name] = e
        out.write(json.dumps([len(status), name, writing, before, os.path.exists(fired_path), e]) + "\n")

    def create(f):
        fds[f] = os.open(os.path.join(d, f), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(f, chunk=65536):
        data = fault_content(f, FAULT_FILES[f])
        for off in range(0, len(data), chunk):
            pwrite_all(fds[f], data[off:off + chunk], off)

    def close(f):
        os.close(fds.pop(f))

    def one_file(f, fsync):
        op("create " + f, True, lambda: create(f), ["mkdir d"])
        op("write " + f, True, lambda: write(f, 40000), ["create " + f])
        if fsync:
            op("fsync " + f, True, lambda: os.fsync(fds[f]), ["write " + f])
        op("close " + f, False, lambda: close(f), ["create " + f])

    def fsync_dir(path):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    op("mkdir d", True, lambda: os.mkdir(d))
    one_file("small", True)
    one_file("big", True)
    one_file("mid", False)
    op("rename mid", True, lambda: os.rename(os.path.join(d, "mid"), os.path.join(d, "mid2")), ["write mid"])
    op("truncate mid2", True, lambda: os.truncate(os.path.join(d, "mid2"), 5000), ["rename mid"])
    one_file("gone", False)
    op("unlink gone", True, lambda: os.unlink(os.path.join(d, "gone")), ["create gone"])
    op("read big", False, lambda: read_file(os.path.join(d, "big")), ["write big"])
    op("listdir d", False, lambda: os.listdir(d), ["mkdir d"])
    op("sync", True, lambda: fsync_dir(root))
    one_file("last", True)
    op("mkdir e", True, lambda: os.mkdir(os.path.join(root, "e")))
    out.close()


def read_counts(path):
    with open(path) as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


def fault_plan(total, every, max_rounds):
    """N = 1..every, then a stride to total keeping to max_rounds rounds."""
    if total <= max_rounds:
        return list(range(1, total + 1))
    ns = list(range(1, min(every, total) + 1))
    rest = max_rounds - len(ns)
    if rest > 0 and total > every:
        stride = max(1, -(-(total - every) // rest))
        ns += list(range(every + stride, total + 1, stride))
        if ns[-1] != total:
            ns.append(total)
    return ns


def log_plan(what, ns, total):
    if len(ns) < total:
        log("%s: N = %s (%d of %d)" % (what, ",".join(map(str, ns)), len(ns), total))
    else:
        log("%s: every N = 1..%d" % (what, total))


def case_fault(env, chk):
    """A flaky disk under a real mount, for every N: the faultshim
    (LD_PRELOAD, see faultshim.c) fails the Nth read, write or flush of the
    image with EIO (or stores half of the Nth write first).  Each round
    mounts a fresh volume with the fault planned and runs a fixed workload;
    users see EIO or EROFS only (never a hang, never ENOTCONN: the daemon
    must live); after a failed write or flush the volume is read-only
    (fscore aborts the journal: o2_fs_abort), so every later writing call
    gets EROFS; the daemon exits (1 if it had to leave the journal dirty);
    a fault-free mount replays the journal, fsynced files are intact and
    fsck.ocfs2 -fn finds the volume clean.

    Every N of each kind is covered up to FUSE_FAULT_EVERY (default 40),
    then a stride that keeps each kind to FUSE_FAULT_ROUNDS rounds (default
    48); torn (short) writes take a stride through all the writes,
    FUSE_FAULT_SHORT_ROUNDS rounds (default 16); then one sticky fault of
    each kind from the middle on.  A round costs two mounts and an fsck
    (the fsck runs while the next round does: about a second a round on a
    busy 2-core machine; the plan is printed)."""
    every = int(os.environ.get("FUSE_FAULT_EVERY", "40"))
    max_rounds = int(os.environ.get("FUSE_FAULT_ROUNDS", "48"))
    short_rounds = int(os.environ.get("FUSE_FAULT_SHORT_ROUNDS", "16"))

    def rounds_for(totals):
        rounds = []
        for kind, flags in (("write", ""), ("flush", ""), ("read", ""), ("write", ":short")):
            if flags:  # torn writes: a stride through the writes
                stride = max(1, -(-totals[kind] // max(1, short_rounds)))
                ns = list(range(1, totals[kind] + 1, stride))
            else:
                ns = fault_plan(totals[kind], every, max_rounds)
            log_plan("%s%s faults" % (kind, flags), ns, totals[kind])
            rounds += ["%s:%d%s" % (kind, n, flags) for n in ns]
        # and a disk that stays broken, once per kind
        return rounds + ["%s:%d:sticky" % (k, max(1, totals[k] // 2)) for k in ("write", "flush", "read")]

    fault_rounds(env, chk, ("read", "write", "flush"), rounds_for)


def case_enomem(env, chk):
    """The daemon's fscore allocations fail, for every N: the faultshim sets
    fscore's allocation plan (fscore/mem.h) in ocfs2d before main, so the
    Nth allocation from process start returns NULL - during the mount, a
    FUSE request, a timed commit or the unmount.  Users see ENOMEM or EROFS
    only, the daemon lives, frees everything (ASan) and exits with a status
    its log explains; a fault-free mount replays, fsynced files are intact
    and fsck.ocfs2 -fn finds the volume clean.  (GLib's and libfuse's own
    allocations abort on failure, by their design; these are fscore's.)

    Every N up to FUSE_ENOMEM_EVERY (default 30), then a stride keeping to
    FUSE_ENOMEM_ROUNDS rounds (default 60), then one sticky run from the
    middle on."""
    every = int(os.environ.get("FUSE_ENOMEM_EVERY", "30"))
    max_rounds = int(os.environ.get("FUSE_ENOMEM_ROUNDS", "60"))

    def rounds_for(totals):
        ns = fault_plan(totals["alloc"], every, max_rounds)
        log_plan("allocation faults", ns, totals["alloc"])
        return ["alloc:%d" % n for n in ns] + ["alloc:%d:sticky" % max(1, totals["alloc"] // 2)]

    fault_rounds(env, chk, ("alloc",), rounds_for)


def fault_rounds(env, chk, kinds, rounds_for):
    """The driver of case_fault and case_enomem: a count run with the shim
    and no fault, then one round per fault rounds_for(totals) names."""
    shim = os.environ.get("FUSE_FAULT_SHIM")
    if not shim or not os.path.exists(shim):
        raise Failure("FUSE_FAULT_SHIM names no faultshim module (%r)" % shim)
    only = os.environ.get("FUSE_FAULT_ONLY")  # e.g. "write:12" to rerun one round
    preload = preload_env(env.daemon, shim)
    opts = "commit=60"  # no timed commits: the I/O sequence follows the workload
    base = env.volume("fault-base", size="64M")
    pristine = os.path.join(env.tmp, "pristine.img")
    run(["cp", "--sparse=always", base.img, pristine], check=True)
    counts_path = os.path.join(env.tmp, "fault.counts")
    fired_path = os.path.join(env.tmp, "fault.fired")
    ops_path = os.path.join(env.tmp, "fault.ops")
    wanted = {f: fault_content(f, n) for f, n in FAULT_FILES.items()}
    wanted["mid2"] = fault_content("mid", FAULT_FILES["mid"])[:5000]

    def shim_env(fault):
        e = dict(preload, OCFS2D_FAULT_DEV=base.img, OCFS2D_FAULT_COUNT=counts_path,
                 OCFS2D_FAULT_FIRED=fired_path)
        if fault:
            e["OCFS2D_FAULT"] = fault
        return e

    def run_workload(what):
        """The workload in a child; its ops, or None if it hung."""
        if os.path.exists(ops_path):
            os.unlink(ops_path)
        pid = env.fork(fault_workload, base.mnt, ops_path, fired_path)
        st = env.wait(pid, 60)
        recs = []
        with open(ops_path) as f:
            recs = [json.loads(line) for line in f]
        if st is None:
            started = [r[1] for r in recs if r[0] == "start"]
            chk.ok(False, "%s: the workload hangs in %r" % (what, started[-1] if started else "?"))
            base.cleanup()  # aborts the connection: the child gets ENOTCONN and ends
            env.wait(pid, 30)
            return None
        chk.eq(st, 0, "%s: the workload's exit status" % what)
        return [r for r in recs if r[0] != "start"]

    # fsck.ocfs2 takes most of a round (a second here, mostly not CPU): each
    # round's image is judged while the next round runs, one at a time
    pending = []

    def fsck_reap():
        what, path, p = pending.pop(0)
        out = p.communicate(timeout=300)[0].decode("utf-8", "replace").replace(path, base.img)
        if chk.ok(p.returncode == 0 and out == base.baseline,
                  "%s: fsck.ocfs2 -fn (exit %d) differs from the fresh volume's:\n%s" % (
                      what, p.returncode, out)):
            os.unlink(path)
        else:
            env.show_logs = True
            log("%s: kept the image %s" % (what, path))

    def fsck_async(what):
        path = os.path.join(env.tmp, "judged-%d.img" % len(env.cleanups))
        env.cleanups.append(lambda: None)  # only numbers the images
        os.rename(base.img, path)
        while pending:
            fsck_reap()
        pending.append((what, path, subprocess.Popen(
            [env.fsck, "-fn", path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=tool_env())))

    # the count run: no fault, every I/O and allocation of mount, workload and unmount
    for p in (counts_path, fired_path):
        if os.path.exists(p):
            os.unlink(p)
    t0 = time.time()
    base.mount(opts, extra_env=shim_env(None))
    recs = run_workload("count run")
    chk.ok(recs is not None and all(r[5] == 0 for r in recs), "count run: every op succeeds: %s" % recs)
    base.umount()
    base.fsck(chk, "after the count run")
    totals = read_counts(counts_path)
    chk.ok(all(totals.get(k, 0) > 0 for k in kinds) and totals["fired"] == 0,
           "count run: the shim saw the daemon's %s: %s" % ("/".join(kinds), totals))
    log("count run (%.1fs): %s from mount to unmount" % (
        time.time() - t0, ", ".join("%d %ss" % (totals.get(k, 0), k) for k in kinds)))

    rounds = rounds_for(totals)
    if only:
        rounds = only.split(",")
        env.show_logs = True

    tally = {"mount refused": 0, "read-only": 0, "failed unmount": 0, "errors only": 0, "absorbed": 0,
             "not fired": 0}
    for fault in rounds:
        fault_round(env, chk, base, pristine, fault, opts, shim_env, run_workload, fsck_async, wanted,
                    fired_path, counts_path, tally)
        if chk.failures > 20:
            log("too many failures: stopping")
            break
    while pending:
        fsck_reap()
    log("%d fault rounds: %s" % (len(rounds), ", ".join("%s %d" % kv for kv in tally.items())))


def fault_round(env, chk, vol, pristine, fault, opts, shim_env, run_workload, fsck_async, wanted,
                fired_path, counts_path, tally):
    kind = fault.split(":")[0]
    what = "fault %s" % fault
    # an I/O fault is seen by the shim as it happens; an allocation's by
    # fscore alone, so only the counts written at the daemon's exit tell
    err = errno.ENOMEM if kind == "alloc" else errno.EIO

    def fired_by_exit():
        if kind != "alloc":
            return os.path.exists(fired_path)
        return os.path.exists(counts_path) and read_counts(counts_path)["fired"] > 0
    for p in (counts_path, fired_path):
        if os.path.exists(p):
            os.unlink(p)
    run(["cp", "--sparse=always", pristine, vol.img], check=True)
    recs = None
    try:
        vol.mount(opts, extra_env=shim_env(fault), first_errors=(err,))
        mounted = True
    except Failure as e:
        mounted = False
        rc = vol.proc.returncode
        chk.ok(rc == 1, "%s: a mount that fails exits 1 (%s)" % (what, e))
        chk.ok(fired_by_exit(), "%s: the mount failed with no fault injected" % what)
        chk.ok(not vol.mounted(), "%s: nothing left mounted" % what)
        tally["mount refused"] += 1
        outcome = "mount refused"
    if mounted:
        recs = run_workload(what)
        alive = vol.proc.poll() is None
        chk.ok(alive, "%s: the daemon is alive after the workload (exit %s)" % (what, vol.proc.returncode))
        if recs is None or not alive:
            vol.cleanup()
            return
        fired_ro = kind in ("write", "flush")
        for idx, name, writing, before, after, e in recs:
            if e is None:
                continue
            label = "%s: op %d %r" % (what, idx, name)
            chk.ok(e in (0, err, errno.EROFS), "%s: errno %s (only %s or EROFS)" % (
                label, errno.errorcode.get(e, e), errno.errorcode[err]))
            if not after and kind != "alloc":
                chk.eq(errno.errorcode.get(e, e) if e else "OK", "OK", "%s before any fault" % label)
            if fired_ro and before and writing:
                chk.eq(errno.errorcode.get(e, e) if e else "OK", "EROFS",
                       "%s after the failed %s (read-only)" % (label, kind))
        fired_early = os.path.exists(fired_path)
        rc = vol.umount(judge=False)
        tail = vol.log_text().rsplit("=== mount", 1)[-1]
        ro = "read-only" in tail
        fired = fired_by_exit()
        dirty = "(journal left dirty)" in tail
        chk.ok(not sanitizer_report(tail), "%s: a sanitizer report" % what)
        if fired_early and fired_ro:
            chk.ok(ro, "%s: the failed %s turned the volume read-only" % (what, kind))
        if fired and fired_ro:
            # the journal could not be closed: the next mount replays it
            chk.ok(rc == 1 and dirty, "%s: after a failed %s the daemon exits 1, journal left dirty "
                   "(exit %d)" % (what, kind, rc))
        elif ro:
            chk.ok(rc == 1 and dirty, "%s: a read-only volume's daemon exits 1, journal left dirty "
                   "(exit %d)" % (what, rc))
        elif fired:  # a failed read or allocation: the unmount may have needed it
            chk.ok((rc, dirty) in ((0, False), (1, True)) and ("(clean)" in tail) != dirty,
                   "%s: the daemon's exit status (%d) and its last words agree" % (what, rc))
        else:
            chk.ok(rc == 0 and "(clean)" in tail, "%s: no fault, yet the daemon exits %d (or unclean)" % (
                what, rc))
        if kind in ("read", "alloc") and not ro and "sticky" not in fault:
            # a failed read (allocation) fails the one call that needed it, nothing after
            failed = [r[1] for r in recs if r[5]]
            chk.ok(len(failed) <= 1, "%s: one failed %s, yet these ops failed: %s" % (what, kind, failed))
        if any(r[5] == errno.EROFS for r in recs):
            chk.ok(ro, "%s: EROFS from a volume that says nothing of read-only" % what)
        outcome = ("read-only" if ro else "failed unmount" if dirty else "errors only" if fired
                   else "not fired")
        if outcome == "errors only" and kind == "alloc" and not read_counts(counts_path)["alloc_failed"]:
            outcome = "absorbed"  # only read-ahead's allocation failed: nothing to see
        tally[outcome] += 1
    # a fault-free mount replays the journal; what was fsynced is there
    vol.mount(opts)
    ok = {r[1]: r[5] == 0 for r in recs or []}
    for f in ("small", "big", "last"):
        if ok.get("fsync " + f):
            p = os.path.join(vol.mnt, "d", f)
            got = errno_of(lambda: read_file(p))
            chk.ok(got == "OK" and read_file(p) == wanted[f],
                   "%s: fsynced %s intact after the remount (%s)" % (what, f, got))
    if ok.get("sync"):
        d = os.path.join(vol.mnt, "d")
        if ok.get("truncate mid2"):
            chk.ok(os.path.exists(os.path.join(d, "mid2")) and read_file(os.path.join(d, "mid2")) == wanted["mid2"],
                   "%s: mid2 renamed and truncated before the sync" % what)
        if ok.get("unlink gone"):
            chk.ok(not os.path.exists(os.path.join(d, "gone")), "%s: gone unlinked before the sync" % what)
    for dirpath, dirnames, filenames in os.walk(vol.mnt):
        for n in filenames:
            p = os.path.join(dirpath, n)
            chk.eq(errno_of(lambda: read_file(p)), "OK", "%s: reading %s after the remount" % (what, p))
    vol.umount()
    fsck_async(what)
    nerr = sum(1 for r in recs or [] if r[5] == err)
    erofs = sum(1 for r in recs or [] if r[5] == errno.EROFS)
    log("%s: %s%s" % (what, outcome, "" if recs is None else ", %d ops %s, %d EROFS" % (
        nerr, errno.errorcode[err], erofs)))


# ====================================================================
# helper: mount(8) and umount(8) through mount.fuse.ocfs2
# ====================================================================

def case_helper(env, chk):
    """mount -t fuse.ocfs2, an /etc/fstab line and a plain umount, run by
    the real mount(8) and umount(8), which find the built helper in /sbin:
    in a mount namespace of this case's own, the build's mount.fuse.ocfs2
    and umount.fuse.ocfs2 are laid over /sbin (overlayfs) and a temporary
    fstab is bound over /etc/fstab."""
    control = os.path.join(env.tmp, "control", "sock")
    server_log = os.path.join(os.path.dirname(control), "ocfs2d.log")
    henv = dict(os.environ, OCFS2D_CONTROL=control, OCFS2D=env.daemon)
    env.cleanups.append(lambda: [os.kill(p, signal.SIGTERM) for p in daemons_with_control(control)])
    env.extra_logs = [lambda: "---- server ocfs2d.log ----\n" + (
        read_file(server_log).decode(errors="replace") if os.path.exists(server_log) else "")]
    helper = os.path.join(os.path.dirname(env.ctl), "mount.fuse.ocfs2")
    vol = env.volume("helper")
    img, mnt = vol.img, vol.mnt
    os.chmod(env.tmp, 0o755)
    os.chmod(mnt, 0o755)

    def cmd(*argv, user=None):
        """(exit status, stdout + stderr) of a command run as mount(8) would be."""
        pre = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] if user else []
        p = subprocess.run(pre + list(argv), stdin=subprocess.DEVNULL, capture_output=True,
                           env=henv, timeout=120)
        out = (p.stdout + p.stderr).decode(errors="replace")
        log("%s -> %d %s" % (" ".join(argv), p.returncode, out.strip()))
        return p.returncode, out

    def flags():
        """The mount's per-mount flags (mountinfo's fifth field)."""
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if parts[4] == mnt:
                    return parts[5].split(",")
        return []

    # bad input, before anything is laid over /sbin: the helper run directly
    chk.eq(cmd(helper)[0], 1, "the helper without arguments: usage")
    rc, out = cmd(helper, img, mnt, "-o", "commit=2", user=NOBODY)
    chk.ok(rc == 1 and "only root can mount" in out, "the helper as nobody: %d %r" % (rc, out))
    rc, out = cmd(helper, img, mnt, "-t", "ext4")
    chk.ok(rc == 1 and "not ours" in out, "the helper with another type: %d %r" % (rc, out))

    unshare_mounts()
    upper, work = os.path.join(env.tmp, "sbin.upper"), os.path.join(env.tmp, "sbin.work")
    os.mkdir(upper)
    os.mkdir(work)
    shutil.copy(helper, os.path.join(upper, "mount.fuse.ocfs2"))
    os.symlink("mount.fuse.ocfs2", os.path.join(upper, "umount.fuse.ocfs2"))
    sbin = os.path.realpath("/sbin")
    rc, out = cmd("mount", "-t", "overlay", "overlay", "-o",
                  "lowerdir=%s,upperdir=%s,workdir=%s" % (sbin, upper, work), sbin)
    if rc != 0:
        raise Failure("cannot lay the helper over %s: %s" % (sbin, out))

    # mount -t with an image path and options
    rc, out = cmd("mount", "-t", "fuse.ocfs2", "-o", "commit=60,_netdev,nofail", img, mnt)
    chk.ok(rc == 0 and out == "", "mount -t fuse.ocfs2: %d %r" % (rc, out))
    chk.ok(vol.mounted(), "mounted by mount -t fuse.ocfs2")
    chk.ok("nosuid" in flags() and "nodev" in flags() and "noexec" not in flags(),
           "default flags nosuid, nodev: %s" % flags())
    rc, out = cmd(env.ctl, "mounts")
    chk.ok(rc == 0 and "%s on %s" % (img, mnt) in out, "the daemon serves it: %r" % out)
    chk.eq(nobody_access(mnt), NOBODY_ACCESS_WANT, "mount -t's default: a user, modes checked")
    write_file(os.path.join(mnt, "kept"), b"through mount -t\n")
    # work for the unmount: a long commit interval leaves it transactions to
    # commit and checkpoint, which plain umount(2) would not wait for
    os.mkdir(os.path.join(mnt, "many"))
    for i in range(3000):
        write_file(os.path.join(mnt, "many", "f%d" % i), b"%d" % i)
    # umount(8) runs umount.fuse.ocfs2, which returns once the volume is closed
    rc, out = cmd("umount", mnt)
    chk.ok(rc == 0 and out == "", "umount: %d %r" % (rc, out))
    chk.ok(not vol.mounted(), "unmounted by umount")
    chk.ok(": unmounted from %s (clean)" % mnt in read_file(server_log).decode(errors="replace"),
           "umount returned after the daemon closed the volume")
    vol.fsck(chk, "right after umount")

    # bad options through mount(8): a clear error, nothing mounted
    rc, out = cmd("mount", "-t", "fuse.ocfs2", "-o", "commit=2,bogus", img, mnt)
    chk.ok(rc == 32 and 'unknown mount option "bogus"' in out, "an unknown option: %d %r" % (rc, out))
    rc, out = cmd("mount", "-t", "fuse.ocfs2", "-o", "commit=0", img, mnt)
    chk.ok(rc == 32 and "bad value for mount option commit" in out, "a bad value: %d %r" % (rc, out))
    rc, out = cmd("mount", "-t", "fuse.ocfs2", os.path.join(env.tmp, "absent.img"), mnt)
    chk.ok(rc == 32 and "absent.img" in out, "a missing image: %d %r" % (rc, out))
    chk.ok(not vol.mounted(), "nothing mounted by the failed mounts")
    # -s (sloppy): an unknown option is dropped with a warning
    rc, out = cmd("mount", "-s", "-t", "fuse.ocfs2", "-o", "bogus", img, mnt)
    chk.ok(rc == 0 and 'ignoring unknown option "bogus"' in out, "mount -s: %d %r" % (rc, out))
    chk.eq(cmd("umount", mnt)[0], 0, "umount after mount -s")

    # an fstab line; user makes mount(8) add noexec,nosuid,nodev
    fstab = os.path.join(env.tmp, "fstab")
    with open(fstab, "w") as f:
        f.write("# test fstab\n%s %s fuse.ocfs2 noauto,_netdev,nofail,user,x-test=1,noallow_other,commit=3 0 0\n"
                % (img, mnt))
    rc, out = cmd("mount", "--bind", fstab, "/etc/fstab")
    if rc != 0:
        raise Failure("cannot bind the fstab: %s" % out)
    rc, out = cmd("mount", mnt)
    chk.ok(rc == 0 and out == "", "mount DIR from fstab: %d %r" % (rc, out))
    chk.ok(vol.mounted(), "mounted from fstab")
    chk.ok("noexec" in flags(), "fstab's user: noexec: %s" % flags())
    chk.eq(read_file(os.path.join(mnt, "kept")), b"through mount -t\n", "the data of the first mount")
    chk.eq(as_user(NOBODY, NOBODY, lambda: errno_of(lambda: os.listdir(mnt))), "EACCES",
           "fstab's noallow_other keeps nobody out")
    rc, out = cmd("mount", "-a")
    chk.ok(rc == 0, "mount -a leaves the noauto line: %d %r" % (rc, out))
    rc, out = cmd("umount", mnt)
    chk.ok(rc == 0 and not vol.mounted(), "umount of the fstab mount: %d %r" % (rc, out))
    vol.fsck(chk, "after the fstab mount")

    # umount -i: the syscall alone, no helper; the daemon sees its session
    # end and closes the volume cleanly by itself (then exits when idle)
    chk.eq(cmd("mount", "-t", "fuse.ocfs2", img, mnt)[0], 0, "mount again")
    write_file(os.path.join(mnt, "late"), b"x" * 100000)
    chk.eq(cmd("umount", "-i", mnt)[0], 0, "umount -i")
    deadline = time.time() + 20
    while daemons_with_control(control) and time.time() < deadline:
        time.sleep(0.1)
    chk.eq(daemons_with_control(control), [], "the daemon closed the volume and exited")
    chk.ok(read_file(server_log).decode(errors="replace").count(": unmounted from %s (clean)" % mnt) == 4,
           "four clean unmounts in the daemon's log")
    vol.fsck(chk, "after umount -i")


# ====================================================================
# log: where the daemon's messages go, and ocfs2ctl log
# ====================================================================

def case_log(env, chk):
    """A daemon ocfs2ctl starts (detached) logs to syslog and to ocfs2d.log;
    ocfs2ctl log shows that file, or one volume's lines of it.  Syslog is a
    datagram socket of this case's own at /dev/log, in a mount namespace of
    the case's own where /dev is an overlay (the host's /dev untouched)."""
    import socket
    control = os.path.join(env.tmp, "control", "sock")
    server_log = os.path.join(os.path.dirname(control), "ocfs2d.log")
    cenv = dict(os.environ, OCFS2D_CONTROL=control, OCFS2D=env.daemon)
    env.cleanups.append(lambda: [os.kill(p, signal.SIGTERM) for p in daemons_with_control(control)])
    env.extra_logs = [lambda: "---- server ocfs2d.log ----\n" + (
        read_file(server_log).decode(errors="replace") if os.path.exists(server_log) else "")]

    def ctl(*args):
        p = subprocess.run([env.ctl] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                           env=cenv, timeout=120)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        log("ocfs2ctl %s -> %d %r %r" % (" ".join(args), p.returncode, out[-300:], err[-300:]))
        return p.returncode, out, err

    unshare_mounts()
    upper, work = os.path.join(env.tmp, "dev.upper"), os.path.join(env.tmp, "dev.work")
    os.mkdir(upper)
    os.mkdir(work)
    run(["mount", "-t", "overlay", "overlay", "-o", "lowerdir=/dev,upperdir=%s,workdir=%s" % (upper, work),
         "/dev"], check=True)
    syslog = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    syslog.bind("/dev/log")
    syslog.settimeout(0.2)

    def syslog_lines():
        got = []
        while True:
            try:
                got.append(syslog.recv(65536).decode(errors="replace"))
            except socket.timeout:
                return got

    v1, v2 = env.volume("log1"), env.volume("log2")
    rc, out, err = ctl("log")
    chk.ok(rc == 1 and "cannot read" in err and server_log in err, "log before any daemon: %d %r" % (rc, err))
    chk.eq(ctl("mount", v1.img, v1.mnt)[0], 0, "mount the first volume")
    chk.eq(ctl("mount", "-o", "commit=2", v2.img, v2.mnt)[0], 0, "mount the second")
    v1.conn, v2.conn = mount_entry(v1.mnt)[1], mount_entry(v2.mnt)[1]
    said1 = "%s: mounted on %s (" % (v1.img, v1.mnt)
    said2 = "%s: mounted on %s (" % (v2.img, v2.mnt)

    # syslog: the daemon's own identity, LOG_DAEMON facility, notice priority
    got = syslog_lines()
    mine = [g for g in got if said1 in g]
    chk.eq(len(mine), 1, "syslog has the first mount once: %r" % got)
    chk.ok(mine and re.match(r"<29>.* ocfs2d\[\d+\]: ", mine[0]),
           "as ocfs2d[PID], daemon.notice: %r" % mine)
    chk.ok(any(said2 in g for g in got), "syslog has the second mount")

    # ocfs2ctl log: the whole file, then one volume's lines
    rc, out, err = ctl("log")
    chk.ok(rc == 0 and said1 in out and said2 in out and err == "", "log: %d %r" % (rc, err))
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} ocfs2d\[\d+\]: (Message|INFO|WARNING|CRITICAL|ERROR|DEBUG): ")
    chk.ok(out and all(stamp.match(line) for line in out.splitlines()),
           "every line says when, who and how bad: %r" % out[:400])
    rc, out, err = ctl("log", v1.mnt)
    chk.ok(rc == 0 and said1 in out and v2.img not in out and v2.mnt not in out,
           "log MOUNTPOINT: that volume's lines only: %r" % out)
    rc, out, err = ctl("log", v2.img)
    chk.ok(rc == 0 and said2 in out and v1.img not in out, "log DEVICE: %r" % out)
    rc, out, err = ctl("log", "-n", "1", v1.mnt)
    chk.ok(rc == 0 and len(out.splitlines()) == 1 and said1 in out, "log -n 1: %r" % out)
    chk.eq(ctl("umount", v1.mnt)[0], 0, "umount the first")
    v1.conn = None
    rc, out, err = ctl("log", "-n", "1", v1.mnt)
    chk.ok(rc == 0 and "%s: unmounted from %s (clean)" % (v1.img, v1.mnt) in out,
           "log after the umount: %r" % out)
    chk.ok(any("%s: unmounted from %s (clean)" % (v1.img, v1.mnt) in g for g in syslog_lines()),
           "the unmount in syslog")
    # bad input: a clear error
    rc, out, err = ctl("log", os.path.join(env.tmp, "nothing"))
    chk.ok(rc == 1 and out == "" and "nothing in" in err, "log of something never mounted: %d %r" % (rc, err))
    for bad in ("0", "x", ""):
        rc, out, err = ctl("log", "-n", bad)
        chk.ok(rc == 1 and "-n wants a count" in err, "log -n %r: %d %r" % (bad, rc, err))
    rc, out, err = ctl("log", v1.mnt, v2.mnt)
    chk.ok(rc == 2 and "usage" in err, "log with two volumes: %d %r" % (rc, err))
    chk.eq(ctl("umount", v2.mnt)[0], 0, "umount the second")
    v2.conn = None
    # once the daemon is gone, the log still maps the mount point to its device
    deadline = time.time() + 20
    while daemons_with_control(control) and time.time() < deadline:
        time.sleep(0.1)
    rc, out, err = ctl("log", v2.mnt)
    chk.ok(rc == 0 and said2 in out and "%s: unmounted from %s (clean)" % (v2.img, v2.mnt) in out,
           "log of a volume the gone daemon served: %r" % out)
    for v in (v1, v2):
        v.fsck(chk, "after the log case")


def debugfs_xattr_count(env, img, path):
    """How many attributes debugfs.ocfs2 xattr finds on path (inline, block and buckets)."""
    p = subprocess.run(["debugfs.ocfs2", "-R", "xattr " + path, img], capture_output=True, text=True)
    total = 0
    for line in p.stdout.splitlines():
        m = re.search(r"(?:inline|in block|in bucket #\d+): (\d+)\s*$", line)
        if m:
            total += int(m.group(1))
    return total


def check_listing(chk, f, want, what):
    """listxattr lists want's names - or, past the VFS's 64 KiB for a
    listing (XATTR_LIST_MAX), fails with E2BIG as on any Linux filesystem."""
    size = sum(len(k) + 1 for k in want)
    if size > 65536:
        chk.eq(errno_of(lambda: os.listxattr(f)), "E2BIG", "%s (%d bytes: E2BIG)" % (what, size))
    else:
        chk.eq(set(os.listxattr(f)), set(want), what)


def case_xattrmany(env, chk):
    """Issue 21: 10,000 attributes on one file (names up to 255 bytes,
    values up to 64 KiB) through FUSE, on 4K and 512-byte blocks and 1M
    clusters: the xattr block becomes a tree of hash-ordered buckets as the
    kernel makes it; every attribute reads back, replaced and removed ones
    too; fsck.ocfs2 -fn is clean and debugfs.ocfs2 counts what we set; the
    file deleted, every cluster comes back."""
    n = int(os.environ.get("FUSE_XATTR_MANY", "10000"))
    for tag, args in (("b4096-c4k", ("--fs-feature-level=max-features", "-b", "4096", "-C", "4096")),
                      ("b512-c4k", ("-b", "512", "-C", "4096")),
                      ("b4096-c1m", ("-b", "4096", "-C", "1M"))):
        c1m = tag.endswith("c1m")
        vol = env.volume("xm-" + tag, size="1G", mkfs="mkfs.ocfs2", mkfs_args=args + ("-J", "size=16M"))
        vol.mount()
        m = vol.mnt
        free0 = os.statvfs(m).f_bfree
        f = os.path.join(m, "many")
        write_file(f, b"data")
        rnd = random.Random(tag)
        want = {}
        t0 = time.time()
        for i in range(n):
            name = "user.%05d-" % i + "n" * rnd.choice([1, 10, 40, 120, 243])
            # with 1M clusters each value past 80 bytes takes a cluster: few of them there
            if c1m:
                size = rnd.choice([0, 5, 40, 80]) if i % 500 else rnd.choice([81, 65536])
            else:
                size = rnd.choice([0, 5, 40, 80, 81, 200, 1000, 3000]) if i % 100 else rnd.choice(
                    [4096, 20000, 65536])
            val = bytes([i & 0xff]) * size
            os.setxattr(f, name, val)
            want[name] = val
        t1 = time.time()
        check_listing(chk, f, want, "%s: listxattr of the %d attributes" % (tag, n))
        bad = [k for k, v in want.items() if os.getxattr(f, k) != v]
        chk.eq(bad[:5], [], "%s: every attribute reads back" % tag)
        t2 = time.time()
        names = sorted(want)
        for k in names[::5]:  # replaced: other sizes, the other side of 80 bytes
            v = b"R" * ((len(want[k]) + 77 if len(want[k]) < 200 else 7) if not c1m else 80 - len(want[k]) % 80)
            os.setxattr(f, k, v, os.XATTR_REPLACE)
            want[k] = v
        for k in names[1::3]:  # removed
            os.removexattr(f, k)
            del want[k]
        check_listing(chk, f, want, "%s: listxattr after replacing and removing" % tag)
        bad = [k for k, v in want.items() if os.getxattr(f, k) != v]
        chk.eq(bad[:5], [], "%s: what is left reads back" % tag)
        chk.eq(errno_of(lambda: os.getxattr(f, names[1])), "ENODATA", "%s: a removed one is gone" % tag)
        log("%s: %d set in %.1f s, read back in %.1f s" % (tag, n, t1 - t0, t2 - t1))
        vol.umount()
        vol.fsck(chk, "with %d attributes (%s)" % (len(want), tag))
        chk.eq(debugfs_xattr_count(env, vol.img, "/many"), len(want),
               "%s: debugfs.ocfs2 xattr counts them" % tag)
        if tag == "b4096-c4k":
            # a reflink copies them (values in clusters shared), offline
            rc, out = run([env.ctl, "reflink", vol.img, "/many", "/copy"])
            chk.eq(rc, 0, "%s: ocfs2ctl reflink of the file: %s" % (tag, out))
            vol.fsck(chk, "after the reflink (%s)" % tag)
            chk.eq(debugfs_xattr_count(env, vol.img, "/copy"), len(want),
                   "%s: the reflink has every attribute" % tag)
        vol.mount()
        if tag == "b4096-c4k":
            g = os.path.join(m, "copy")
            big = [k for k, v in want.items() if len(v) > 80][:20]
            bad = [k for k in list(want)[::50] + big if os.getxattr(g, k) != want[k]]
            chk.eq(bad[:5], [], "%s: the reflink's attributes read back" % tag)
            for k in big[:10]:  # a shared value replaced in the copy: the original keeps its own
                os.setxattr(g, k, b"C" * 5000)
            chk.eq([k for k in big if os.getxattr(f, k) != want[k]], [],
                   "%s: the original's values unchanged after the copy's changed" % tag)
            os.unlink(g)
        os.unlink(f)
        # allocator groups the reflink's refcount tree emptied go back at the close
        vol.umount()
        vol.mount()
        chk.eq(os.statvfs(m).f_bfree, free0, "%s: the file deleted, every cluster is back" % tag)
        vol.umount()
        vol.fsck(chk, "after deleting the file (%s)" % tag)


def quota_ids(out):
    """{id: (bytes, inodes, bsoft, bhard, isoft, ihard, btime, itime)} of ocfs2ctl quota --json."""
    d = json.loads(out)
    return {e["id"]: (e["space"], e["inodes"], e["block_soft"], e["block_hard"], e["inode_soft"],
                      e["inode_hard"], e["block_grace_ends"], e["inode_grace_ends"]) for e in d["ids"]}


def usage_of(ids):
    """Only what is in use, ids with none left out."""
    return {i: v[:2] for i, v in ids.items() if v[0] or v[1]}


def case_quota(env, chk):
    """Quotas through a real mount (issue 21): usage after a mixed workload of
    several users and groups equals what fsck.ocfs2 counts and what ocfs2ctl
    quota reports, mounted and offline; hard limits give EDQUOT; a soft limit
    refuses once its grace period is over; chown checks the new owner."""
    control, ctl = private_server(env)
    vol = env.volume("quota", size="512M", mkfs="mkfs.ocfs2",
                     mkfs_args=("--fs-feature-level=max-features", "-b", "4096", "-C", "4096",
                                "-J", "size=8M"))
    # what mkfs.ocfs2 left uncounted (it makes lost+found after the quota
    # files): the fresh volume's difference from fsck's count stays
    base = {}
    for t in ("-u", "-g"):
        rc, mine = ctl("quota", "--json", t, vol.img)
        chk.eq(rc, 0, "offline report of the fresh volume %s: %s" % (t, mine))
        copy = vol.img + ".fsck"
        subprocess.run(["cp", "--sparse=always", vol.img, copy], check=True)
        run([env.fsck, "-fy", copy])
        rc, theirs = ctl("quota", "--json", t, copy)
        os.unlink(copy)
        base[t] = (usage_of(quota_ids(mine)), usage_of(quota_ids(theirs)))
    rc, out = ctl("mount", vol.img, vol.mnt)
    chk.eq(rc, 0, "ocfs2ctl mount of a max-features volume (read-write): %s" % out)
    vol.conn = vol.mounted() and mount_entry(vol.mnt)[1]
    if not vol.mounted():
        return
    os.chmod(env.tmp, 0o755)
    m = vol.mnt
    os.chmod(m, 0o777)
    P = lambda *a: os.path.join(m, *a)  # noqa: E731
    users = [(2001, 3001), (2002, 3002), (2003, 3001)]

    # a mixed workload as three users, in two groups, plus root's chowns
    def work(uid, seed):
        rnd = random.Random(seed)
        top = P("u%d" % uid)
        os.mkdir(top)
        files = []
        for i in range(120):
            op = rnd.random()
            if op < 0.4 or not files:
                f = os.path.join(top, "f%d" % i)
                write_file(f, os.urandom(rnd.choice([0, 100, 3000, 5000, 70000, 300000])))
                files.append(f)
            elif op < 0.55:
                f = rnd.choice(files)
                with open(f, "ab") as fh:
                    fh.write(os.urandom(rnd.randrange(1, 200000)))
            elif op < 0.65:
                os.truncate(rnd.choice(files), rnd.randrange(0, 100000))
            elif op < 0.75:
                f = files.pop(rnd.randrange(len(files)))
                os.unlink(f)
            elif op < 0.82:
                d = os.path.join(top, "d%d" % i)
                os.mkdir(d)
                files.append(os.path.join(d, "x"))
                write_file(files[-1], os.urandom(rnd.randrange(0, 20000)))
            elif op < 0.9:
                os.symlink("t" * rnd.choice([10, 3000]), os.path.join(top, "l%d" % i))
            else:
                f = rnd.choice(files)
                os.link(f, f + ".ln%d" % i)
        return len(files)

    for n, (uid, gid) in enumerate(users):
        as_user(uid, gid, lambda: work(uid, n))
    # root gives some files away, across users and groups
    for name in sorted(os.listdir(P("u2001")))[:10]:
        try:
            os.lchown(P("u2001", name), 2002, 3002)
        except OSError:
            pass
    os.chown(P("u2003"), 2003, 3002)

    def compare_with_fsck(what):
        for t in ("-u", "-g"):
            rc, mine = ctl("quota", "--json", t, vol.img)
            chk.eq(rc, 0, "%s: offline report %s" % (what, t))
            copy = vol.img + ".fsck"
            subprocess.run(["cp", "--sparse=always", vol.img, copy], check=True)
            run([env.fsck, "-fy", copy])
            rc, theirs = ctl("quota", "--json", t, copy)
            os.unlink(copy)
            mine_u, theirs_u = usage_of(quota_ids(mine)), usage_of(quota_ids(theirs))
            # fsck's count less the fresh volume's difference
            want = dict(theirs_u)
            for i in set(base[t][0]) | set(base[t][1]):
                b0, b1 = base[t][0].get(i, (0, 0)), base[t][1].get(i, (0, 0))
                w = want.get(i, (0, 0))
                want[i] = (w[0] - (b1[0] - b0[0]), w[1] - (b1[1] - b0[1]))
            want = {i: v for i, v in want.items() if v[0] or v[1]}
            chk.eq(mine_u, want, "%s: %s quota usage in the files equals fsck.ocfs2's count" % (
                what, "user" if t == "-u" else "group"))
        return True

    mounted = {}
    for t in ("-u", "-g"):
        rc, out = ctl("quota", "--json", t, m)
        chk.eq(rc, 0, "report through the daemon %s: %s" % (t, out))
        mounted[t] = usage_of(quota_ids(out)) if rc == 0 else {}
    rc, out = ctl("quota", m)
    chk.ok(rc == 0 and "#2001" in out or "2001" in out, "text report names the users: %s" % out)
    rc, out = ctl("umount", m)
    chk.eq(rc, 0, "umount: %s" % out)
    vol.fsck(chk, "after the workload")
    compare_with_fsck("after the workload")
    for t in ("-u", "-g"):
        rc, out = ctl("quota", "--json", t, vol.img)
        chk.eq(mounted[t], usage_of(quota_ids(out)), "the mounted report %s equals the offline one" % t)

    # limits, through the daemon
    rc, out = ctl("mount", vol.img, vol.mnt)
    chk.eq(rc, 0, "mount again: %s" % out)
    vol.conn = vol.mounted() and mount_entry(vol.mnt)[1]
    if not vol.mounted():
        return
    ids = quota_ids(ctl("quota", "--json", m)[1])
    used, inodes = ids[2001][0], ids[2001][1]
    chk.eq(ctl("quota", "set", m, "2001", "0", str(used // 1024 + 256), "0", str(inodes + 3))[0], 0,
           "quota set through the daemon")

    def over_hard():
        r = {}
        try:
            with open(P("u2001", "big"), "wb") as fh:
                fh.write(os.urandom(1 << 20))
            r["write 1M"] = "OK"
        except OSError as e:
            r["write 1M"] = errno.errorcode[e.errno]
        r["size"] = os.stat(P("u2001", "big")).st_size
        r["creates"] = [errno_of(lambda i=i: write_file(P("u2001", "n%d" % i), b"")) for i in range(4)]
        return r

    r = as_user(2001, 3001, over_hard)
    chk.eq(r["write 1M"], "EDQUOT", "a write past the hard space limit: EDQUOT")
    chk.ok(r["size"] <= 256 * 1024, "the write stopped at the limit: %d bytes" % r["size"])
    chk.eq(r["creates"], ["OK", "OK", "EDQUOT", "EDQUOT"], "creates past the inode hard limit: EDQUOT "
           "(the file 'big' took the first of the three)")
    # chown onto a full quota
    write_file(P("rootfile"), b"r" * 8192)
    chk.eq(errno_of(lambda: os.chown(P("rootfile"), 2001, -1)), "EDQUOT", "chown to a user at its limit")
    chk.eq(errno_of(lambda: os.chown(P("rootfile"), 2002, -1)), "OK", "chown to a user with room")
    # soft limit and grace, groups
    chk.eq(ctl("quota", "grace", "-g", m, "2", "2")[0], 0, "group grace periods of 2 s")
    gids = quota_ids(ctl("quota", "--json", "-g", m)[1])
    gused = gids[3002][0]
    chk.eq(ctl("quota", "set", "-g", m, "3002", str(gused // 1024 + 64), "0", "0", "0")[0], 0,
           "a group soft limit")
    r1 = as_user(2002, 3002, lambda: errno_of(lambda: write_file(P("u2002", "soft1"), os.urandom(128 * 1024))))
    chk.eq(r1, "OK", "past the soft limit within its grace period")
    g = quota_ids(ctl("quota", "--json", "-g", m)[1])[3002]
    chk.ok(g[6] > 0, "the grace period runs: %r" % (g,))
    time.sleep(3)
    r2 = as_user(2002, 3002, lambda: errno_of(lambda: write_file(P("u2002", "soft2"), os.urandom(64 * 1024))))
    chk.eq(r2, "EDQUOT", "past the soft limit after its grace period: EDQUOT")
    rc, out = ctl("quota", "set", m, "2001", "0", "0", "0", "0")
    chk.eq(rc, 0, "limits lifted")
    chk.eq(as_user(2001, 3001, lambda: errno_of(lambda: write_file(P("u2001", "after"), b"x" * 9000))), "OK",
           "a write once the limit is lifted")
    rc, out = ctl("quota", "set", m, "nosuchuser-xyz", "1", "1", "1", "1")
    chk.eq(rc, 2, "an unknown user name is a usage error: %s" % out)
    rc, out = ctl("quota", "set", m, "2001", "5", "4", "0", "0")
    chk.eq(rc, 2, "a soft limit above the hard one is refused: %s" % out)
    rc, out = ctl("umount", m)
    chk.eq(rc, 0, "umount: %s" % out)
    vol.fsck(chk, "after the limits")
    compare_with_fsck("after the limits")
    # an image without quotas says so
    plain = env.volume("noquota")
    rc, out = ctl("quota", plain.img)
    chk.ok(rc == 1 and "keeps no user quotas" in out, "a volume without quotas: %r" % out)


CASES = {"cluster": case_cluster, "ops": case_ops, "data": case_data, "perms": case_perms, "ctl": case_ctl,
         "stress": case_stress, "crash": case_crash, "space": case_space, "xattr": case_xattr, "acl": case_acl,
         "fault": case_fault, "enomem": case_enomem, "fsx": case_fsx, "rocrash": case_rocrash,
         "once": case_once, "helper": case_helper,
         "log": case_log, "full": case_full, "fill": case_fill, "fsync": case_fsync, "quota": case_quota,
         "writeback": case_writeback,
         "xattrmany": case_xattrmany}

if __name__ == "__main__":
    sys.exit(main(CASES))
