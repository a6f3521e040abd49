# SPDX-License-Identifier: GPL-2.0-or-later
"""Syscalls Python's os module lacks (ctypes), and running a function as
another user."""

import ctypes
import ctypes.util
import errno
import json
import os
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
