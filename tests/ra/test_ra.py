#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The OCF resource agent ocf:ocfs2d:volume (ra/volume), run for real.

    test_ra.py OCFS2D OCFS2CTL CASE

CASE:
  tester  ocf-tester (resource-agents) judges the agent: meta-data against
          the OCF DTD and as nobody, validate-all, monitor and probe on a
          stopped volume, start, double start, stop, double stop - on a
          real volume mounted through FUSE.
  states  the agent run as pacemaker-execd runs it (OCF_RESKEY_*
          environment): the three monitor states (stopped 7, running 0, and
          failed 1 once ocfs2d is SIGKILLed and its mount is left behind),
          stop of the failed volume, start again replaying the journal;
          monitor depths 10 and 20; a busy volume stopped by force (its
          users get TERM) and, with force_unmount=false, a failed stop;
          configuration errors (missing or relative parameters, a clone of
          two instances, no ocfs2ctl, no device) with the OCF codes
          pacemaker acts on; a probe where ocfs2ctl is missing.  Written
          data survives every stop and start, and fsck.ocfs2 -fn finds the
          volume clean after each stop.

ocfs2ctl starts its own ocfs2d (OCFS2D, OCFS2D_CONTROL point it at the
build and a private control socket); its log must hold no sanitizer report.
Needs root, /dev/fuse, fsck.ocfs2 and (tester) ocf-tester; else exit 77.
"""

import os
import signal
import subprocess
import sys
import time

from o2test.check import Failure
from o2test.harness import main
from o2test.proc import log, sanitizer_report, tool_env, which
from o2test.syscalls import NOBODY_ACCESS_WANT, nobody_access
from o2test.tree import read_file
from o2test.volume import lazy_umount

HERE = os.path.dirname(os.path.abspath(__file__))

AGENT = os.path.join(HERE, "..", "..", "ra", "volume")
OCF_ROOT = "/usr/lib/ocf"
SUCCESS, GENERIC, UNIMPLEMENTED, PERM, INSTALLED, CONFIGURED, NOT_RUNNING = 0, 1, 3, 4, 5, 6, 7


class Agent:
    """ra/volume for one volume, with a private ocfs2d."""

    def __init__(self, env, vol):
        self.env, self.vol = env, vol
        self.control = os.path.join(env.tmp, "control")
        self.daemon_log = os.path.join(env.tmp, "ocfs2d.log")
        self.params = {"device": vol.img, "directory": vol.mnt, "ocfs2ctl": env.ctl}
        env.cleanups.append(self.teardown)
        env.extra_logs = [self.show_log]

    def environ(self, params=None, meta=None, check_level=None):
        e = tool_env(self.env.daemon_env)
        e.update(OCF_ROOT=OCF_ROOT, OCF_RESOURCE_INSTANCE="vol", OCFS2D=self.env.daemon,
                 OCFS2D_CONTROL=self.control)
        for k, v in (self.params if params is None else params).items():
            e["OCF_RESKEY_" + k] = v
        for k, v in (meta or {}).items():
            e["OCF_RESKEY_CRM_meta_" + k] = v
        if check_level is not None:
            e["OCF_CHECK_LEVEL"] = str(check_level)
        return e

    def run(self, action, params=None, meta=None, check_level=None, timeout=120):
        p = subprocess.run([AGENT, action], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout,
                           env=self.environ(params, meta, check_level))
        out = p.stdout.decode("utf-8", "replace")
        log("%s -> %d%s" % (action, p.returncode, (": " + out.strip()[-300:]) if out.strip() else ""))
        return p.returncode, out

    def daemon_pids(self):
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/environ" % pid, "rb") as f:
                    environ = f.read().split(b"\0")
            except OSError:
                continue
            if argv and argv[0] == self.env.daemon.encode() and \
                    ("OCFS2D_CONTROL=" + self.control).encode() in environ:
                pids.append(int(pid))
        return pids

    def show_log(self):
        try:
            with open(self.daemon_log, errors="replace") as f:
                return "---- ocfs2d --server log (%s) ----\n%s" % (self.daemon_log, f.read()[-20000:])
        except OSError:
            return "(no ocfs2d --server log)"

    def log_text(self):
        try:
            with open(self.daemon_log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def teardown(self):
        for _ in range(3):
            if self.vol.mounted():
                lazy_umount(self.vol.mnt)
        for pid in self.daemon_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def no_sanitizer(chk, agent):
    chk.ok(not sanitizer_report(agent.log_text()), "no sanitizer report in the ocfs2d log")


def case_tester(env, chk):
    tester = which("ocf-tester")
    if not tester:
        raise Failure("ocf-tester is missing (scripts/setup.sh installs resource-agents)")
    vol = env.volume("tester")
    agent = Agent(env, vol)
    argv = [tester, "-v", "-n", "vol"]
    for k, v in agent.params.items():
        argv += ["-o", "%s=%s" % (k, v)]
    # ocf-tester runs meta-data as nobody: the agent and the path to it
    # must be readable by everyone (they are in a normal checkout)
    p = subprocess.run(argv + [os.path.realpath(AGENT)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                       env=agent.environ())
    out = p.stdout.decode("utf-8", "replace")
    print(out[-6000:])
    chk.eq(p.returncode, 0, "ocf-tester's verdict")
    chk.ok("passed all tests" in out, "ocf-tester says the agent passed all tests")
    chk.ok(not vol.mounted(), "not mounted after ocf-tester")
    vol.fsck(chk, "after ocf-tester")
    no_sanitizer(chk, agent)


def wait_for(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def case_states(env, chk):
    vol = env.volume("states")
    agent = Agent(env, vol)
    a = agent.run

    # -- configuration: the codes pacemaker acts on --
    p = dict(agent.params)
    chk.eq(a("validate-all")[0], SUCCESS, "validate-all")
    chk.eq(a("validate-all", params={k: v for k, v in p.items() if k != "device"})[0], CONFIGURED,
           "validate-all without device")
    chk.eq(a("validate-all", params=dict(p, directory="relative/dir"))[0], CONFIGURED,
           "validate-all with a relative directory")
    chk.eq(a("validate-all", params=dict(p, force_unmount="maybe"))[0], CONFIGURED,
           "validate-all with a force_unmount that is no boolean")
    chk.eq(a("validate-all", params=dict(p, device=os.path.join(env.tmp, "absent.img")))[0], INSTALLED,
           "validate-all with a device this node does not have")
    chk.eq(a("validate-all", params=dict(p, ocfs2ctl="/nonexistent/ocfs2ctl"))[0], INSTALLED,
           "validate-all without ocfs2ctl")
    rc, out = a("start", meta={"clone": "0", "clone_max": "2", "clone_node_max": "1"})
    chk.eq(rc, CONFIGURED, "start as a clone of two instances")
    chk.ok("ocf-exit-reason:" in out and "one node at a time" in out, "the clone refusal says why")
    chk.ok(not vol.mounted(), "nothing mounted by a refused start")
    chk.eq(a("start", meta={"clone": "0", "clone_max": "1"})[0], SUCCESS, "a clone of one instance starts")
    chk.eq(a("stop")[0], SUCCESS, "and stops")
    chk.eq(a("monitor", params=dict(p, ocfs2ctl="/nonexistent/ocfs2ctl"),
             meta={"interval": "0"})[0], NOT_RUNNING, "a probe where ocfs2ctl is missing")
    chk.eq(a("frobnicate")[0], UNIMPLEMENTED, "an unknown action")
    rc, out = a("meta-data")
    chk.ok(rc == 0 and "<resource-agent name=\"volume\"" in out and "ra-api-1.dtd" in out,
           "meta-data")

    # -- stopped, running --
    chk.eq(a("monitor")[0], NOT_RUNNING, "monitor of a stopped volume")
    chk.eq(a("stop")[0], SUCCESS, "stop of a stopped volume")
    chk.eq(a("start")[0], SUCCESS, "start")
    chk.ok(vol.mounted(), "mounted after start")
    os.chmod(env.tmp, 0o755)  # mkdtemp's 0700 would stop other users before the mount
    os.chmod(vol.mnt, 0o755)
    chk.eq(nobody_access(vol.mnt), NOBODY_ACCESS_WANT, "the agent's default mount: a user, modes checked")
    chk.eq(a("start")[0], SUCCESS, "start of a running volume")
    for level in (0, 10, 20):
        chk.eq(a("monitor", check_level=level)[0], SUCCESS, "monitor depth %d of a running volume" % level)
    chk.ok(not any(n.startswith(".ocfs2d-monitor") for n in os.listdir(vol.mnt)),
           "monitor depth 20 left no file behind")
    write(os.path.join(vol.mnt, "before-kill"), b"fsynced before the daemon died\n")

    # -- failed: the daemon gone, its mount left --
    pids = agent.daemon_pids()
    chk.eq(len(pids), 1, "one ocfs2d serves the volume")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    chk.ok(wait_for(lambda: not agent.daemon_pids()), "ocfs2d is gone")
    chk.ok(vol.mounted(), "its mount is left behind")
    rc, out = a("monitor")
    chk.eq(rc, GENERIC, "monitor of a volume ocfs2d no longer serves")
    chk.ok("ocf-exit-reason:" in out, "the failure says why")
    chk.eq(a("stop")[0], SUCCESS, "stop of the failed volume")
    chk.ok(not vol.mounted(), "the dead mount is gone after stop")
    chk.eq(a("monitor")[0], NOT_RUNNING, "monitor after that stop")
    chk.eq(a("start")[0], SUCCESS, "start after the failure (replays the journal)")
    chk.eq(read_file(os.path.join(vol.mnt, "before-kill")), b"fsynced before the daemon died\n",
           "fsynced data survived the kill")
    chk.eq(a("stop")[0], SUCCESS, "stop")
    vol.fsck(chk, "after the kill, replay and stop")

    # -- busy: stopped by force, or not at all --
    chk.eq(a("start")[0], SUCCESS, "start again")
    user = subprocess.Popen(["sh", "-c", "exec 3>>busy; while :; do echo x >&3; sleep 0.2; done"],
                            cwd=vol.mnt, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    rc, out = a("stop", params=dict(p, force_unmount="false"))
    chk.eq(rc, GENERIC, "stop of a busy volume with force_unmount=false")
    chk.ok(vol.mounted() and user.poll() is None, "still mounted and its user untouched")
    chk.eq(a("monitor")[0], SUCCESS, "still running after the refused stop")
    t0 = time.time()
    chk.eq(a("stop")[0], SUCCESS, "stop of a busy volume (force_unmount defaults to true)")
    log("forced stop: %.1fs" % (time.time() - t0))
    chk.ok(wait_for(lambda: user.poll() is not None, 10), "its user was stopped")
    if user.poll() is None:
        user.kill()
    user.wait()
    chk.ok(not vol.mounted(), "not mounted after the forced stop")
    vol.fsck(chk, "after the forced stop")
    chk.eq(a("start")[0], SUCCESS, "start after the forced stop")
    chk.ok(len(read_file(os.path.join(vol.mnt, "busy"))) > 0, "what the busy user wrote is there")
    chk.eq(read_file(os.path.join(vol.mnt, "before-kill")), b"fsynced before the daemon died\n",
           "older data still there")
    chk.eq(a("stop")[0], SUCCESS, "final stop")
    chk.ok(wait_for(lambda: not agent.daemon_pids()), "ocfs2d exited once idle")
    vol.fsck(chk, "after the final stop")
    no_sanitizer(chk, agent)


if __name__ == "__main__":
    sys.exit(main({"tester": case_tester, "states": case_states}))
