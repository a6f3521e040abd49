#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ocf:ocfs2d:volume managed by a real pacemaker, on two corosync nodes.

Two nodes in namespaces of their own on a private bridge (o2test.cluster,
as test_cpg_locks.py has them), each running corosync and pacemakerd, with the agent installed as
ocf:ocfs2d:volume inside the nodes (an overlay on /usr/lib/ocf/resource.d)
and one shared image file.  A primitive (monitor every 3 s) serves the
volume on one node at a time, through that node's own ocfs2d (ocfs2ctl
starts it; each node has its own /run, so its own control socket).

  1. pacemaker starts the volume on a node; a file is written there.
  2. that node goes to standby: pacemaker stops the volume there (a clean
     unmount) and starts it on the other node, which reads the file.
  3. the serving ocfs2d is SIGKILLed: the next monitor sees the mount
     without its daemon (failed), pacemaker stops it (detach) and starts it
     again (the journal replayed); the file is still there.
  4. the resource is stopped (target-role Stopped): no node has it mounted
     and fsck.ocfs2 -fn finds the volume clean.

Fencing is off (stonith-enabled=false): no stop fails here.  Needs root,
corosync, pacemaker, resource-agents, fsck.ocfs2, /dev/fuse; else exit 77.
Usage: test_pacemaker.py OCFS2CTL AGENT; by hand, from the top of the tree:

    PYTHONPATH=tests python3 tests/cluster/test_pacemaker.py build/cli/ocfs2ctl ra/volume
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from o2test.cluster import Cluster, daemons_in, fail, mounted_in, need_cluster_tools, show_daemon_log, skip
from o2test.cluster import wait_for
from o2test.pacemaker import fail_counts, install_agent, location, pacemaker_dirs, seed_cib, show_log
from o2test.pacemaker import start_pacemaker, stop_pacemaker

PRIMITIVE = """<primitive id="vol" class="ocf" provider="ocfs2d" type="volume">
  <instance_attributes id="vol-params">
    <nvpair id="vol-device" name="device" value="{img}"/>
    <nvpair id="vol-directory" name="directory" value="{mnt}"/>
    <nvpair id="vol-ocfs2ctl" name="ocfs2ctl" value="{ctl}"/>
  </instance_attributes>
  <meta_attributes id="vol-meta">
    <nvpair id="vol-stickiness" name="resource-stickiness" value="100"/>
  </meta_attributes>
  <operations>
    <op id="vol-monitor" name="monitor" interval="3s" timeout="40s"/>
    <op id="vol-start" name="start" interval="0s" timeout="60s"/>
    <op id="vol-stop" name="stop" interval="0s" timeout="60s"/>
  </operations>
</primitive>"""


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    ctl, agent = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    daemon = os.path.join(os.path.dirname(ctl), "..", "daemon", "ocfs2d")
    # each node's own daemon, on its own /run: a control socket of the
    # caller's (the demo sets one) would be one daemon for both nodes, which
    # mounts in the namespaces of whichever node started it
    os.environ.pop("OCFS2D_CONTROL", None)
    need_cluster_tools("namespaces, corosync, pacemaker",
                       ("corosync", "pacemakerd", "crm_resource", "crm_attribute", "cibadmin",
                        "fsck.ocfs2", "unshare", "nsenter", "ip"),
                       path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not os.path.exists("/dev/fuse") or not os.path.exists("/usr/lib/ocf/lib/heartbeat/ocf-shellfuncs"):
        skip("no /dev/fuse or no resource-agents")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-pcmk-")
    os.chmod(tmp, 0o755)  # pacemaker's daemons run as hacluster
    ocf_dir = install_agent(tmp, "ocfs2d", "volume", agent)
    img, mnt = os.path.join(tmp, "shared.img"), os.path.join(tmp, "mnt")
    with open(img, "wb") as f:
        f.truncate(256 << 20)
    r = subprocess.run([ctl, "format", "-q", "-M", "local", "-J", "size=4M", img],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"format: {r.stdout} {r.stderr}")
    cluster = Cluster(tmp, 2, extra=pacemaker_dirs(ocf_dir))
    pcmk = []
    ok = False
    try:
        n1, n2 = cluster.nodes
        for nd in cluster.nodes:
            seed_cib(nd)
        t0 = time.time()
        pcmk = [start_pacemaker(nd) for nd in cluster.nodes]
        wait_for("pacemaker forming (both nodes online)",
                 lambda: "Online: [ n1 n2 ]" in n1.run(["crm_mon", "-1"]).stdout, 90)
        print(f"pacemaker formed in {time.time() - t0:.1f} s")

        n1.run(["cibadmin", "--create", "--scope", "resources", "--xml-text",
                PRIMITIVE.format(img=img, mnt=mnt, ctl=ctl)], check=True)
        nodes = {"n1": n1, "n2": n2}
        # started and mounted where pacemaker says: right after the cluster
        # forms, the scheduler may stop a resource it has just started and
        # place it again at its next run (seen once: "cannot run anywhere")
        first = wait_for("the volume started and mounted",
                         lambda: (lambda loc: loc if loc and mounted_in(nodes[loc], mnt) else None)(
                             location(n1)), 60)
        a = nodes[first]
        b = n2 if a is n1 else n1
        if not mounted_in(a, mnt) or mounted_in(b, mnt):
            fail(f"started on {first}, but mounted there: {mounted_in(a, mnt)}, "
                 f"on the other node: {mounted_in(b, mnt)}")
        a.run(["sh", "-c", f"echo 'written on {first}' > {mnt}/hello && sync {mnt}/hello"], check=True)
        print(f"1. running on {first}; wrote {mnt}/hello there")

        a.run(["crm_attribute", "--node", first, "--name", "standby", "--update", "on"], check=True)
        # moved: placed on the other node and mounted there (pacemaker may
        # name the node while the start is still running)
        second = wait_for("the volume moved",
                          lambda: (lambda l: l if l and l != first and mounted_in(nodes[l], mnt)
                                   else None)(location(n1)), 60)
        if mounted_in(a, mnt):
            fail(f"{first} still has it mounted after standby")
        got = b.run(["cat", f"{mnt}/hello"], check=True).stdout
        if got != f"written on {first}\n":
            fail(f"{second} reads {got!r}")
        print(f"2. {first} in standby: moved to {second}, which reads the file")
        a.run(["crm_attribute", "--node", first, "--name", "standby", "--update", "off"], check=True)
        # the transition that standby off starts is over before the kill, so
        # that what pacemaker does next is its answer to the dead daemon
        r = n1.run(["crm_resource", "--wait", "--timeout", "60s"])
        if r.returncode != 0:
            fail(f"pacemaker settling after standby off: {r.stdout} {r.stderr}")
        if location(n1) != second or not mounted_in(b, mnt):
            fail(f"standby off moved the volume (now on {location(n1)}; resource-stickiness is 100)")

        pids = daemons_in(b, daemon)
        if len(pids) != 1:
            fail(f"{len(pids)} ocfs2d processes on {second}")
        os.kill(pids[0], signal.SIGKILL)
        t0 = time.time()
        def cluster_state():
            return "crm_mon says:\n" + n1.run(["crm_mon", "-1rf"]).stdout
        wait_for("pacemaker noticing the dead daemon (fail count)",
                 lambda: sum(fail_counts(n1).values()) >= 1, 60, detail=cluster_state)
        def seen():
            return (f"located on {location(n1)}; mounted on n1: {mounted_in(n1, mnt)}, "
                    f"n2: {mounted_in(n2, mnt)}; ocfs2d on n1: {daemons_in(n1, daemon)}, "
                    f"n2: {daemons_in(n2, daemon)}; {cluster_state()}")
        wait_for("the volume served again", lambda: (location(n1) and (mounted_in(n1, mnt) or mounted_in(n2, mnt))
                                                     and (daemons_in(n1, daemon) or daemons_in(n2, daemon))), 60,
                 detail=seen)
        where = nodes[location(n1)]
        def read_back():
            r = where.run(["cat", f"{mnt}/hello"])
            read_back.last = f"cat on {location(n1)}: exit {r.returncode}, {r.stderr.strip()!r}"
            return r.stdout
        read_back.last = "never ran"
        got = wait_for("the file after recovery", read_back, 30, detail=lambda: read_back.last)
        if got != f"written on {first}\n":
            fail(f"after the kill, {location(n1)} reads {got!r}")
        print(f"3. ocfs2d SIGKILLed on {second}: failure seen and the volume served again on "
              f"{location(n1)} in {time.time() - t0:.1f} s (fail counts {fail_counts(n1)})")

        n1.run(["crm_resource", "--resource", "vol", "--meta", "--set-parameter", "target-role",
                "--parameter-value", "Stopped"], check=True)
        wait_for("the volume stopped", lambda: location(n1) is None and not mounted_in(n1, mnt)
                 and not mounted_in(n2, mnt), 60)
        wait_for("ocfs2d exiting once idle", lambda: not daemons_in(n1, daemon) and not daemons_in(n2, daemon), 30)
        r = subprocess.run(["fsck.ocfs2", "-fn", img], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"fsck.ocfs2 -fn after the resource stopped: exit {r.returncode}\n{r.stdout}")
        print("4. stopped: mounted nowhere, fsck.ocfs2 -fn clean")
        ok = True
    finally:
        stop_pacemaker(pcmk)
        if not ok:
            for nd in cluster.nodes:
                show_log(nd, "vol")
                show_daemon_log(nd)
        for nd in cluster.nodes:
            for pid in daemons_in(nd, daemon):
                os.kill(pid, signal.SIGKILL)
        cluster.stop()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print("PASS")


if __name__ == "__main__":
    main()
