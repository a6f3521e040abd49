# SPDX-License-Identifier: GPL-2.0-or-later
"""The runner of the cases that mount (the fuse, dbus and ra suites).

A test is a function case(env, chk).  env makes volumes (Env.volume) and
worker processes (Env.fork); chk counts checks (Check.ok/eq/err).  main()
skips (77) without root, /dev/fuse or fsck.ocfs2, arms a watchdog that
aborts every FUSE connection and exits if the case hangs, and prints each
daemon's log when anything failed.
"""

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

from o2test.check import Check
from o2test.proc import SKIP, sanitizer_report, which
from o2test.volume import Volume, abort_connection


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
                abort_connection(v.conn, v.mnt)
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
