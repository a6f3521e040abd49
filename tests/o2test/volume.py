# SPDX-License-Identifier: GPL-2.0-or-later
"""Volumes: image files formatted offline (Image) and judged by
fsck.ocfs2 and debugfs.ocfs2, and the same served by a foreground ocfs2d on
a mount point (Volume); helpers for the kernel's view of mounts."""

import os
import signal
import subprocess
import time

from o2test.check import Failure
from o2test.proc import run, sanitizer_report, which


def parse_size(s):
    """A size in bytes: an int, or a string with an optional K/M/G suffix."""
    if isinstance(s, int):
        return s
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def make_image(path, size):
    """A fresh sparse file of size (see parse_size) at path."""
    if os.path.exists(path):
        os.unlink(path)
    with open(path, "wb") as f:
        f.truncate(parse_size(size))
    return path


# ---- mounts ----

def _unescape(s):
    return s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_entry(mnt):
    """(fstype, connection id) of the topmost mount at mnt, or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            parts = left.split()
            if len(parts) < 5 or _unescape(parts[4]) != mnt:
                continue
            major, minor = (int(x) for x in parts[2].split(":"))
            found = (right.split()[0], minor | (major << 20))
    return found


def abort_connection(conn, mnt):
    """Abort FUSE connection conn if it is still the one mounted at mnt.
    Connection numbers are reused as soon as a connection ends: a stale one
    may be another test's mount by now (a node's in the cluster suite)."""
    e = mount_entry(mnt)
    if e is None or e[1] != conn:
        return
    try:
        with open("/sys/fs/fuse/connections/%d/abort" % conn, "w") as f:
            f.write("1")
    except OSError:
        pass


def lazy_umount(mnt):
    subprocess.run(["umount", "-l", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- volumes ----

class Image:
    """An image file of size bytes formatted by mkfs_argv (the image's path
    appended; Failure unless it exits 0), and what fsck.ocfs2 -fn said of
    the fresh volume: fresh_rc, baseline."""

    def __init__(self, img, size, mkfs_argv):
        self.img = img
        make_image(img, size)
        run(list(mkfs_argv) + [img], check=True)
        self.fresh_rc, self.baseline = self.fsck_output()

    def fsck_output(self):
        """(exit status, output) of fsck.ocfs2 -fn on the image."""
        return run([which("fsck.ocfs2"), "-fn", self.img])

    def rdump(self, path, dest):
        """debugfs.ocfs2 rdump of path into the directory dest; returns
        (exit status, output, the dumped copy's path: present if it worked)."""
        rc, out = run([which("debugfs.ocfs2"), "-R", "rdump %s %s" % (path, dest), self.img])
        return rc, out, os.path.join(dest, os.path.basename(path.rstrip("/")))


class Volume(Image):
    """An image file, its mount point and the foreground ocfs2d serving it.
    mkfs: "ctl" (ocfs2ctl format, local), "pcmk" (ocfs2ctl format, a
    clustered volume with two slots) or else mkfs.ocfs2 with mkfs_args."""

    def __init__(self, env, name, size="256M", mkfs="ctl", mkfs_args=("-b", "4096", "-C", "4096", "-J", "size=8M")):
        self.env, self.name = env, name
        self.mnt = os.path.join(env.tmp, name + ".mnt")
        self.logpath = os.path.join(env.tmp, name + ".log")
        self.proc = None
        self.conn = None
        self.mounts = 0
        os.mkdir(self.mnt)
        if mkfs == "ctl":
            argv = [env.ctl, "format", "-M", "local", "-J", "size=4M"]
        elif mkfs == "pcmk":  # a clustered volume with two slots
            argv = [env.ctl, "format", "-q", "--cluster-stack=pcmk", "--cluster-name=fusetest",
                    "-b", "4096", "-N", "2", "-J", "size=4M"]
        else:  # the real mkfs.ocfs2, 4K blocks and clusters unless mkfs_args say otherwise
            argv = [which("mkfs.ocfs2"), "-q", "-F", "-M", "local", "-N", "1"] + list(mkfs_args)
        Image.__init__(self, os.path.join(env.tmp, name + ".img"), size, argv)
        if self.fresh_rc != 0:
            raise Failure("fsck.ocfs2 -fn on the fresh volume exited %d:\n%s" % (self.fresh_rc, self.baseline))
        env.volumes.append(self)

    def log_text(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def mounted(self):
        e = mount_entry(self.mnt)
        return e is not None and e[0] == "fuse.ocfs2"

    def mount(self, opts=None, timeout=30, extra_env=None, first_errors=()):
        """extra_env: variables added to this daemon's environment only;
        first_errors: errnos the first request may be answered with (EIO
        from a failing disk, ENOMEM from a failing allocation)."""
        if self.proc and self.proc.poll() is None:
            raise Failure("%s: a daemon still runs" % self.name)
        self.mounts += 1
        # FUSE_TEST_MOUNT_OPTS: options every mount of the case adds (a
        # transport variant of the whole case, e.g. uring)
        extra = os.environ.get("FUSE_TEST_MOUNT_OPTS", "")
        opts = ",".join(o for o in (opts, extra) if o)
        argv = [self.env.daemon, "-f"] + (["-o", opts] if opts else []) + [self.img, self.mnt]
        denv = dict(self.env.daemon_env, **(extra_env or {}))
        with open(self.logpath, "a") as lf:
            lf.write("=== mount %d: %s%s\n" % (self.mounts, " ".join(argv), "".join(
                " %s=%s" % kv for kv in sorted((extra_env or {}).items()))))
            lf.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env=denv)
        deadline = time.time() + timeout
        while time.time() < deadline:
            # its log says so once the kernel has the mount (a dead daemon's
            # mount may still be there until the new one detaches it)
            e = mount_entry(self.mnt) if ": mounted on " in self.log_text().rsplit("=== mount", 1)[-1] else None
            if e and e[0] == "fuse.ocfs2":
                self.conn = e[1]
                # the first request answered: the session loop runs
                try:
                    os.stat(self.mnt)
                except OSError as e:
                    if e.errno not in first_errors:
                        raise
                if "uring" in extra.split(","):
                    self.expect_log("serving through io_uring", deadline)
                return
            if self.proc.poll() is not None:
                raise Failure("%s: ocfs2d exited %d before mounting" % (self.name, self.proc.returncode))
            time.sleep(0.02)
        raise Failure("%s: not mounted after %ds" % (self.name, timeout))

    def expect_log(self, text, deadline):
        """Wait until this mount's part of the log says text."""
        while text not in self.log_text().rsplit("=== mount", 1)[-1]:
            if time.time() > deadline or self.proc.poll() is not None:
                raise Failure("%s: the daemon's log never said %r" % (self.name, text))
            time.sleep(0.02)

    def umount(self, timeout=60, judge=True):
        """Unmount with umount(8) (retrying while busy), wait for the daemon:
        exit status 0 and a clean close in its log (judge=False: only wait,
        and return the exit status for the caller to judge)."""
        deadline = time.time() + timeout
        while True:
            p = subprocess.run(["umount", self.mnt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if p.returncode == 0:
                break
            if time.time() > deadline:
                raise Failure("%s: umount failed: %s" % (self.name, p.stdout.decode(errors="replace")))
            time.sleep(0.2)
        return self.wait_exit(max(5, deadline - time.time()), judge)

    def wait_exit(self, timeout=60, judge=True):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise Failure("%s: ocfs2d still runs %ds after the unmount" % (self.name, timeout))
        self.conn = None
        if not judge:
            return rc
        if rc != 0:
            raise Failure("%s: ocfs2d exited %d" % (self.name, rc))
        tail = self.log_text().rsplit("=== mount", 1)[-1]
        # the warning a nocluster mount must give is asked for, not a fault
        tail = "\n".join(ln for ln in tail.splitlines() if "WITHOUT the cluster (nocluster)" not in ln)
        if "(clean)" not in tail:
            raise Failure("%s: ocfs2d did not report a clean unmount" % self.name)
        if "WARNING" in tail or "CRITICAL" in tail or "ERROR" in tail or sanitizer_report(tail):
            raise Failure("%s: ocfs2d logged a warning or a sanitizer report" % self.name)

    def sigterm(self, timeout=60):
        self.proc.send_signal(signal.SIGTERM)
        self.wait_exit(timeout)
        if self.mounted():
            raise Failure("%s: still mounted after SIGTERM" % self.name)

    def kill(self, detach=True):
        """SIGKILL the daemon and (detach) detach its dead mount."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        if detach:
            lazy_umount(self.mnt)
        self.conn = None
        with open(self.logpath, "a") as lf:
            lf.write("=== (killed with SIGKILL)\n")

    def fsck(self, chk, what=""):
        """fsck.ocfs2 -fn must print what it printed for the fresh volume."""
        rc, out = run([self.env.fsck, "-fn", self.img])
        good = chk.ok(rc == 0 and out == self.baseline,
                      "%s: fsck.ocfs2 -fn %s(exit %d) differs from the fresh volume's:\n%s" % (
                          self.name, what + " " if what else "", rc, out))
        if not good:
            self.env.show_logs = True
        return good

    def cleanup(self):
        if self.conn is not None:
            abort_connection(self.conn, self.mnt)
        for _ in range(3):
            if not self.mounted():
                break
            lazy_umount(self.mnt)
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
