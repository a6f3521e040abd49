#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Benchmark ocfs2d against fuse2fs and kernel ext4, in one run.

The same workloads run, one filesystem after the other, on:

  ocfs2d   an OCFS2 volume in an image file, served by the ocfs2d FUSE daemon
  fuse2fs  an ext4 image file of the same size, served by fuse2fs (FUSE)
  floor    fuse-overlayfs over a tmpfs: a FUSE filesystem whose storage
           costs nothing, i.e. what FUSE itself allows on this machine
  ext4     an ext4 image file of the same size on a loop device, kernel driver

and the script prints one table with every figure and the throughput ratios
(ocfs2d/fuse2fs, ocfs2d/floor, ocfs2d/ext4: above 1 means ocfs2d is faster),
and writes the same as JSON.  See bench/README.md.  Run as root.
"""

import argparse
import ctypes
import json
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ALL_FS = ("ocfs2d", "ocfs2d-wb", "fuse2fs", "floor", "ext4")
# ocfs2d as mounted by default, and with the kernel's write-back cache
# (-o writeback_cache: written pages handed over in batches)
OCFS2D_FS = ("ocfs2d", "ocfs2d-wb")
ALL_WORKLOADS = ("request", "seq", "randwrite", "smallfiles", "untar")
# The database rows, run on their own with --db: SQLite, fsync-bound and
# O_DIRECT fio jobs, PostgreSQL's pgbench.
DB_WORKLOADS = ("sqlite", "syncwrite", "direct", "pgbench")
KNOWN_WORKLOADS = ALL_WORKLOADS + DB_WORKLOADS
MB = 1000 * 1000
MiB = 1024 * 1024
GiB = 1024 * MiB

# Full and quick sizes.  Every workload is bounded in time as well as size,
# so that a very slow (or hung) filesystem cannot make a run last hours.
PROFILES = {
    "full": dict(
        volume=4 * GiB,
        seq_size=1 * GiB, seq_cap=300,
        rand_size=256 * MiB, rand_runtime=30, rand_fill_cap=180,
        files=10000, dirs=100, phase_cap=300,
        tar_sources=["/usr/include", "/usr/lib/python3", "/usr/share/locale"],
        tar_min_files=5000, untar_cap=600,
        requests=50000, request_cap=20,
        # database rows (--db)
        sqlite_seconds=8, sqlite_writers=8,
        sync_size=128 * MiB, sync_runtime=10, sync_jobs=16,
        direct_size=256 * MiB, direct_runtime=8,
        pg_scale=10, pg_clients=8, pg_seconds=20, pg_cap=300,
    ),
    "quick": dict(
        volume=1 * GiB,
        seq_size=128 * MiB, seq_cap=15,
        rand_size=16 * MiB, rand_runtime=3, rand_fill_cap=15,
        files=1000, dirs=10, phase_cap=20,
        tar_sources=["/usr/include/linux"],
        tar_min_files=0, untar_cap=60,
        requests=5000, request_cap=5,
        sqlite_seconds=2, sqlite_writers=8,
        sync_size=16 * MiB, sync_runtime=3, sync_jobs=16,
        direct_size=32 * MiB, direct_runtime=3,
        pg_scale=1, pg_clients=8, pg_seconds=5, pg_cap=120,
    ),
}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


def parse_size(text):
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = 1
    for suffix, m in (("K", 1024), ("M", MiB), ("G", GiB), ("T", 1024 * GiB)):
        if text.endswith(suffix):
            mult, text = m, text[:-1]
            break
    try:
        value = int(float(text) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError("bad size: %r" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("size must be positive")
    return value


def human(n):
    for unit, m in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if n >= m:
            return ("%d %s" % (n // m, unit)) if n % m == 0 or n >= 100 * m \
                else "%.1f %s" % (n / m, unit)
    return "%d B" % n


def run(cmd, timeout=120, check=True, env=None, cwd=None):
    """Run a command, capture its output; raise BenchError on failure."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise BenchError("timed out after %ds: %s" % (timeout, shlex.join(cmd)))
    except OSError as e:
        raise BenchError("cannot run %s: %s" % (cmd[0], e))
    if check and p.returncode != 0:
        raise BenchError("%s exited %d: %s" % (
            shlex.join(cmd), p.returncode, tail(p.stderr or p.stdout)))
    return p


def tail(text, lines=6):
    text = (text or "").strip().splitlines()
    return " | ".join(text[-lines:]) if text else "(no output)"


def file_tail(path, lines=8):
    try:
        return tail(Path(path).read_text(errors="replace"), lines)
    except OSError:
        return "(no log)"


_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if _libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "syncfs: " + os.strerror(e))
    finally:
        os.close(fd)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def mount_entry(mnt):
    """The /proc/self/mountinfo fields for the mount at mnt, or None."""
    mnt = str(mnt)
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4].replace("\\040", " ") == mnt:
                found = fields          # the last one is on top
    return found


def wait_for(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Watchdog:
    """Call action() if the block has not finished after seconds."""

    def __init__(self, seconds, action, what):
        self.seconds, self.action, self.what = seconds, action, what
        self.fired = False
        self.timer = None

    def _fire(self):
        self.fired = True
        log("watchdog: %s still running after %ds, aborting the filesystem"
            % (self.what, self.seconds))
        try:
            self.action()
        except Exception as e:  # noqa: BLE001 - best effort
            log("watchdog: abort failed: %s" % e)

    def __enter__(self):
        self.timer = threading.Timer(self.seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        return False


# ---------------------------------------------------------------- backends

class Backend:
    """One filesystem under test: its image, its mount, its checks."""

    name = "?"
    describe = "?"

    def __init__(self, cfg):
        self.cfg = cfg
        self.image = cfg.workdir / ("%s.img" % self.name)
        self.mnt = cfg.workdir / ("mnt-%s" % self.name)
        self.logfile = cfg.workdir / ("%s.log" % self.name)
        self.info = {"image": str(self.image), "mountpoint": str(self.mnt),
                     "errors": []}
        self.mounted = False

    # to implement
    def mkfs(self):
        raise NotImplementedError

    def _mount(self):
        raise NotImplementedError

    def _umount(self):
        raise NotImplementedError

    def fsck(self):
        return None

    def stats(self):
        """The filesystem's own counters (ocfs2d: journal commits and device
        flushes), or None where there are none."""
        return None

    def abort(self):
        """Make a hung filesystem fail its pending requests."""

    def force_cleanup(self):
        """Undo whatever is left (mounts, loop devices, processes)."""
        if mount_entry(self.mnt):
            subprocess.run(["umount", "-l", str(self.mnt)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.mounted = False

    # common
    def make(self):
        self.mnt.mkdir(parents=True, exist_ok=True)
        if self.image.exists():
            self.image.unlink()
        with open(self.image, "wb") as f:
            f.truncate(self.cfg.volume)
        t0 = time.perf_counter()
        self.mkfs()
        self.info["mkfs_seconds"] = round(time.perf_counter() - t0, 3)

    def mount(self):
        if mount_entry(self.mnt):
            raise BenchError("%s is already a mountpoint" % self.mnt)
        t0 = time.perf_counter()
        self._mount()
        self.mounted = True
        self.info.setdefault("mount_seconds", []).append(
            round(time.perf_counter() - t0, 3))

    def umount(self):
        if not self.mounted:
            return
        t0 = time.perf_counter()
        self._umount()
        self.mounted = False
        self.info.setdefault("umount_seconds", []).append(
            round(time.perf_counter() - t0, 3))

    def remount_cold(self):
        """Unmount, drop every cache, mount again: the next phase is cold."""
        self.umount()
        drop_caches()
        self.mount()

    def healthy(self):
        if not self.mounted or not mount_entry(self.mnt):
            return False
        return self.probe()

    def probe(self, timeout=30):
        """statvfs the mountpoint; a filesystem that does not answer within
        timeout seconds is aborted (so that nothing stays blocked on it)."""
        res = {}

        def body():
            try:
                os.statvfs(self.mnt)
                res["ok"] = True
            except OSError as e:
                res["error"] = e
        t = threading.Thread(target=body, daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            self.info["errors"].append("statvfs of %s hung for %ds; aborted"
                                       % (self.mnt, timeout))
            self.abort()
            t.join(10)
            return False
        return res.get("ok", False)

    def umount_path(self):
        """umount with a few retries (a just-killed client may hold files)."""
        last = None
        for _ in range(20):
            p = subprocess.run(["umount", str(self.mnt)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if p.returncode == 0:
                return
            last = p.stdout
            if not mount_entry(self.mnt):
                return
            time.sleep(0.25)
        raise BenchError("cannot unmount %s: %s" % (self.mnt, tail(last)))


class Ext4Backend(Backend):
    name = "ext4"
    describe = "kernel ext4 on a loop device"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.loopdev = None

    def mkfs(self):
        cmd = ["mkfs.ext4", "-F", "-q"] + self.cfg.ext4_mkfs_opts + [str(self.image)]
        self.info["mkfs"] = shlex.join(cmd)
        run(cmd)

    def _mount(self):
        p = run(["losetup", "--find", "--show", str(self.image)])
        self.loopdev = p.stdout.strip()
        self.info["loop_device"] = self.loopdev
        cmd = ["mount", "-t", "ext4"]
        if self.cfg.ext4_opts:
            cmd += ["-o", self.cfg.ext4_opts]
        cmd += [self.loopdev, str(self.mnt)]
        self.info["mount"] = shlex.join(cmd)
        try:
            run(cmd)
        except BenchError:
            self._detach()
            raise

    def _detach(self):
        if self.loopdev:
            subprocess.run(["losetup", "-d", self.loopdev],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.loopdev = None

    def _umount(self):
        self.umount_path()
        self._detach()

    def fsck(self):
        return fsck_run(["e2fsck", "-fn", str(self.image)])

    def force_cleanup(self):
        super().force_cleanup()
        self._detach()
        detach_loops_for(self.image)


class FuseBackend(Backend):
    """A FUSE daemon started in the foreground, so we know its pid and can
    wait for it to finish writing after the unmount."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.proc = None
        self.logf = None
        self.logfile_started = False

    def daemon_cmd(self):
        raise NotImplementedError

    def _mount(self):
        cmd = self.daemon_cmd()
        self.info["mount"] = shlex.join(cmd)
        self.logf = open(self.logfile, "a" if self.logfile_started else "w")
        self.logfile_started = True
        self.logf.write("==== %s: %s\n" % (time.strftime("%H:%M:%S"), shlex.join(cmd)))
        self.logf.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        ok = wait_for(lambda: mount_entry(self.mnt) or self.proc.poll() is not None,
                      self.cfg.mount_timeout)
        if self.proc.poll() is not None:
            rc = self.proc.returncode
            self.proc = None
            raise BenchError("%s exited %d before mounting: %s"
                             % (cmd[0], rc, file_tail(self.logfile)))
        if not ok or not mount_entry(self.mnt):
            self._kill()
            raise BenchError("%s did not mount %s within %ds: %s"
                             % (cmd[0], self.mnt, self.cfg.mount_timeout,
                                file_tail(self.logfile)))
        # The kernel mount exists before the daemon answers: wait for it.
        if not self.probe(self.cfg.mount_timeout):
            self.force_cleanup()
            raise BenchError("%s mounted %s but does not answer: %s"
                             % (cmd[0], self.mnt, file_tail(self.logfile)))

    def unmount_cmd(self):
        return ["umount", str(self.mnt)]

    def unmount_env(self):
        return None

    def _umount(self):
        p = None
        for _ in range(20):
            try:
                p = subprocess.run(self.unmount_cmd(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True,
                                   timeout=self.cfg.umount_timeout, env=self.unmount_env())
            except subprocess.TimeoutExpired:
                self.abort()
                raise BenchError("%s hung for %ds; aborted the FUSE connection"
                                 % (shlex.join(self.unmount_cmd()),
                                    self.cfg.umount_timeout))
            if p.returncode == 0 or not mount_entry(self.mnt):
                break
            time.sleep(0.25)
        else:
            raise BenchError("cannot unmount %s: %s" % (self.mnt, tail(p.stdout)))
        self._wait_exit()

    def _wait_exit(self):
        if self.proc is None:
            return
        try:
            rc = self.proc.wait(timeout=self.cfg.umount_timeout)
        except subprocess.TimeoutExpired:
            self._kill()
            raise BenchError("%s still running %ds after the unmount; killed"
                             % (self.name, self.cfg.umount_timeout))
        self.proc = None
        if rc != 0:
            raise BenchError("%s exited %d after the unmount: %s"
                             % (self.name, rc, file_tail(self.logfile)))

    def _kill(self):
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
            if self.proc.poll() is not None:
                break
            try:
                self.proc.send_signal(sig)
                self.proc.wait(timeout=wait)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        self.proc = None

    def healthy(self):
        if self.proc is not None and self.proc.poll() is not None:
            return False
        return super().healthy()

    def abort(self):
        ent = mount_entry(self.mnt)
        if ent:
            minor = ent[2].split(":")[1]
            conn = Path("/sys/fs/fuse/connections")
            if not (conn / minor).exists():
                subprocess.run(["mount", "-t", "fusectl", "fusectl", str(conn)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                (conn / minor / "abort").write_text("1")
            except OSError:
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def force_cleanup(self):
        if mount_entry(self.mnt):
            subprocess.run(["umount", "-l", str(self.mnt)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=self.cfg.umount_timeout)
            except subprocess.TimeoutExpired:
                self._kill()
            self.proc = None
        super().force_cleanup()
        if self.logf:
            self.logf.close()
            self.logf = None


class Fuse2fsBackend(FuseBackend):
    name = "fuse2fs"
    describe = "ext4 image through fuse2fs (FUSE)"

    def mkfs(self):
        cmd = ["mkfs.ext4", "-F", "-q"] + self.cfg.ext4_mkfs_opts + [str(self.image)]
        self.info["mkfs"] = shlex.join(cmd)
        run(cmd)

    def daemon_cmd(self):
        cmd = ["fuse2fs", "-f", str(self.image), str(self.mnt)]
        opts = [o for o in (self.cfg.fuse2fs_opts, self.cfg.fuse_other_users) if o]
        if opts:
            cmd += ["-o", ",".join(opts)]
        return cmd

    def fsck(self):
        return fsck_run(["e2fsck", "-fn", str(self.image)])


class Ocfs2dBackend(FuseBackend):
    name = "ocfs2d"
    describe = "OCFS2 image through the ocfs2d FUSE daemon"
    extra_opts = ""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.daemon = cfg.build_dir / "daemon" / "ocfs2d"
        self.ctl = cfg.build_dir / "cli" / "ocfs2ctl"

    def mount_opts(self):
        """-o for ocfs2d: --ocfs2d-opts, and what this variant adds."""
        return ",".join(o for o in (self.cfg.ocfs2d_opts, self.extra_opts) if o)

    def format_cmd(self):
        opts = self.cfg.ocfs2_format_opts
        if opts is None:
            # Mirror what mke2fs picks for the ext4 images: 4 KiB blocks and
            # the same journal size, so the comparison is like for like.
            opts = ["-b", "4096", "-C", "4096", "-N", "1",
                    "-J", "size=%dM" % ext4_journal_mib(self.cfg.volume)]
        if self.cfg.ocfs2_mkfs == "mkfs.ocfs2":
            return (["mkfs.ocfs2", "-F", "-q", "-M", "local"] + opts
                    + [str(self.image)])
        return ([str(self.ctl), "format", "--force", "-q", "-M", "local"] + opts
                + [str(self.image)])

    def mkfs(self):
        cmd = self.format_cmd()
        self.info["mkfs"] = shlex.join(cmd)
        run(cmd, timeout=600)

    def daemon_cmd(self):
        cmd = [str(self.daemon), "-f"]
        if self.mount_opts():
            cmd += ["-o", self.mount_opts()]
        return cmd + [str(self.image), str(self.mnt)]

    def _mount(self):
        if self.cfg.ocfs2d_launch == "foreground":
            return super()._mount()
        if self.cfg.ocfs2d_launch == "server":
            return self._mount_server()
        cmd = [str(self.ctl), "mount"]
        if self.mount_opts():
            cmd += ["-o", self.mount_opts()]
        cmd += [str(self.image), str(self.mnt)]
        self.info["mount"] = shlex.join(cmd)
        # The daemon it starts keeps ocfs2ctl's stdout and stderr: a file,
        # not a pipe we would wait on for ever.
        with open(self.logfile, "a" if self.logfile_started else "w") as logf:
            self.logfile_started = True
            logf.write("==== %s: %s\n" % (time.strftime("%H:%M:%S"), shlex.join(cmd)))
            logf.flush()
            try:
                p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                   stderr=subprocess.STDOUT,
                                   timeout=self.cfg.mount_timeout)
            except subprocess.TimeoutExpired:
                raise BenchError("%s timed out after %ds: %s" % (
                    shlex.join(cmd), self.cfg.mount_timeout, file_tail(self.logfile)))
        if p.returncode != 0:
            raise BenchError("%s exited %d: %s" % (shlex.join(cmd), p.returncode,
                                                   file_tail(self.logfile)))
        if not mount_entry(self.mnt):
            raise BenchError("%s returned but %s is not mounted" % (cmd[0], self.mnt))

    def _mount_server(self):
        """A daemon of our own in the foreground (--server on a control
        socket in the workdir, not the machine's; it exits once its volume
        is unmounted), the volume mounted through it with ocfs2ctl: the
        D-Bus API is there for Volume.Statistics."""
        ctl_sock = Path(self.cfg.ocfs2d_control)
        if ctl_sock.exists():
            ctl_sock.unlink()
        cmd = [str(self.daemon), "-f", "--server", "--control", str(ctl_sock),
               "--no-system-bus", "--exit-when-idle"]
        self.logf = open(self.logfile, "a" if self.logfile_started else "w")
        self.logfile_started = True
        self.logf.write("==== %s: %s\n" % (time.strftime("%H:%M:%S"), shlex.join(cmd)))
        self.logf.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.logf,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        if not wait_for(lambda: ctl_sock.exists() or self.proc.poll() is not None,
                        self.cfg.mount_timeout) or self.proc.poll() is not None:
            self._kill()
            raise BenchError("ocfs2d --server did not start: %s" % file_tail(self.logfile))
        mcmd = [str(self.ctl), "mount"]
        if self.mount_opts():
            mcmd += ["-o", self.mount_opts()]
        mcmd += [str(self.image), str(self.mnt)]
        self.info["mount"] = shlex.join(cmd) + " && " + shlex.join(mcmd)
        try:
            run(mcmd, timeout=self.cfg.mount_timeout, env=self.ctl_env())
        except BenchError:
            self._kill()
            raise
        if not self.probe(self.cfg.mount_timeout):
            self.force_cleanup()
            raise BenchError("ocfs2d mounted %s but does not answer: %s"
                             % (self.mnt, file_tail(self.logfile)))

    def ctl_env(self):
        return dict(os.environ, OCFS2D_CONTROL=str(self.cfg.ocfs2d_control))

    def unmount_env(self):
        return self.ctl_env() if self.cfg.ocfs2d_launch == "server" else None

    def stats(self):
        if self.cfg.ocfs2d_launch != "server" or not self.mounted:
            return None
        p = run([str(self.ctl), "stats", "--json", str(self.mnt)], timeout=60, check=False,
                env=self.ctl_env())
        if p.returncode != 0:
            self.info["errors"].append("ocfs2ctl stats: %s" % tail(p.stderr))
            return None
        d = json.loads(p.stdout)
        return {k: v for k, v in d.items() if isinstance(v, int)}

    def unmount_cmd(self):
        if self.ctl.exists() and self.cfg.ocfs2d_launch in ("ctl", "server"):
            return [str(self.ctl), "umount", str(self.mnt)]
        return super().unmount_cmd()

    def _umount(self):
        super()._umount()
        if self.cfg.ocfs2d_launch == "ctl":
            # No pid of ours: wait until no ocfs2d serves this mountpoint.
            if not wait_for(lambda: not daemon_pids(self.daemon, self.mnt),
                            self.cfg.umount_timeout, 0.1):
                raise BenchError("ocfs2d still running %ds after the unmount"
                                 % self.cfg.umount_timeout)

    def force_cleanup(self):
        super().force_cleanup()
        if self.cfg.ocfs2d_launch == "ctl":
            for pid in daemon_pids(self.daemon, self.mnt):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def fsck(self):
        return fsck_run(["fsck.ocfs2", "-fn", str(self.image)])


class FloorBackend(FuseBackend):
    """fuse-overlayfs (a well-tuned low-level libfuse3 filesystem) over a
    tmpfs: every request costs FUSE's round trip and next to nothing else.
    No FUSE filesystem can beat it here, so it shows how much of a gap to
    kernel ext4 is the FUSE transport's and how much is ocfs2d's."""
    name = "floor"
    describe = "fuse-overlayfs over tmpfs (the FUSE floor: no storage work)"

    def __init__(self, cfg):
        super().__init__(cfg)
        self.ram = cfg.workdir / "floor-tmpfs"
        self.info["image"] = "tmpfs at %s" % self.ram

    def make(self):
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.ram.mkdir(parents=True, exist_ok=True)
        if not mount_entry(self.ram):
            run(["mount", "-t", "tmpfs", "-o", "size=%d,mode=0755" % self.cfg.volume,
                 "floor", str(self.ram)])
        for d in ("lower", "upper", "work"):
            (self.ram / d).mkdir(exist_ok=True)

    def daemon_cmd(self):
        opts = "lowerdir={0}/lower,upperdir={0}/upper,workdir={0}/work".format(self.ram)
        if self.cfg.fuse_other_users:
            opts += "," + self.cfg.fuse_other_users
        return ["fuse-overlayfs", "-f", "-o", opts, str(self.mnt)]

    def force_cleanup(self):
        super().force_cleanup()
        if mount_entry(self.ram):
            subprocess.run(["umount", "-l", str(self.ram)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Ocfs2dWbBackend(Ocfs2dBackend):
    name = "ocfs2d-wb"
    describe = "the same, -o writeback_cache (the kernel's write-back cache)"
    extra_opts = "writeback_cache"


BACKENDS = {"ocfs2d": Ocfs2dBackend, "ocfs2d-wb": Ocfs2dWbBackend, "fuse2fs": Fuse2fsBackend,
            "floor": FloorBackend, "ext4": Ext4Backend}


def daemon_pids(daemon, mnt):
    """Pids of processes running `daemon` with `mnt` among their arguments."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == daemon.name.encode() \
                and str(mnt).encode() in argv:
            pids.append(int(d.name))
    return pids


def ext4_journal_mib(volume):
    """The journal size mke2fs gives a volume of 4 KiB blocks."""
    blocks = volume // 4096
    for limit, jblocks in ((32768, 1024), (256 * 1024, 4096), (512 * 1024, 8192),
                           (4096 * 1024, 16384), (8192 * 1024, 32768),
                           (16384 * 1024, 65536), (32768 * 1024, 131072)):
        if blocks < limit:
            return max(4, jblocks * 4 // 1024)
    return 1024


def fsck_run(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"cmd": shlex.join(cmd), "ok": False, "output": str(e)}
    return {"cmd": shlex.join(cmd), "ok": p.returncode == 0, "rc": p.returncode,
            "output": tail(p.stdout, 12)}


def detach_loops_for(image):
    p = subprocess.run(["losetup", "-j", str(image)], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout.splitlines():
        dev = line.split(":", 1)[0]
        if dev.startswith("/dev/loop"):
            subprocess.run(["losetup", "-d", dev], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


# --------------------------------------------------------------- workloads

class Result:
    def __init__(self, key, label, unit):
        self.key, self.label, self.unit = key, label, unit
        self.samples = {}     # fs -> [number or None], one per repetition
        self.details = {}     # fs -> [dict], one per successful repetition
        self.errors = {}      # fs -> [str]
        self.skipped = {}     # fs -> why the workload cannot run there ("n/a")

    def add(self, fs, value, detail=None, error=None, rep=None):
        self.samples.setdefault(fs, []).append(value)
        if value is None and detail and detail.get("skipped"):
            self.skipped[fs] = detail["skipped"]
        if detail is not None:
            self.details.setdefault(fs, []).append(dict(detail, value=value, rep=rep))
        if error:
            self.errors.setdefault(fs, []).append(error)

    @property
    def values(self):
        """Per filesystem: the median of the successful repetitions."""
        out = {}
        for fs, vals in self.samples.items():
            ok = sorted(v for v in vals if v is not None)
            out[fs] = statistics.median(ok) if ok else None
        return out


def fio(fs, cfg, name, args, cap, numjobs=1, direct=False):
    """Run one fio job in the mountpoint; return its JSON job record (with
    several jobs: their sum, --group_reporting)."""
    out = cfg.workdir / ("fio-%s-%s.json" % (fs.name, name))
    if out.exists():
        out.unlink()
    cmd = ["fio", "--name=" + name, "--ioengine=psync", "--direct=%d" % direct,
           "--fallocate=none", "--numjobs=%d" % numjobs, "--output-format=json",
           "--output=" + str(out)] + (["--group_reporting"] if numjobs > 1 else []) + args
    with Watchdog(cap + 120, fs.abort, "fio " + name):
        p = run(cmd, timeout=cap + 180, check=False, cwd=str(fs.mnt))
    text = out.read_text(errors="replace") if out.exists() else ""
    if p.returncode != 0:
        raise BenchError("fio %s exited %d: %s" % (name, p.returncode,
                                                   tail(p.stderr or text)))
    start = text.find("{")
    if start < 0:
        raise BenchError("fio %s wrote no JSON: %s" % (name, tail(p.stderr)))
    job = json.loads(text[start:])["jobs"][0]
    if job.get("error"):
        raise BenchError("fio %s: error %s" % (name, job["error"]))
    return job


def wl_seq(fs, cfg, out):
    """Sequential write of seq_size (1 MiB writes, fsync at the end), then a
    cold sequential read of it after an unmount and drop_caches."""
    p = cfg.profile
    path = fs.mnt / "seq.dat"
    job = fio(fs, cfg, "seqwrite",
              ["--filename=seq.dat", "--rw=write", "--bs=1M",
               "--size=%d" % p["seq_size"], "--end_fsync=1",
               "--runtime=%d" % p["seq_cap"]], p["seq_cap"])
    w = job["write"]
    out["seqwrite"] = (w["bw_bytes"] / MB, {
        "bytes": w["io_bytes"], "runtime_ms": w["runtime"],
        "capped": w["io_bytes"] < p["seq_size"]})
    size = path.stat().st_size
    fs.remount_cold()
    job = fio(fs, cfg, "seqread",
              ["--filename=seq.dat", "--rw=read", "--bs=1M", "--size=%d" % size,
               "--runtime=%d" % p["seq_cap"]], p["seq_cap"])
    r = job["read"]
    out["seqread"] = (r["bw_bytes"] / MB, {
        "bytes": r["io_bytes"], "runtime_ms": r["runtime"],
        "capped": r["io_bytes"] < size})
    path.unlink()
    syncfs(fs.mnt)


def wl_randwrite(fs, cfg, out):
    """4 KiB random overwrites of a rand_size file with an fsync every 32
    writes, for at most rand_runtime seconds.  The file is written in full
    (and fsynced) first, untimed, so the job overwrites allocated blocks."""
    p = cfg.profile
    fio(fs, cfg, "randfill", ["--filename=rand.dat", "--rw=write", "--bs=1M",
                              "--size=%d" % p["rand_size"], "--end_fsync=1"],
        p["rand_fill_cap"])
    job = fio(fs, cfg, "randwrite",
              ["--filename=rand.dat", "--rw=randwrite", "--bs=4k",
               "--size=%d" % p["rand_size"], "--fsync=32", "--randseed=1234",
               "--runtime=%d" % p["rand_runtime"], "--time_based"],
              p["rand_runtime"])
    w = job["write"]
    out["randwrite"] = (w["iops"], {
        "ios": w["total_ios"], "runtime_ms": w["runtime"],
        "MBps": round(w["bw_bytes"] / MB, 2),
        "fsyncs": job.get("sync", {}).get("total_ios"),
        "fsync_mean_us": round(job.get("sync", {}).get("lat_ns", {})
                               .get("mean", 0) / 1000, 1),
        "write_mean_us": round(w.get("clat_ns", {}).get("mean", 0) / 1000, 1),
        "clat_p99_us": round(w.get("clat_ns", {}).get("percentile", {})
                             .get("99.000000", 0) / 1000, 1)})
    (fs.mnt / "rand.dat").unlink()
    syncfs(fs.mnt)


def small_files_plan(cfg):
    p = cfg.profile
    rng = random.Random(20240601)
    per_dir = p["files"] // p["dirs"]
    plan = []
    for d in range(p["dirs"]):
        for i in range(per_dir):
            plan.append(("d%03d" % d, "f%05d" % i, rng.randint(1024, 8192)))
    data = rng.randbytes(8192 + 4096)
    return plan, data


def content(data, name, size):
    off = zlib.crc32(name.encode()) & 0xfff
    return data[off:off + size]


def wl_smallfiles(fs, cfg, out):
    """files small files (1-8 KiB) in dirs directories: create (with a
    syncfs at the end), then - each after an unmount and drop_caches - a
    stat walk, a read of every file (checked), and an unlink of all."""
    p = cfg.profile
    plan, data = small_files_plan(cfg)
    root = fs.mnt / "smallfiles"
    cap = p["phase_cap"]

    def phase(key, body):
        t0 = time.perf_counter()
        deadline = time.monotonic() + cap
        with Watchdog(cap + 120, fs.abort, "small files " + key):
            n, extra = body(deadline)
        dt = time.perf_counter() - t0
        extra.update({"files": n, "seconds": round(dt, 3),
                      "capped": n < len(plan) if key != "stat" else False})
        out[key] = (n / dt if dt > 0 else None, extra)
        return n

    created = []

    def create(deadline):
        os.mkdir(root)
        for d in range(p["dirs"]):
            os.mkdir(root / ("d%03d" % d))
        nbytes = 0
        for i, (d, f, size) in enumerate(plan):
            if i % 64 == 0 and time.monotonic() > deadline:
                break
            path = "%s/%s/%s" % (root, d, f)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, content(data, f + d, size))
            finally:
                os.close(fd)
            created.append((d, f, size))
            nbytes += size
        syncfs(fs.mnt)
        return len(created), {"bytes": nbytes}

    def stat_walk(deadline):
        n = 0
        for d in sorted(os.listdir(root)):
            with os.scandir(root / d) as it:
                for e in it:
                    e.stat(follow_symlinks=False)
                    n += 1
        if n != len(created):
            raise BenchError("stat walk found %d files, %d were created"
                             % (n, len(created)))
        return n, {}

    def read(deadline):
        n = bad = nbytes = 0
        for i, (d, f, size) in enumerate(created):
            if i % 64 == 0 and time.monotonic() > deadline:
                break
            with open("%s/%s/%s" % (root, d, f), "rb", buffering=0) as fh:
                got = fh.read(size + 1)
            nbytes += len(got)
            if got != content(data, f + d, size):
                bad += 1
            n += 1
        if bad:
            raise BenchError("%d of %d small files read back wrong" % (bad, n))
        return n, {"bytes": nbytes}

    def unlink(deadline):
        n = 0
        for i, (d, f, size) in enumerate(created):
            if i % 64 == 0 and time.monotonic() > deadline:
                break
            os.unlink("%s/%s/%s" % (root, d, f))
            n += 1
        if n == len(created):
            for d in range(p["dirs"]):
                os.rmdir(root / ("d%03d" % d))
            os.rmdir(root)
        syncfs(fs.mnt)
        return n, {}

    phase("create", create)
    fs.remount_cold()
    phase("stat", stat_walk)
    fs.remount_cold()
    phase("read", read)
    fs.remount_cold()
    phase("unlink", unlink)


def make_tarball(cfg):
    """The untar source: made once from local trees, then reused."""
    p = cfg.profile
    if cfg.tar_source:
        sources = [cfg.tar_source]
        need = 0
    else:
        sources, need = p["tar_sources"], p["tar_min_files"]
    picked, count = [], 0
    for s in sources:
        if not os.path.isdir(s):
            continue
        picked.append(s)
        count += sum(len(files) for _, _, files in os.walk(s))
        if count >= need:
            break
    if not picked:
        raise BenchError("no source tree for the untar workload among %s" % sources)
    tag = "-".join(s.strip("/").replace("/", "_") for s in picked)
    tarpath = cfg.cache_dir / ("tree-%s.tar" % tag)
    meta = tarpath.with_suffix(".json")
    if tarpath.exists() and meta.exists():
        return tarpath, json.loads(meta.read_text())
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    log("making the untar source %s from %s (once; reused later)"
        % (tarpath, " ".join(picked)))
    tmp = tarpath.with_suffix(".tmp")
    run(["tar", "-cf", str(tmp), "-C", "/"] + [s.lstrip("/") for s in picked],
        timeout=1200)
    files = dirs = other = 0
    with tarfile.open(tmp) as t:
        for m in t:
            if m.isfile():
                files += 1
            elif m.isdir():
                dirs += 1
            else:
                other += 1
    info = {"sources": picked, "files": files, "dirs": dirs, "other": other,
            "bytes": tmp.stat().st_size}
    meta.write_text(json.dumps(info, indent=1) + "\n")
    tmp.rename(tarpath)
    return tarpath, info


def wl_untar(fs, cfg, out):
    """Extract the tarball into the filesystem, then syncfs.  The tarball
    is read into the page cache first, so all filesystems start equal."""
    p = cfg.profile
    tarpath, info = cfg.tarball
    with open(tarpath, "rb") as f:
        while f.read(4 * MiB):
            pass
    dest = fs.mnt / "untar"
    dest.mkdir()
    t0 = time.perf_counter()
    with Watchdog(p["untar_cap"] + 60, fs.abort, "untar"):
        run(["tar", "-xf", str(tarpath), "-C", str(dest)], timeout=p["untar_cap"])
        syncfs(fs.mnt)
    dt = time.perf_counter() - t0
    entries = info["files"] + info["dirs"] + info["other"]
    nondirs = 0
    for top, dirs, files in os.walk(dest):
        for name in dirs + files:
            if not stat.S_ISDIR(os.lstat(os.path.join(top, name)).st_mode):
                nondirs += 1
    if nondirs != info["files"] + info["other"]:
        raise BenchError("untar: %d files and links in the tree, the tarball has %d"
                         % (nondirs, info["files"] + info["other"]))
    out["untar"] = (entries / dt, {
        "entries": entries, "files": info["files"], "seconds": round(dt, 3),
        "MBps": round(info["bytes"] / MB / dt, 2), "tar_bytes": info["bytes"],
        "sources": info["sources"]})


def wl_request(fs, cfg, out):
    """statfs(2) in a loop: on a FUSE filesystem each is one request the
    caller waits for (nothing caches it), so this is the price of one round
    trip plus the least work a daemon can do.  The metadata workloads cost
    a few of these per file: an unlink is three (LOOKUP, UNLINK and the
    directory's GETATTR)."""
    n, cap = 0, cfg.profile["request_cap"]
    t0 = time.perf_counter()
    deadline = time.monotonic() + cap
    while n < cfg.profile["requests"]:
        if n % 256 == 0 and time.monotonic() > deadline:
            break
        os.statvfs(fs.mnt)
        n += 1
    dt = time.perf_counter() - t0
    out["request"] = (n / dt, {"calls": n, "seconds": round(dt, 3),
                               "us_each": round(dt * 1e6 / n, 2)})


# ------------------------------------------------------- database workloads
#
# Each database row is one timed phase; for ocfs2d the daemon's counters
# (Volume.Statistics: journal commits, device flushes) are read before and
# after it, so the JSON and the second table say what one transaction cost
# the journal and the image.

def counted(fs, body):
    """Run body(); return (its result, the ocfs2d counters' growth or None)."""
    before = fs.stats()
    res = body()
    after = fs.stats()
    if not before or not after:
        return res, None
    return res, {k: after[k] - before[k] for k in after if k in before}


def with_costs(detail, delta, transactions):
    """detail plus the counters per transaction (ocfs2d only)."""
    if delta is not None:
        detail["counters"] = delta
        if transactions:
            detail["flushes_per_tx"] = round(delta.get("device_flushes", 0) / transactions, 3)
            detail["commits_per_tx"] = round(delta.get("journal_commits", 0) / transactions, 3)
    return detail


def skip(out, keys, why):
    for k in keys:
        out[k] = (None, {"skipped": why})


def wl_sqlite(fs, cfg, out):
    """SQLite, one small INSERT per transaction, synchronous=FULL: rollback
    journal (journal_mode=DELETE) and WAL, one connection and sqlite_writers
    processes at once, sqlite_seconds each."""
    p = cfg.profile
    keys = ["sqlite_del_1", "sqlite_del_n", "sqlite_wal_1", "sqlite_wal_n"]
    try:
        import sqlite3
    except ImportError:
        skip(out, keys, "python3 has no sqlite3 module")
        return
    worker = REPO / "bench" / "sqlite_writer.py"
    root = fs.mnt / "sqlite"
    root.mkdir()
    for mode, tag in (("DELETE", "del"), ("WAL", "wal")):
        db = root / ("%s.db" % tag)
        con = sqlite3.connect(str(db), isolation_level=None)
        con.execute("PRAGMA journal_mode=%s" % mode)
        con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, writer INTEGER, v BLOB)")
        con.close()
        syncfs(fs.mnt)
        for n, key in ((1, "sqlite_%s_1" % tag), (p["sqlite_writers"], "sqlite_%s_n" % tag)):
            def body():
                start_at = time.time() + 0.5 + 0.05 * n
                procs = [subprocess.Popen([sys.executable, str(worker), str(db),
                                           str(p["sqlite_seconds"]), "%.3f" % start_at, str(i)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True) for i in range(n)]
                res = []
                for pr in procs:
                    try:
                        o, e = pr.communicate(timeout=p["sqlite_seconds"] + 120)
                    except subprocess.TimeoutExpired:
                        for q in procs:
                            q.kill()
                        raise BenchError("sqlite writer did not finish")
                    if pr.returncode != 0:
                        raise BenchError("sqlite writer exited %d: %s" % (pr.returncode, tail(e)))
                    res.append(json.loads(o.strip().splitlines()[-1]))
                return res
            res, delta = counted(fs, body)
            tx = sum(r["tx"] for r in res)
            secs = max(r["seconds"] for r in res)
            out[key] = (tx / secs, with_costs({
                "transactions": tx, "seconds": secs, "writers": n,
                "busy_retries": sum(r["busy"] for r in res),
                "journal_mode": res[0]["mode"]}, delta, tx))
        for f in root.iterdir():
            f.unlink()
    root.rmdir()
    syncfs(fs.mnt)


def fio_sync_detail(job, delta):
    w = job["write"]
    return with_costs({
        "ios": w["total_ios"], "runtime_ms": w["runtime"],
        "sync_mean_us": round(job.get("sync", {}).get("lat_ns", {}).get("mean", 0) / 1000, 1),
        "write_mean_us": round(w.get("clat_ns", {}).get("mean", 0) / 1000, 1),
        "sync_p99_us": round(job.get("sync", {}).get("lat_ns", {}).get("percentile", {})
                             .get("99.000000", 0) / 1000, 1)}, delta, w["total_ios"])


def wl_syncwrite(fs, cfg, out):
    """8 KiB random overwrites with an fdatasync after each (what a database
    log or a synchronous commit does), one job on one file, then sync_jobs
    jobs on a file each, for sync_runtime seconds.  The files are written
    in full and synced first, untimed."""
    p = cfg.profile
    for jobs, key in ((1, "sync_1"), (p["sync_jobs"], "sync_n")):
        name = "sync%d" % jobs
        size = p["sync_size"] if jobs == 1 else max(MiB, p["sync_size"] // jobs)
        fio(fs, cfg, name + "fill", ["--filename_format=%s.$jobnum" % name, "--rw=write",
                                      "--bs=1M", "--size=%d" % size, "--end_fsync=1"],
            p["rand_fill_cap"], numjobs=jobs)
        job, delta = counted(fs, lambda: fio(
            fs, cfg, name, ["--filename_format=%s.$jobnum" % name, "--rw=randwrite",
                            "--bs=8k", "--size=%d" % size, "--fdatasync=1",
                            "--randseed=4321", "--runtime=%d" % p["sync_runtime"],
                            "--time_based"], p["sync_runtime"], numjobs=jobs))
        out[key] = (job["write"]["iops"], fio_sync_detail(job, delta))
        for i in range(jobs):
            (fs.mnt / ("%s.%d" % (name, i))).unlink()
    syncfs(fs.mnt)


def direct_supported(path):
    """Whether the filesystem opens files with O_DIRECT (FUSE filesystems
    may refuse it: EINVAL)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError as e:
        return "O_DIRECT open fails: %s" % os.strerror(e.errno)
    try:
        buf = ctypes.create_string_buffer(8192 + 4096)
        addr = (ctypes.addressof(buf) + 4095) & ~4095
        mem = (ctypes.c_char * 8192).from_address(addr)
        n = _libc.pwrite(fd, mem, 8192, ctypes.c_long(0))
        if n != 8192:
            return "an O_DIRECT write fails: %s" % os.strerror(ctypes.get_errno())
    finally:
        os.close(fd)
        os.unlink(path)
    return None


def wl_direct(fs, cfg, out):
    """8 KiB O_DIRECT random reads, then random writes (no fsync: O_DIRECT
    alone), one job, direct_runtime seconds each, on a file written in full
    and synced first.  A filesystem without O_DIRECT reads n/a."""
    p = cfg.profile
    keys = ["direct_read", "direct_write"]
    why = direct_supported(fs.mnt / "direct.probe")
    if why:
        log("%s: O_DIRECT rows skipped: %s" % (fs.name, why))
        skip(out, keys, why)
        return
    fio(fs, cfg, "directfill", ["--filename=direct.dat", "--rw=write", "--bs=1M",
                                "--size=%d" % p["direct_size"], "--end_fsync=1"],
        p["rand_fill_cap"])
    drop_caches()
    for rw, key, side in (("randread", "direct_read", "read"),
                          ("randwrite", "direct_write", "write")):
        job, delta = counted(fs, lambda: fio(
            fs, cfg, "direct" + side, ["--filename=direct.dat", "--rw=" + rw, "--bs=8k",
                                       "--size=%d" % p["direct_size"], "--randseed=99",
                                       "--runtime=%d" % p["direct_runtime"], "--time_based"],
            p["direct_runtime"], direct=True))
        r = job[side]
        out[key] = (r["iops"], with_costs({
            "ios": r["total_ios"], "runtime_ms": r["runtime"],
            "clat_mean_us": round(r.get("clat_ns", {}).get("mean", 0) / 1000, 1),
            "clat_p99_us": round(r.get("clat_ns", {}).get("percentile", {})
                                 .get("99.000000", 0) / 1000, 1)}, delta, r["total_ios"]))
    (fs.mnt / "direct.dat").unlink()
    syncfs(fs.mnt)


def pg_bindir():
    """PostgreSQL's programs (Debian keeps them out of PATH), newest version."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else None


PG_USER = "postgres"
PG_PORT = 54329


def wl_pgbench(fs, cfg, out):
    """PostgreSQL on the filesystem: initdb (as the postgres user), a
    pgbench database of scale pg_scale, then pgbench's TPC-B-like
    transactions from pg_clients clients for pg_seconds (fsync and
    synchronous_commit on, as shipped)."""
    p = cfg.profile
    bindir = pg_bindir()
    if bindir is None or not (bindir / "pgbench").exists():
        skip(out, ["pgbench"], "PostgreSQL is not installed")
        return
    try:
        import pwd
        pw = pwd.getpwnam(PG_USER)
    except KeyError:
        skip(out, ["pgbench"], "no %s user" % PG_USER)
        return
    root = fs.mnt / "pg"
    data = root / "data"
    sock = cfg.workdir / "pgsock"
    root.mkdir()
    os.chown(root, pw.pw_uid, pw.pw_gid)
    sock.mkdir(exist_ok=True)
    os.chown(sock, pw.pw_uid, pw.pw_gid)
    logfile = cfg.workdir / ("pg-%s.log" % fs.name)
    if logfile.exists():
        logfile.unlink()
    logfile.touch()
    os.chown(logfile, pw.pw_uid, pw.pw_gid)

    def as_pg(args, timeout):
        return run(["runuser", "-u", PG_USER, "--"] + args, timeout=timeout,
                   cwd=str(sock))

    conn = ["-h", str(sock), "-p", str(PG_PORT)]
    as_pg([str(bindir / "initdb"), "-N", "-A", "trust", "-U", PG_USER, "-D", str(data)],
          timeout=p["pg_cap"])
    syncfs(fs.mnt)
    started = False
    try:
        as_pg([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(logfile), "-w", "-t",
               str(p["pg_cap"]), "-o",
               "-c listen_addresses='' -c unix_socket_directories=%s -c port=%d "
               "-c shared_buffers=128MB -c max_connections=%d" % (sock, PG_PORT,
                                                                    p["pg_clients"] + 10),
               "start"], timeout=p["pg_cap"] + 30)
        started = True
        as_pg([str(bindir / "pgbench")] + conn + ["-i", "-q", "-s", str(p["pg_scale"]),
                                                   PG_USER], timeout=p["pg_cap"])
        as_pg([str(bindir / "psql")] + conn + ["-q", "-c", "CHECKPOINT", PG_USER],
              timeout=p["pg_cap"])
        r, delta = counted(fs, lambda: as_pg(
            [str(bindir / "pgbench")] + conn + ["-c", str(p["pg_clients"]), "-j", "2",
                                                "-T", str(p["pg_seconds"]), "-n", PG_USER],
            timeout=p["pg_seconds"] + p["pg_cap"]))
        text = r.stdout
        tps = txs = None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("tps = "):
                tps = float(line.split()[2])
            elif line.startswith("number of transactions actually processed:"):
                txs = int(line.split(":")[1].split("/")[0])
        if tps is None:
            raise BenchError("pgbench printed no tps: %s | %s" % (tail(text, 3), tail(r.stderr)))
        out["pgbench"] = (tps, with_costs({
            "transactions": txs, "clients": p["pg_clients"], "scale": p["pg_scale"],
            "seconds": p["pg_seconds"]}, delta, txs))
    finally:
        if started:
            p_stop = subprocess.run(["runuser", "-u", PG_USER, "--", str(bindir / "pg_ctl"),
                                     "-D", str(data), "-m", "fast", "-w", "-t", "120", "stop"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, cwd=str(sock))
            if p_stop.returncode != 0:
                pg_kill(data)
    shutil.rmtree(root)
    syncfs(fs.mnt)


def pg_kill(data):
    """Stop a postmaster that pg_ctl could not: SIGQUIT, then SIGKILL."""
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        if wait_for(lambda: not Path("/proc/%d" % pid).exists(), 10, 0.1):
            return


WORKLOADS = {
    "request": (wl_request, [("request", "statfs: one request each", "calls/s")]),
    "seq": (wl_seq, [("seqwrite", "seq write %(seq)s", "MB/s"),
                     ("seqread", "seq read %(seq)s (cold)", "MB/s")]),
    "randwrite": (wl_randwrite, [("randwrite", "rand write 4K fsync/32", "IOPS")]),
    "smallfiles": (wl_smallfiles, [
        ("create", "%(files)s files: create", "files/s"),
        ("stat", "%(files)s files: stat walk", "files/s"),
        ("read", "%(files)s files: read", "files/s"),
        ("unlink", "%(files)s files: unlink", "files/s")]),
    "untar": (wl_untar, [("untar", "untar %(tar)s", "entries/s")]),
    "sqlite": (wl_sqlite, [
        ("sqlite_del_1", "sqlite rollback, 1 writer", "tx/s"),
        ("sqlite_del_n", "sqlite rollback, %(writers)s writers", "tx/s"),
        ("sqlite_wal_1", "sqlite WAL, 1 writer", "tx/s"),
        ("sqlite_wal_n", "sqlite WAL, %(writers)s writers", "tx/s")]),
    "syncwrite": (wl_syncwrite, [
        ("sync_1", "rand write 8K fdatasync each, 1 job", "IOPS"),
        ("sync_n", "rand write 8K fdatasync each, %(jobs)s jobs", "IOPS")]),
    "direct": (wl_direct, [
        ("direct_read", "O_DIRECT rand read 8K", "IOPS"),
        ("direct_write", "O_DIRECT rand write 8K", "IOPS")]),
    "pgbench": (wl_pgbench, [("pgbench", "pgbench scale %(pgscale)s, %(pgclients)s clients",
                              "tps")]),
}


# ------------------------------------------------------------------ driver

class Config:
    pass


def ensure_tools(cfg):
    need = {"fio": "fio", "tar": "tar", "losetup": "util-linux",
            "mkfs.ext4": "e2fsprogs", "e2fsck": "e2fsprogs"}
    if "fuse2fs" in cfg.fs:
        need["fuse2fs"] = "fuse2fs"
    if "floor" in cfg.fs:
        need["fuse-overlayfs"] = "fuse-overlayfs"
    ocfs2 = any(fs in cfg.fs for fs in OCFS2D_FS)
    if ocfs2 and cfg.fsck:
        need["fsck.ocfs2"] = "ocfs2-tools"
    if ocfs2 and cfg.ocfs2_mkfs == "mkfs.ocfs2":
        need["mkfs.ocfs2"] = "ocfs2-tools"
    if "pgbench" in cfg.workloads:
        need["runuser"] = "util-linux"
    missing = {pkg for tool, pkg in need.items() if not shutil.which(tool)}
    # Debian keeps PostgreSQL's programs out of PATH
    if "pgbench" in cfg.workloads and pg_bindir() is None:
        missing.add("postgresql")
    missing = sorted(missing)
    if not missing:
        return
    if cfg.no_install:
        raise BenchError("missing packages: %s (and --no-install given)"
                         % " ".join(missing))
    log("installing %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-q"], timeout=600, env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing,
        timeout=1200, env=env)
    still = [t for t in need if not shutil.which(t)]
    if "pgbench" in cfg.workloads and pg_bindir() is None:
        still.append("postgresql (initdb, pgbench)")
    if still:
        raise BenchError("still missing after apt-get install: %s" % " ".join(still))


def ensure_ocfs2d(cfg):
    daemon = cfg.build_dir / "daemon" / "ocfs2d"
    ctl = cfg.build_dir / "cli" / "ocfs2ctl"
    if daemon.exists() and ctl.exists():
        return
    if cfg.no_build:
        raise BenchError("%s or %s is missing (and --no-build given)" % (daemon, ctl))
    if cfg.build_dir == REPO / "build":
        log("building ocfs2d: scripts/setup.sh")
        run([str(REPO / "scripts" / "setup.sh")], timeout=3600, cwd=str(REPO))
    else:
        if not (cfg.build_dir / "build.ninja").exists():
            log("configuring %s" % cfg.build_dir)
            run(["meson", "setup", str(cfg.build_dir)], timeout=600, cwd=str(REPO))
        log("building %s" % cfg.build_dir)
        run(["ninja", "-C", str(cfg.build_dir)], timeout=3600, cwd=str(REPO))
    if not daemon.exists():
        raise BenchError("%s does not exist even after a build: the daemon is not "
                         "built yet?  Run with --fs fuse2fs,ext4 to skip ocfs2d."
                         % daemon)


def clean_stale(cfg):
    """Undo mounts and loop devices a killed earlier run left in workdir."""
    for name in ALL_FS:
        mnt = cfg.workdir / ("mnt-%s" % name)
        if mount_entry(mnt):
            pg_kill(mnt / "pg" / "data")     # a PostgreSQL it left running
        if mount_entry(mnt):
            log("unmounting a stale mount at %s" % mnt)
            subprocess.run(["umount", "-l", str(mnt)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        detach_loops_for(cfg.workdir / ("%s.img" % name))
    ram = cfg.workdir / "floor-tmpfs"
    if mount_entry(ram):
        subprocess.run(["umount", "-l", str(ram)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def run_fs(fs, cfg, results, rep):
    """All workloads on one filesystem; failures are recorded, not fatal."""
    log("== %s: %s (%s volume)%s" % (
        fs.name, fs.describe, human(cfg.volume),
        ", repetition %d of %d" % (rep + 1, cfg.repeat) if cfg.repeat > 1 else ""))
    keys = [k for w in cfg.workloads for k, _, _ in WORKLOADS[w][1]]

    done = set()

    def fail_all(msg, which):
        for k in which:
            if k not in done:
                results[k].add(fs.name, None, error=msg, rep=rep)
                done.add(k)

    try:
        fs.make()
        fs.mount()
    except BenchError as e:
        fs.info["errors"].append("setup: %s" % e)
        log("%s: setup failed: %s" % (fs.name, e))
        fail_all("setup failed", keys)
        return
    for w in cfg.workloads:
        func, metrics = WORKLOADS[w]
        wkeys = [k for k, _, _ in metrics]
        if not fs.healthy():
            msg = "%s not mounted or not responding before %s" % (fs.name, w)
            if isinstance(fs, FuseBackend):
                if fs.proc is not None and fs.proc.poll() is not None:
                    msg += "; the daemon exited with status %d" % fs.proc.returncode
                msg += " (daemon log: %s)" % file_tail(fs.logfile, 4)
            fs.info["errors"].append(msg)
            log(msg + "; mounting again")
            try:
                fs.force_cleanup()
                fs.mount()
            except BenchError as e:
                fs.info["errors"].append("remount: %s" % e)
                fail_all("filesystem lost", keys)
                return
        log("%s: %s" % (fs.name, w))
        out = {}
        t0 = time.perf_counter()
        try:
            with Watchdog(workload_cap(cfg, w), fs.abort, "workload " + w):
                drop_caches()
                func(fs, cfg, out)
        except (BenchError, OSError, json.JSONDecodeError, KeyError) as e:
            msg = "%s: %s" % (w, e)
            fs.info["errors"].append(msg)
            log("%s: FAILED %s" % (fs.name, msg))
        fs.info.setdefault("workload_seconds", {})[w] = round(time.perf_counter() - t0, 1)
        for k in wkeys:
            if k in out:
                results[k].add(fs.name, out[k][0], out[k][1], rep=rep)
            else:
                results[k].add(fs.name, None, error="failed: see the errors of "
                               + fs.name, rep=rep)
            done.add(k)
        if fs.mounted and not mount_entry(fs.mnt):
            fs.mounted = False
    try:
        if fs.healthy():
            fs.info["df_after"] = df(fs.mnt)
        fs.umount()
    except BenchError as e:
        fs.info["errors"].append("umount: %s" % e)
        log("%s: %s" % (fs.name, e))
        fs.force_cleanup()
    if cfg.fsck:
        f = fs.fsck()
        if f:
            fs.info.setdefault("fsck", []).append(f)
            if not f["ok"]:
                log("%s: %s found problems: %s" % (fs.name, f["cmd"], f["output"]))
                fs.info["errors"].append("%s found problems (rc %s): %s"
                                         % (f["cmd"], f.get("rc"), f["output"]))


def workload_cap(cfg, w):
    """Seconds after which a workload is certainly stuck."""
    p = cfg.profile
    return 300 + {"seq": 2 * p["seq_cap"], "smallfiles": 4 * p["phase_cap"],
                  "randwrite": p["rand_fill_cap"] + p["rand_runtime"],
                  "untar": p["untar_cap"], "request": p["request_cap"],
                  "sqlite": 4 * (p["sqlite_seconds"] + 60),
                  "syncwrite": 2 * (p["rand_fill_cap"] + p["sync_runtime"]),
                  "direct": p["rand_fill_cap"] + 2 * p["direct_runtime"],
                  "pgbench": 4 * p["pg_cap"] + p["pg_seconds"]}[w]


def df(path):
    st = os.statvfs(path)
    return {"total": st.f_blocks * st.f_frsize, "free": st.f_bavail * st.f_frsize}


def fmt_value(v, unit):
    if v is None:
        return "FAIL"
    if unit == "MB/s":
        return "%.1f" % v if v < 1000 else "%.0f" % v
    return "%.0f" % v if v >= 100 else "%.1f" % v


def fmt_ratio(r):
    if r is None:
        return "-"
    return "%.2fx" % r if r < 10 else "%.1fx" % r


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def print_table(cfg, results, order):
    cols = [fs for fs in ALL_FS if fs in cfg.fs]
    ratio_cols = [(a, o) for a in OCFS2D_FS for o in ("fuse2fs", "floor", "ext4")
                  if a in cols and o in cols]
    head = ["workload", "unit"] + cols + ["%s/%s" % ao for ao in ratio_cols]
    rows = []
    for k in order:
        r = results[k]
        row = [r.label, r.unit] + [
            "n/a" if r.values.get(fs) is None and fs in r.skipped
            else fmt_value(r.values.get(fs), r.unit) for fs in cols]
        row += [fmt_ratio(ratio(r.values.get(a), r.values.get(o))) for a, o in ratio_cols]
        rows.append(row)
    widths = [max(len(str(x[i])) for x in [head] + rows) for i in range(len(head))]
    line = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(w) if i < 2 else c.rjust(w)) for i, (c, w) in enumerate(zip(cells, widths)))
    print()
    print(line(head))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))
    if ratio_cols:
        print("\nratios are throughput ratios: above 1.00x ocfs2d is faster.")
    skipped = ["  %s on %s: %s" % (results[k].label, fs, why)
               for k in order for fs, why in sorted(results[k].skipped.items())]
    if skipped:
        print("\nn/a (the workload cannot run there):")
        print("\n".join(skipped))
    print_costs(results, order)


def print_costs(results, order):
    """ocfs2d's journal commits and device flushes per transaction (or per
    I/O), from Volume.Statistics before and after each database row."""
    for fs in OCFS2D_FS:
        print_costs_of(fs, results, order)


def print_costs_of(fs, results, order):
    rows = []
    for k in order:
        det = [d for d in results[k].details.get(fs, []) if "counters" in d]
        if not det:
            continue
        ops = [d.get("transactions", d.get("ios")) for d in det]
        fl = [d["counters"].get("device_flushes", 0) for d in det]
        cm = [d["counters"].get("journal_commits", 0) for d in det]
        n = sum(o or 0 for o in ops)
        rows.append([results[k].label, "%d" % n, "%d" % sum(fl), "%d" % sum(cm),
                     "%.2f" % (sum(fl) / n) if n else "-", "%.2f" % (sum(cm) / n) if n else "-"])
    if not rows:
        return
    head = ["%s: per transaction (or I/O)" % fs, "tx", "flushes", "commits",
            "flushes/tx", "commits/tx"]
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    line = lambda cells: "  ".join(  # noqa: E731
        (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(cells, widths)))
    print()
    print(line(head))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Benchmark ocfs2d against fuse2fs and kernel ext4 (run as root).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="small sizes and short time caps: a smoke test")
    ap.add_argument("--size", type=parse_size, default=None,
                    help="volume (image) size, e.g. 4G [4G, quick 1G]")
    ap.add_argument("--fs", default=",".join(ALL_FS),
                    help="comma-separated filesystems among " + ",".join(ALL_FS))
    ap.add_argument("--workloads", default=None,
                    help="comma-separated workloads among " + ",".join(KNOWN_WORKLOADS)
                    + " [" + ",".join(ALL_WORKLOADS) + "; with --db: "
                    + ",".join(DB_WORKLOADS) + "]")
    ap.add_argument("--db", action="store_true",
                    help="the database rows (" + ",".join(DB_WORKLOADS) + ") instead of "
                    "the file rows; with ocfs2d's journal commits and device flushes per "
                    "transaction")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/ocfs2d-bench"),
                    help="images, mountpoints, logs and the cached tarball")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run everything N times (filesystems interleaved) and "
                    "report the medians")
    ap.add_argument("--keep-images", action="store_true",
                    help="keep the image files after the run (default: delete)")
    ap.add_argument("--build-dir", type=Path, default=Path("build"),
                    help="ocfs2d build directory (relative: to the repository)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "last.json",
                    dest="json_out", help="where to write the results as JSON")
    ap.add_argument("--seq-size", type=parse_size, help="sequential file size [1G]")
    ap.add_argument("--rand-size", type=parse_size, help="random-write file size [256M]")
    ap.add_argument("--rand-runtime", type=int, help="random-write seconds [30]")
    ap.add_argument("--files", type=int, help="small files [10000]")
    ap.add_argument("--dirs", type=int, help="directories for the small files [100]")
    ap.add_argument("--tar-source", help="directory to make the untar tarball from "
                    "[/usr/include, more trees until 5000 files]")
    ap.add_argument("--ocfs2-mkfs", choices=["ocfs2ctl", "mkfs.ocfs2"],
                    default="ocfs2ctl", help="what formats the OCFS2 image")
    ap.add_argument("--ocfs2-format-opts", default=None,
                    help="format options instead of '-b 4096 -C 4096 -N 1 -J "
                    "size=<as ext4>' (-M local is always given)")
    ap.add_argument("--ocfs2d-launch", choices=["auto", "foreground", "ctl", "server"],
                    default="auto", help="'ocfs2d -f' in the background, "
                    "'ocfs2ctl mount'/'ocfs2ctl umount', or 'ocfs2d -f --server' of our "
                    "own with ocfs2ctl mount/umount on its control socket (which gives "
                    "the per-workload journal and flush counters); auto: server for "
                    "the database rows, foreground otherwise")
    ap.add_argument("--ocfs2d-opts", default="", help="-o options for ocfs2d")
    ap.add_argument("--fuse2fs-opts", default="", help="-o options for fuse2fs")
    ap.add_argument("--ext4-opts", default="", help="-o options for the ext4 mount")
    ap.add_argument("--ext4-mkfs-opts", default="",
                    help="extra mkfs.ext4 options (both ext4 images)")
    ap.add_argument("--no-fsck", dest="fsck", action="store_false",
                    help="skip the fsck of each image after its run")
    ap.add_argument("--no-install", action="store_true",
                    help="do not apt-get install missing tools")
    ap.add_argument("--no-build", action="store_true",
                    help="do not build ocfs2d if its binaries are missing")
    ap.add_argument("--guest-halt-poll", type=int, metavar="NS", default=None,
                    help="on a KVM guest, set guest_halt_poll_ns for the run "
                    "(restored afterwards); default: leave it as it is")
    ap.add_argument("--mount-timeout", type=int, default=60)
    ap.add_argument("--umount-timeout", type=int, default=120)
    args = ap.parse_args(argv)

    if os.geteuid() != 0:
        print("bench.py: must run as root (it makes filesystems, mounts them, "
              "sets up loop devices and drops the page cache).\n"
              "Try: sudo %s" % shlex.join([sys.executable] + sys.argv),
              file=sys.stderr)
        return 2

    cfg = Config()
    cfg.fs = [f.strip() for f in args.fs.split(",") if f.strip()]
    bad = [f for f in cfg.fs if f not in ALL_FS]
    if bad or not cfg.fs:
        ap.error("--fs: unknown %s (choose among %s)" % (bad, ",".join(ALL_FS)))
    if args.workloads is None:
        args.workloads = ",".join(DB_WORKLOADS if args.db else ALL_WORKLOADS)
    cfg.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    bad = [w for w in cfg.workloads if w not in KNOWN_WORKLOADS]
    if bad or not cfg.workloads:
        ap.error("--workloads: unknown %s (choose among %s)"
                 % (bad, ",".join(KNOWN_WORKLOADS)))
    cfg.mode = "quick" if args.quick else "full"
    cfg.profile = dict(PROFILES[cfg.mode])
    for opt, key in (("seq_size", "seq_size"), ("rand_size", "rand_size"),
                     ("rand_runtime", "rand_runtime"), ("files", "files"),
                     ("dirs", "dirs")):
        if getattr(args, opt) is not None:
            cfg.profile[key] = getattr(args, opt)
    cfg.volume = args.size or cfg.profile["volume"]
    cfg.profile["volume"] = cfg.volume
    if cfg.profile["files"] < cfg.profile["dirs"] or cfg.profile["dirs"] < 1:
        ap.error("need at least one file per directory")
    cfg.workdir = args.workdir.resolve()
    cfg.ocfs2d_control = cfg.workdir / "ocfs2d.control"
    cfg.cache_dir = cfg.workdir / "cache"
    cfg.build_dir = (REPO / args.build_dir).resolve() if not args.build_dir.is_absolute() \
        else args.build_dir
    cfg.keep_images = args.keep_images
    cfg.repeat = args.repeat
    if cfg.repeat < 1:
        ap.error("--repeat must be at least 1")
    cfg.tar_source = args.tar_source
    cfg.ocfs2_mkfs = args.ocfs2_mkfs
    cfg.ocfs2_format_opts = shlex.split(args.ocfs2_format_opts) \
        if args.ocfs2_format_opts is not None else None
    cfg.ocfs2d_launch = args.ocfs2d_launch
    if cfg.ocfs2d_launch == "auto":
        cfg.ocfs2d_launch = "server" if set(cfg.workloads) & set(DB_WORKLOADS) \
            else "foreground"
    # PostgreSQL runs as its own user: the FUSE mounts must let it in
    # (ocfs2d allows other users by default)
    cfg.fuse_other_users = "allow_other" if "pgbench" in cfg.workloads else ""
    cfg.ocfs2d_opts = args.ocfs2d_opts
    cfg.fuse2fs_opts = args.fuse2fs_opts
    cfg.ext4_opts = args.ext4_opts
    cfg.ext4_mkfs_opts = shlex.split(args.ext4_mkfs_opts)
    cfg.fsck = args.fsck
    cfg.no_install = args.no_install
    cfg.no_build = args.no_build
    cfg.mount_timeout = args.mount_timeout
    cfg.umount_timeout = args.umount_timeout

    if "seq" in cfg.workloads and cfg.profile["seq_size"] > cfg.volume * 0.8:
        ap.error("--seq-size must fit well within the volume")
    if "randwrite" in cfg.workloads and cfg.profile["rand_size"] > cfg.volume * 0.8:
        ap.error("--rand-size must fit well within the volume")

    # SIGTERM and SIGHUP unwind like ^C, so the finally below cleans up.
    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)

    backends = []
    started = time.time()
    results, order = {}, []
    labels = {"seq": human(cfg.profile["seq_size"]),
              "files": "%d" % cfg.profile["files"], "tar": "",
              "writers": "%d" % cfg.profile["sqlite_writers"],
              "jobs": "%d" % cfg.profile["sync_jobs"],
              "pgscale": "%d" % cfg.profile["pg_scale"],
              "pgclients": "%d" % cfg.profile["pg_clients"]}
    old_halt_poll = None
    try:
        if args.guest_halt_poll is not None:
            if args.guest_halt_poll < 0:
                ap.error("--guest-halt-poll must be 0 or more")
            old_halt_poll = set_halt_poll(args.guest_halt_poll)
        idle = cpuidle_info()
        log("cpuidle: %s/%s, guest_halt_poll_ns %s" % (
            idle["driver"], idle["governor"], idle["guest_halt_poll_ns"]))
        cfg.workdir.mkdir(parents=True, exist_ok=True)
        clean_stale(cfg)
        st = os.statvfs(cfg.workdir)
        avail = st.f_bavail * st.f_frsize
        need = cfg.profile["seq_size"] + cfg.profile["rand_size"] + 512 * MiB
        if avail < need:
            raise BenchError("%s has %s free; the workloads need about %s"
                             % (cfg.workdir, human(avail), human(need)))
        want = cfg.volume * (len(cfg.fs) if cfg.keep_images else 1)
        if avail < want:
            log("warning: %s has %s free, less than the (sparse) images' %s"
                % (cfg.workdir, human(avail), human(want)))
        ensure_tools(cfg)
        if any(fs in cfg.fs for fs in OCFS2D_FS):
            ensure_ocfs2d(cfg)
        if "untar" in cfg.workloads:
            cfg.tarball = make_tarball(cfg)
            info = cfg.tarball[1]
            labels["tar"] = "%d entries, %s" % (
                info["files"] + info["dirs"] + info["other"], human(info["bytes"]))
        for w in cfg.workloads:
            for key, label, unit in WORKLOADS[w][1]:
                results[key] = Result(key, label % labels, unit)
                order.append(key)
        backends = [BACKENDS[name](cfg) for name in ALL_FS if name in cfg.fs]
        for r in range(cfg.repeat):
            for fs in backends:
                try:
                    run_fs(fs, cfg, results, r)
                finally:
                    fs.force_cleanup()
                    if not cfg.keep_images and fs.image.exists():
                        fs.image.unlink()
    except KeyboardInterrupt as e:
        log("interrupted (%s): cleaning up" % (e or "^C"))
        for fs in backends:
            fs.force_cleanup()
        return 130
    except BenchError as e:
        log("error: %s" % e)
        return 1
    finally:
        for fs in backends:
            fs.force_cleanup()
            if not cfg.keep_images and fs.image.exists():
                fs.image.unlink()
        if old_halt_poll is not None:
            HALT_POLL.write_text("%d\n" % old_halt_poll)

    print_table(cfg, results, order)
    problems = []
    for fs in backends:
        for e in fs.info["errors"]:
            problems.append("%s: %s" % (fs.name, e))
    if problems:
        print("\nproblems:")
        for p in problems:
            print("  " + p)

    doc = {
        "schema": 1,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "host": {"kernel": platform.release(), "cpus": os.cpu_count(),
                 "mem_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                 "python": platform.python_version(), "tools": tool_versions(cfg),
                 "cpuidle": idle},
        "config": {"mode": cfg.mode, "repeat": cfg.repeat, "volume_bytes": cfg.volume, "fs": cfg.fs,
                   "workloads": cfg.workloads, "workdir": str(cfg.workdir),
                   "profile": cfg.profile,
                   "tarball": cfg.tarball[1] if "untar" in cfg.workloads else None},
        "filesystems": {fs.name: fs.info for fs in backends},
        "results": [{
            "key": k, "label": results[k].label, "unit": results[k].unit,
            "values": results[k].values, "samples": results[k].samples,
            "details": results[k].details,
            "errors": results[k].errors,
            "skipped": results[k].skipped,
            "ratios": {"%s/%s" % (a, o): ratio(results[k].values.get(a),
                                                results[k].values.get(o))
                       for a in OCFS2D_FS for o in ("fuse2fs", "floor", "ext4")
                       if a in cfg.fs and o in cfg.fs},
        } for k in order],
        "problems": problems,
    }
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(doc, indent=1) + "\n")
    print("\nresults: %s  (took %.0fs)" % (args.json_out, time.time() - started))
    return 0


HALT_POLL = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


def read_text(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpuidle_info():
    """How idle CPUs wait.  On a virtual machine whose idle CPUs halt at
    once (guest_halt_poll_ns=0), waking one is an exit to the hypervisor,
    and every FUSE request pays it twice: the daemon's wake-up and the
    caller's.  Kernel filesystems pay it only for I/O completions."""
    return {"driver": read_text("/sys/devices/system/cpu/cpuidle/current_driver"),
            "governor": read_text("/sys/devices/system/cpu/cpuidle/current_governor"),
            "guest_halt_poll_ns": read_text(HALT_POLL)}


def set_halt_poll(ns):
    """Sets the guest halt-poll time; returns the old value to restore."""
    old = read_text(HALT_POLL)
    if old is None:
        raise BenchError("--guest-halt-poll: %s is missing (not a guest using "
                         "the cpuidle-haltpoll driver)" % HALT_POLL)
    HALT_POLL.write_text("%d\n" % ns)
    return int(old)


def tool_versions(cfg):
    v = {}
    for name, cmd in (("fio", ["fio", "--version"]),
                      ("fuse2fs", ["dpkg-query", "-W", "-f=${Version}", "fuse2fs"]),
                      ("fuse-overlayfs", ["dpkg-query", "-W", "-f=${Version}",
                                          "fuse-overlayfs"]),
                      ("e2fsprogs", ["dpkg-query", "-W", "-f=${Version}", "e2fsprogs"]),
                      ("postgresql", ["dpkg-query", "-W", "-f=${Version}", "postgresql"])):
        try:
            v[name] = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            v[name] = None
    try:
        import sqlite3
        v["sqlite"] = sqlite3.sqlite_version
    except ImportError:
        v["sqlite"] = None
    try:
        v["ocfs2d_commit"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        v["ocfs2d_commit"] = None
    return v


if __name__ == "__main__":
    sys.exit(main())
