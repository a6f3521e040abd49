# SPDX-License-Identifier: GPL-2.0-or-later
"""Syscalls Python's os module lacks (ctypes), and running a function as
another user."""

import ctypes
import ctypes.util
import errno
import json
import os
import struct
import sys
import traceback

from o2test.check import Failure

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(Timespec), ctypes.c_int]

AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 0x10
UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
SEEK_DATA, SEEK_HOLE = 3, 4


def _check(r, what):
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return r


def renameat2(old, new, flags):
    return _check(libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags),
                  "renameat2")


def fallocate(fd, mode, off, length):
    return _check(libc.fallocate(fd, mode, off, length), "fallocate")


def utimensat(path, atime, mtime):
    """atime/mtime: (sec, nsec) or UTIME_NOW / UTIME_OMIT."""
    ts = (Timespec * 2)()
    for i, t in enumerate((atime, mtime)):
        if isinstance(t, tuple):
            ts[i].tv_sec, ts[i].tv_nsec = t
        else:
            ts[i].tv_sec, ts[i].tv_nsec = 0, t
    return _check(libc.utimensat(AT_FDCWD, os.fsencode(path), ts, 0), "utimensat")


SYS_getdents64 = 217  # x86_64


def getdents(fd, size=65536):
    """One getdents64(2) on directory fd with a buffer of size bytes:
    [(name, d_ino)], empty at the end."""
    buf = ctypes.create_string_buffer(size)
    n = _check(libc.syscall(SYS_getdents64, fd, buf, len(buf)), "getdents64")
    out, off = [], 0
    while off < n:
        ino, _, reclen = struct.unpack_from("<QqH", buf.raw, off)
        name = buf.raw[off + 19:off + reclen].split(b"\0", 1)[0]
        out.append((os.fsdecode(name), ino))
        off += reclen
    return out


def dirents(path):
    """Every entry getdents64(2) gives for directory path, '.' and '..'
    included (os.scandir leaves those out): {name: d_ino}."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    out = {}
    try:
        while True:
            got = getdents(fd)
            if not got:
                return out
            out.update(got)
    finally:
        os.close(fd)


CLONE_NEWNS = 0x00020000


def unshare_mounts():
    """Give this process a mount namespace of its own, its mounts private:
    what it and its children mount from now on no one else sees."""
    _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    MS_REC, MS_PRIVATE = 0x4000, 0x40000
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def statfs(path):
    return os.statvfs(path)


def as_user(uid, gid, fn):
    """Run fn() in a child with credentials uid/gid (no supplementary
    groups); fn returns something JSON can carry, which as_user returns."""
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            data = json.dumps({"result": fn()})
        except BaseException:
            data = json.dumps({"exc": traceback.format_exc()})
        os.write(w, data.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    os.waitpid(pid, 0)
    d = json.loads(b"".join(chunks) or b'{"exc": "no answer"}')
    if "exc" in d:
        raise Failure("child as uid %d failed:\n%s" % (uid, d["exc"]))
    return d["result"]


def errno_of(fn):
    """0 if fn() succeeds, else its errno name."""
    try:
        fn()
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


# What nobody may do with the files nobody_access makes on a volume mounted
# with the default options: as on a kernel filesystem, modes decide.
NOBODY_ACCESS_WANT = {"read 0644": "OK", "write 0644": "EACCES", "read 0600": "EACCES",
                      "create in 1777": "OK", "create in 0755": "EACCES"}


def nobody_access(root):
    """Root makes a 0644 file, a 0600 file and a 1777 directory under root
    (a mount point, which must be 0755 and reachable); what the user nobody
    (65534) may then do with them, as errno names (errno_of)."""
    def put(name, data, mode):
        fd = os.open(os.path.join(root, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def get(name):
        with open(os.path.join(root, name), "rb") as f:
            return f.read()

    put("rootfile", b"root's", 0o644)
    put("rootsecret", b"secret", 0o600)
    os.mkdir(os.path.join(root, "tmp"))
    os.chmod(os.path.join(root, "tmp"), 0o1777)

    def ops():
        return {"read 0644": errno_of(lambda: get("rootfile")),
                "write 0644": errno_of(lambda: os.close(os.open(os.path.join(root, "rootfile"), os.O_WRONLY))),
                "read 0600": errno_of(lambda: get("rootsecret")),
                "create in 1777": errno_of(lambda: put("tmp/nobody's", b"mine", 0o644)),
                "create in 0755": errno_of(lambda: put("nobody's", b"mine", 0o644))}
    return as_user(65534, 65534, ops)
