#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""flock(2) and POSIX (fcntl) locks across the nodes of a cluster.

Three corosync nodes in namespaces of their own (o2test.cluster) mount one
pcmk volume, each through a loop device of its own.  In each node, agents
(small Python processes driven line by line) open one file and lock it.

  1. flock: LOCK_EX on n1; LOCK_EX|LOCK_NB on n2 fails with EWOULDBLOCK; a
     blocking LOCK_EX on n3 waits until n1 unlocks; shared locks on all
     three at once; two processes on n1 conflict like on any filesystem;
     closing the file lets go of its lock.
  2. fcntl byte ranges: disjoint ranges on n1 and n2 both granted, an
     overlapping one refused (EAGAIN); F_GETLK on n2 reports n1's lock
     (pid 0: another node's), on n1 with its holder's pid; F_SETLKW on n3
     waits until n2 unlocks; an unlock punches a hole that n2 can lock and
     leaves both sides held; two owners waiting for each other: EDEADLK;
     closing any descriptor of the file drops the process's locks.
  3. A holder SIGKILLed on n1 (POSIX and flock locks) frees them for the
     waiters on n2 and n3.
  4. A signal interrupts a waiting F_SETLKW and a waiting LOCK_EX: EINTR;
     the interrupted requests left nothing behind (n1 locks at once after
     the holder lets go).
  5. n3 mounts again with localflocks: its locks are its own, n1's do not
     stop them.  Mounted once more without it, n3 joins the file-lock group
     while n1 holds locks, and is given them (a snapshot).
  6. All unmount; fsck.ocfs2 -fn is clean; no daemon logged a sanitizer
     report or a critical error.

Needs root, corosync, losetup, fsck.ocfs2 and /dev/fuse; else exits 77.
Usage: PYTHONPATH=tests test_cluster_flock.py OCFS2CTL
"""
import os
import select
import subprocess
import sys
import time

from o2test.cluster import shared_volume_args, fail, fsck_clean, \
    shared_volume, skip

# Inside a node: open argv[1] and run lock commands read from stdin, one
# answer line each ("ok", "err ENAME", "eintr", or F_GETLK's lock).
AGENT = r"""
import errno, fcntl, os, signal, struct, sys

class Alarm(Exception):
    pass

def on_alarm(sig, frame):
    raise Alarm()

signal.signal(signal.SIGALRM, on_alarm)
signal.siginterrupt(signal.SIGALRM, True)
FL = "@hhqqi4x"
TYPES = {"RD": fcntl.F_RDLCK, "WR": fcntl.F_WRLCK, "UN": fcntl.F_UNLCK}
NAMES = {fcntl.F_RDLCK: "RD", fcntl.F_WRLCK: "WR", fcntl.F_UNLCK: "UN"}
FLOCK = {"SH": fcntl.LOCK_SH, "EX": fcntl.LOCK_EX, "UN": fcntl.LOCK_UN}
fd = os.open(sys.argv[1], os.O_RDWR)
fd2 = None
print("pid", os.getpid(), flush=True)
for line in sys.stdin:
    w = line.split()
    try:
        if w[0] == "alarm":          # alarm SECS CMD...: the command, a SIGALRM after SECS
            signal.alarm(int(w[1]))
            w = w[2:]
        if w[0] == "flock":
            op = FLOCK[w[1]] | (fcntl.LOCK_NB if "nb" in w[2:] else 0)
            fcntl.flock(fd, op)
            out = "ok"
        elif w[0] in ("setlk", "setlkw", "getlk"):
            cmd = {"setlk": fcntl.F_SETLK, "setlkw": fcntl.F_SETLKW, "getlk": fcntl.F_GETLK}[w[0]]
            arg = struct.pack(FL, TYPES[w[1]], os.SEEK_SET, int(w[2]), int(w[3]), 0)
            res = fcntl.fcntl(fd, cmd, arg)
            t, _, start, length, pid = struct.unpack(FL, res)
            out = "ok" if w[0] != "getlk" else (
                "UN" if t == fcntl.F_UNLCK else f"{NAMES[t]} {start} {length} pid {pid}")
        elif w[0] == "open2":
            fd2 = os.open(sys.argv[1], os.O_RDONLY)
            out = "ok"
        elif w[0] == "close2":
            os.close(fd2)
            out = "ok"
        elif w[0] == "close":
            os.close(fd)
            out = "ok"
        else:
            out = "unknown " + w[0]
        signal.alarm(0)
    except Alarm:
        out = "eintr"
    except OSError as e:
        signal.alarm(0)
        out = "err " + {errno.EDEADLK: "EDEADLK", errno.EAGAIN: "EAGAIN"}.get(
            e.errno, errno.errorcode.get(e.errno, str(e.errno)))
    print(out, flush=True)
"""


class Agent:
    """A process on a node holding the test file open, driven line by line."""

    def __init__(self, m, path, name):
        self.name = name
        self.p = subprocess.Popen(m.node.enter() + ["python3", "-c", AGENT, path],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1)
        self.fd, self.buf = self.p.stdout.fileno(), b""
        first = self.line(20)
        if not first or not first.startswith("pid "):
            fail(f"{name}: agent did not start: {first!r} {self.p.stderr.read() if self.p.poll() is not None else ''}")
        self.pid = int(first.split()[1])

    def line(self, timeout):
        """The next answer line, or None after timeout seconds."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                fail(f"{self.name}: agent ended ({self.p.wait()}): {self.p.stderr.read()}")
            self.buf += chunk
        s, self.buf = self.buf.split(b"\n", 1)
        return s.decode().strip()

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def do(self, cmd, want, timeout=15):
        self.send(cmd)
        got = self.line(timeout)
        if got != want:
            fail(f"{self.name}: {cmd}: {got!r}, not {want!r}")

    def waits(self, cmd, secs=1.5):
        """cmd must not be answered within secs (it waits for a lock)."""
        self.send(cmd)
        got = self.line(secs)
        if got is not None:
            fail(f"{self.name}: {cmd} answered {got!r} instead of waiting")

    def answers(self, want, timeout=15):
        got = self.line(timeout)
        if got != want:
            fail(f"{self.name}: a waiting request answered {got!r}, not {want!r}")

    def eventually(self, cmd, want, timeout=10):
        """cmd answers want within timeout seconds of retries (releases the
        kernel sends after a close arrive a moment later)."""
        deadline = time.time() + timeout
        while True:
            self.send(cmd)
            got = self.line(15)
            if got == want:
                return
            if time.time() > deadline:
                fail(f"{self.name}: {cmd}: still {got!r} after {timeout} s, not {want!r}")
            time.sleep(0.2)

    def kill(self):
        self.p.kill()
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.stdin.close()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def one_each(n1, n2, n3, path):
    """An agent on each node, named after it."""
    return (Agent(m, path, f"n{i + 1}") for i, m in enumerate((n1, n2, n3)))


def flocks(n1, n2, n3, path):
    a1, a2, a3 = one_each(n1, n2, n3, path)
    a1.do("flock EX nb", "ok")
    a2.do("flock EX nb", "err EAGAIN")  # EWOULDBLOCK is EAGAIN on Linux
    a3.waits("flock EX")
    a1.do("flock UN", "ok")
    a3.answers("ok")
    a2.do("flock SH nb", "err EAGAIN")
    a3.do("flock UN", "ok")
    for a in (a1, a2, a3):
        a.do("flock SH nb", "ok")
    a2.do("flock UN", "ok")
    a3.do("flock UN", "ok")
    b1 = Agent(n1, path, "n1'")
    b1.do("flock SH nb", "ok")  # beside a1's shared lock
    b1.do("flock EX nb", "err EAGAIN")  # a process of its own node is in the way
    a1.do("close", "ok")  # the last close lets go of a1's lock
    b1.eventually("flock EX nb", "ok")
    a2.do("flock SH nb", "err EAGAIN")
    b1.do("close", "ok")
    a2.eventually("flock EX nb", "ok")
    a2.do("flock UN", "ok")
    for a in (a1, a2, a3, b1):
        a.stop()
    print("1. flock: EX on n1 refused LOCK_NB on n2 (EWOULDBLOCK) and held LOCK_EX on n3 "
          "until unlocked; SH on all three; two processes on n1 conflict; close releases")


def ranges(n1, n2, n3, path):
    a1, a2, a3 = one_each(n1, n2, n3, path)
    b1 = Agent(n1, path, "n1'")
    a1.do("setlk WR 0 100", "ok")
    a2.do("setlk WR 100 100", "ok")  # disjoint: both held
    a2.do("setlk RD 50 100", "err EAGAIN")
    a2.do("getlk WR 0 10", "WR 0 100 pid 0")  # another node's lock: pid 0
    b1.do("getlk RD 150 1", "WR 100 100 pid 0")
    b1.do("getlk RD 10 1", f"WR 0 100 pid {a1.pid}")  # this node's: the holder's pid
    a1.do("getlk WR 0 100", "UN")  # its own lock is never in its way
    a3.waits("setlkw WR 150 10")
    a2.do("setlk UN 100 100", "ok")
    a3.answers("ok")
    # a hole in n1's range: n2 may lock it; both sides stay n1's
    a1.do("setlk UN 40 20", "ok")
    a2.do("setlk WR 45 5", "ok")
    a2.do("setlk WR 39 1", "err EAGAIN")
    a2.do("setlk WR 60 1", "err EAGAIN")
    b1.do("getlk WR 0 200", f"WR 0 40 pid {a1.pid}")
    # a1 waits for a2, which would wait for a1: a deadlock, refused
    a1.waits("setlkw WR 45 1")
    a2.do("setlkw WR 0 1", "err EDEADLK")
    a2.do("setlk UN 45 5", "ok")
    a1.answers("ok")
    # n1 holds 0-39, 45 and 60-99 now: 40-44 is free
    a2.do("setlk WR 40 5", "ok")
    a2.do("setlk UN 40 5", "ok")
    # closing any descriptor of the file drops the process's locks (POSIX)
    a1.do("open2", "ok")
    a1.do("close2", "ok")
    a2.do("setlk WR 0 100", "ok")
    a2.do("setlk UN 0 0", "ok")
    a3.do("setlk UN 0 0", "ok")
    for a in (a1, a2, a3, b1):
        a.stop()
    print("2. fcntl: disjoint ranges on n1 and n2 held, overlaps refused (EAGAIN); F_GETLK "
          "reports the lock (pid 0 from another node); F_SETLKW on n3 waited; a hole split a "
          "range; EDEADLK; closing a descriptor dropped the process's locks")


def killed_holder(n1, n2, n3, path):
    a1, a2, a3 = one_each(n1, n2, n3, path)
    a1.do("setlk WR 0 0", "ok")
    a1.do("flock EX", "ok")
    a2.waits("setlkw RD 10 1")
    a3.waits("flock SH")
    a1.kill()
    a2.answers("ok")
    a3.answers("ok")
    a2.stop()
    a3.stop()
    print("3. a holder SIGKILLed on n1 freed its POSIX and flock locks for the waiters on "
          "n2 and n3")


def interrupted(n1, n2, n3, path):
    a1, a2, a3 = one_each(n1, n2, n3, path)
    a2.do("setlk WR 0 0", "ok")
    a2.do("flock EX", "ok")
    t = time.time()
    a3.do("alarm 1 setlkw WR 0 1", "eintr")
    a3.do("alarm 1 flock EX", "eintr")
    took = time.time() - t
    # nothing of the interrupted requests is left: the next holder is n1
    a2.do("setlk UN 0 0", "ok")
    a2.do("flock UN", "ok")
    a1.do("setlk WR 0 1", "ok")
    a1.do("flock EX nb", "ok")
    for a in (a1, a2, a3):
        a.stop()
    print(f"4. SIGALRM interrupted a waiting F_SETLKW and LOCK_EX on n3 with EINTR "
          f"({took:.1f} s for both); nothing was left of them")


def local(n1, n3, path):
    a1 = Agent(n1, path, "n1")
    a1.do("flock EX", "ok")
    a1.do("setlk WR 0 0", "ok")
    n3.umount()
    n3.must_mount("localflocks")
    a3 = Agent(n3, path, "n3 (localflocks)")
    a3.do("flock EX nb", "ok")
    a3.do("setlk WR 0 0", "ok")
    b3 = Agent(n3, path, "n3' (localflocks)")
    b3.do("flock EX nb", "err EAGAIN")  # still locks among n3's own processes
    a3.stop()
    b3.stop()
    # back in the group: n3 joins while n1 holds locks, and is given them
    n3.umount()
    n3.must_mount()
    a3 = Agent(n3, path, "n3 (joined)")
    a3.do("flock EX nb", "err EAGAIN")
    a3.do("getlk RD 5 1", "WR 0 0 pid 0")
    a1.stop()
    a3.eventually("flock EX nb", "ok")
    a3.stop()
    print("5. n3 with localflocks: its locks are its own (n1's do not stop them, its own "
          "processes still conflict); mounted again without it, n3 was given n1's locks")


def main():
    ctl, _ = shared_volume_args(__doc__)
    start = time.time()
    with shared_volume(ctl, "ocfs2d-flock-", 128 << 20, ["-b", "4096", "-J", "size=4M"]) as (
            img, _, (n1, n2, n3)):
        for m in (n1, n2, n3):
            m.must_mount()
        path = os.path.join(n1.mnt, "locked")
        n1.sh(f"echo data > {path}")

        flocks(n1, n2, n3, path)
        ranges(n1, n2, n3, path)
        killed_holder(n1, n2, n3, path)
        interrupted(n1, n2, n3, path)
        local(n1, n3, path)

        for m in (n3, n2, n1):
            m.umount()
        fsck_clean(img, "after every unmount")
        print(f"6. all unmounted: fsck.ocfs2 -fn clean ({time.time() - start:.0f} s in all)")
    print("PASS")


if __name__ == "__main__":
    main()
