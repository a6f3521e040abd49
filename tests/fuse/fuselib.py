# SPDX-License-Identifier: GPL-2.0-or-later
"""The FUSE suite's harness: volumes in a temporary directory, ocfs2d
mounts that are always torn down (even on failure or a hang), the
fsck.ocfs2 judge, tree snapshots and small syscall helpers (ctypes) that
Python's os module lacks.

A test is a function case(env, chk).  env makes volumes (Env.volume) and
worker processes (Env.fork); chk counts checks (Check.ok/eq/err).  main()
skips (77) without root, /dev/fuse or fsck.ocfs2, arms a watchdog that
aborts every FUSE connection and exits if the case hangs, and prints each
daemon's log when anything failed.
"""

import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SKIP = 77
TOOLS_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin"


def which(tool):
    return shutil.which(tool, path=TOOLS_PATH)


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, flush=True)


class Failure(Exception):
    pass


class Check:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def ok(self, cond, what):
        self.count += 1
        if not cond:
            self.failures += 1
            print("FAIL: " + what, flush=True)
        return bool(cond)

    def eq(self, got, want, what):
        return self.ok(got == want, "%s: got %r, want %r" % (what, _short(got), _short(want)))

    def err(self, fn, want, what):
        """fn() must fail with errno want (an int or a tuple of them)."""
        wants = want if isinstance(want, tuple) else (want,)
        try:
            r = fn()
        except OSError as e:
            return self.ok(e.errno in wants, "%s: got %s, want %s" % (
                what, errno.errorcode.get(e.errno, e.errno),
                "/".join(errno.errorcode[w] for w in wants)))
        return self.ok(False, "%s: succeeded (%r), want %s" % (
            what, _short(r), "/".join(errno.errorcode[w] for w in wants)))

    def noerr(self, fn, what):
        try:
            return fn()
        except OSError as e:
            self.ok(False, "%s: %s" % (what, e))
            return None


def _short(v):
    if isinstance(v, (bytes, bytearray)) and len(v) > 64:
        return "%s...(%d bytes, sha %s)" % (bytes(v[:32]), len(v), hashlib.sha256(v).hexdigest()[:12])
    if isinstance(v, str) and len(v) > 200:
        return v[:200] + "...(%d chars)" % len(v)
    return v


def tool_env(env=None):
    """The environment for the tools (ocfs2-tools, ocfs2ctl): meson's
    MALLOC_PERTURB_ stays with the daemon, not with them - it makes
    fsck.ocfs2 ten times slower."""
    e = dict(env or os.environ, PATH=TOOLS_PATH)
    e.pop("MALLOC_PERTURB_", None)
    return e


def run(argv, check=False, timeout=300, env=None):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout, env=tool_env(env))
    out = p.stdout.decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise Failure("%s exited %d:\n%s" % (" ".join(argv), p.returncode, out))
    return p.returncode, out


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


def abort_connection(conn):
    try:
        with open("/sys/fs/fuse/connections/%d/abort" % conn, "w") as f:
            f.write("1")
    except OSError:
        pass


def lazy_umount(mnt):
    subprocess.run(["umount", "-l", mnt], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- volumes ----

class Volume:
    """An image file, its mount point and the foreground ocfs2d serving it."""

    def __init__(self, env, name, size="256M", mkfs="ctl", mkfs_args=("-b", "4096", "-C", "4096", "-J", "size=8M")):
        self.env, self.name = env, name
        self.img = os.path.join(env.tmp, name + ".img")
        self.mnt = os.path.join(env.tmp, name + ".mnt")
        self.logpath = os.path.join(env.tmp, name + ".log")
        self.proc = None
        self.conn = None
        self.mounts = 0
        os.mkdir(self.mnt)
        with open(self.img, "wb") as f:
            f.truncate(_parse_size(size))
        if mkfs == "ctl":
            run([env.ctl, "format", "-M", "local", "-J", "size=4M", self.img], check=True)
        elif mkfs == "pcmk":  # a clustered volume with two slots
            run([env.ctl, "format", "-q", "--cluster-stack=pcmk", "--cluster-name=fusetest",
                 "-b", "4096", "-N", "2", "-J", "size=4M", self.img], check=True)
        else:  # the real mkfs.ocfs2, 4K blocks and clusters unless mkfs_args say otherwise
            run([which("mkfs.ocfs2"), "-q", "-F", "-M", "local", "-N", "1"] + list(mkfs_args) +
                [self.img], check=True)
        rc, self.baseline = run([env.fsck, "-fn", self.img])
        if rc != 0:
            raise Failure("fsck.ocfs2 -fn on the fresh volume exited %d:\n%s" % (rc, self.baseline))
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
            abort_connection(self.conn)
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


def preload_env(daemon, module):
    """LD_PRELOAD for module in daemon: after the ASan runtime when the
    daemon links it (ASan insists on being first in the library list)."""
    first = []
    rc, out = run(["ldd", daemon])
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libasan.so") and len(parts) >= 3 and parts[1] == "=>":
            first.append(parts[2])
    return {"LD_PRELOAD": " ".join(first + [module])}


def sanitizer_report(text):
    return "Sanitizer" in text or "runtime error:" in text


def _parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


# ---- the environment of one case ----

class Env:
    def __init__(self, daemon, ctl):
        self.daemon, self.ctl = os.path.abspath(daemon), os.path.abspath(ctl)
        self.fsck = which("fsck.ocfs2")
        self.debugfs = which("debugfs.ocfs2")
        self.tmp = tempfile.mkdtemp(prefix="ocfs2d-fuse-")
        self.volumes = []
        self.children = []
        self.cleanups = []
        self.show_logs = False
        self.daemon_env = dict(os.environ)
        self.daemon_env.setdefault("G_MESSAGES_DEBUG", "")

    def volume(self, name, **kw):
        return Volume(self, name, **kw)

    def fork(self, fn, *args):
        """Run fn(*args) in a child process; its exit status is 0 if fn returned."""
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                fn(*args)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        self.children.append(pid)
        return pid

    def wait(self, pid, timeout=None):
        """Exit status of child pid (waits at most timeout seconds: None if still running)."""
        deadline = None if timeout is None else time.time() + timeout
        while True:
            p, st = os.waitpid(pid, 0 if deadline is None else os.WNOHANG)
            if p == pid:
                self.children.remove(pid)
                return os.waitstatus_to_exitcode(st)
            if time.time() > deadline:
                return None
            time.sleep(0.05)

    def cleanup(self):
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
        self.children = []
        for fn in self.cleanups:
            try:
                fn()
            except Exception:
                traceback.print_exc()
        for v in self.volumes:
            v.cleanup()

    def print_logs(self):
        for v in self.volumes:
            print("---- ocfs2d log for %s (%s) ----" % (v.name, v.logpath))
            print(v.log_text()[-20000:])
        for fn in getattr(self, "extra_logs", []):
            print(fn())
        sys.stdout.flush()


def main(cases):
    if len(sys.argv) != 4 or sys.argv[3] not in cases:
        print("usage: %s OCFS2D OCFS2CTL {%s}" % (sys.argv[0], ",".join(cases)), file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("SKIP: not root")
        return SKIP
    if not os.path.exists("/dev/fuse"):
        print("SKIP: no /dev/fuse")
        return SKIP
    if not which("fsck.ocfs2"):
        print("SKIP: no fsck.ocfs2 (ocfs2-tools)")
        return SKIP
    if "uring" in os.environ.get("FUSE_TEST_MOUNT_OPTS", "").split(",") and \
            not os.path.exists("/sys/module/fuse/parameters/enable_uring"):
        print("SKIP: this kernel's FUSE has no io_uring transport (Linux 6.14+)")
        return SKIP
    os.umask(0)
    env = Env(sys.argv[1], sys.argv[2])
    chk = Check()
    limit = float(os.environ.get("FUSE_TEST_WATCHDOG", "540"))

    def watchdog():
        print("FAIL: watchdog: the case still runs after %ds; aborting its mounts" % limit, flush=True)
        for v in env.volumes:
            if v.conn is not None:
                abort_connection(v.conn)
        env.print_logs()
        env.cleanup()
        os._exit(1)

    dog = threading.Timer(limit, watchdog)
    dog.daemon = True
    dog.start()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    crashed = False
    start = time.time()
    try:
        cases[sys.argv[3]](env, chk)
    except BaseException as e:
        crashed = True
        print("FAIL: %s: %s" % (type(e).__name__, e), flush=True)
        traceback.print_exc()
    finally:
        dog.cancel()
        env.cleanup()
    for v in env.volumes:
        if sanitizer_report(v.log_text()):
            chk.ok(False, "%s: a sanitizer report in the daemon's log" % v.name)
    failed = crashed or chk.failures > 0
    if failed or env.show_logs:
        env.print_logs()
    print("%s: %d checks, %d failed%s, %.1fs" % (sys.argv[3], chk.count, chk.failures,
                                                 ", aborted" if crashed else "", time.time() - start))
    if not failed:
        shutil.rmtree(env.tmp, ignore_errors=True)
    else:
        print("kept %s" % env.tmp)
    return 1 if failed else 0


# ---- tree snapshots ----

def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def snapshot(root):
    """Everything persistent about the tree under root (not atime)."""
    out = {}

    def one(p, rel):
        st = os.lstat(p)
        e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink,
             "size": st.st_size, "ino": st.st_ino, "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns,
             "blocks": st.st_blocks}
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            e["rdev"] = st.st_rdev
        if stat.S_ISREG(st.st_mode):
            e["sha"] = file_sha(p)
        if stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(p)
        out[rel] = e

    one(root, ".")
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            one(p, os.path.relpath(p, root))
    return out


def compare_snapshots(chk, before, after, what):
    ok = chk.ok(set(before) == set(after), "%s: names differ: only before %s, only after %s" % (
        what, sorted(set(before) - set(after))[:20], sorted(set(after) - set(before))[:20]))
    bad = [(k, before[k], after[k]) for k in sorted(set(before) & set(after)) if before[k] != after[k]]
    for k, b, a in bad[:20]:
        diff = {f: (b.get(f), a.get(f)) for f in set(b) | set(a) if b.get(f) != a.get(f)}
        chk.ok(False, "%s: %s changed: %s" % (what, k, diff))
    return ok and not bad


# ---- syscalls os lacks ----

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
