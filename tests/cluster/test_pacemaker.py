#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ocf:ocfs2d:volume managed by a real pacemaker, on two corosync nodes.

Two nodes in namespaces of their own on a private bridge (test_cpg_locks.py's
cluster), each running corosync and pacemakerd, with the agent installed as
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
Usage: test_pacemaker.py OCFS2CTL AGENT
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cpg_locks import Cluster, fail, skip  # noqa: E402

CIB = """<cib validate-with="pacemaker-3.0" epoch="1" num_updates="0" admin_epoch="0">
  <configuration>
    <crm_config>
      <cluster_property_set id="cib-bootstrap-options">
        <nvpair id="opt-dc-deadtime" name="dc-deadtime" value="2s"/>
        <nvpair id="opt-stonith" name="stonith-enabled" value="false"/>
        <nvpair id="opt-recheck" name="cluster-recheck-interval" value="10s"/>
      </cluster_property_set>
    </crm_config>
    <nodes/>
    <resources/>
    <constraints/>
  </configuration>
  <status/>
</cib>
"""

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


def pacemaker_dirs(ocf_dir):
    def extra(top, i):
        return (f"hostname n{i}; "
                f"mkdir -p {top}/pcmk-lib/cib {top}/pcmk-lib/pengine {top}/pcmk-lib/blackbox "
                f"{top}/pcmk-lib/cores {top}/pcmk-log; "
                f"chown -R hacluster:haclient {top}/pcmk-lib {top}/pcmk-log; "
                f"mount --bind {top}/pcmk-lib /var/lib/pacemaker; "
                f"mount --bind {top}/pcmk-log /var/log/pacemaker; "
                f"mount -t overlay overlay -o lowerdir={ocf_dir}:/usr/lib/ocf/resource.d "
                "/usr/lib/ocf/resource.d; ")
    return extra


def seed_cib(node):
    path = os.path.join(node.top, "pcmk-lib", "cib", "cib.xml")
    with open(path, "w") as f:
        f.write(CIB)
    shutil.chown(path, "hacluster", "haclient")
    os.chmod(path, 0o600)


def start_pacemaker(node):
    log = open(os.path.join(node.top, "pacemakerd.out"), "w")
    return subprocess.Popen(node.enter() + ["env", "PCMK_logfacility=none",
                                            "PCMK_logfile=/var/log/pacemaker/pacemaker.log",
                                            "pacemakerd"],
                            stdout=log, stderr=subprocess.STDOUT)


def run(node, cmd, check=True):
    r = node.run(cmd)
    if check and r.returncode != 0:
        fail(f"n{node.nodeid}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
    return r


def wait(what, cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.5)
    fail(f"{what}: not within {timeout} s")


def location(node):
    """The node the resource runs on (n1, n2), or None."""
    r = node.run(["crm_resource", "--locate", "--resource", "vol"])
    for line in r.stdout.splitlines():
        if "is running on:" in line:
            return line.split(":")[-1].strip()
    return None


def mounted_in(node, mnt):
    r = node.run(["awk", "-v", "m=" + mnt, "$5 == m { print }", "/proc/self/mountinfo"])
    return "fuse.ocfs2" in r.stdout


def daemons_in(node, daemon):
    """ocfs2d processes in node's mount namespace."""
    ns = os.readlink(f"/proc/{node.pid}/ns/mnt")
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{pid}/ns/mnt") != ns:
                continue
            if os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(daemon):
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def fail_counts(node):
    """{node name: the resource's fail count there}."""
    counts = {}
    for name in ("n1", "n2"):
        r = node.run(["crm_failcount", "--query", "--resource", "vol", "--node", name])
        value = r.stdout.strip().rpartition("value=")[2]
        counts[name] = int(value) if value.isdigit() else 0
    return counts


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    ctl, agent = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    daemon = os.path.join(os.path.dirname(ctl), "..", "daemon", "ocfs2d")
    if os.geteuid() != 0:
        skip("needs root (namespaces, corosync, pacemaker)")
    for tool in ("corosync", "pacemakerd", "crm_resource", "crm_attribute", "cibadmin",
                 "fsck.ocfs2", "unshare", "nsenter", "ip"):
        if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
            skip(f"{tool} is not installed")
    if not os.path.exists("/dev/fuse") or not os.path.exists("/usr/lib/ocf/lib/heartbeat/ocf-shellfuncs"):
        skip("no /dev/fuse or no resource-agents")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-pcmk-")
    os.chmod(tmp, 0o755)  # pacemaker's daemons run as hacluster
    ocf_dir = os.path.join(tmp, "ocf")
    os.makedirs(os.path.join(ocf_dir, "ocfs2d"))
    shutil.copy(agent, os.path.join(ocf_dir, "ocfs2d", "volume"))
    os.chmod(os.path.join(ocf_dir, "ocfs2d", "volume"), 0o755)
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
        wait("pacemaker forming (both nodes online)",
             lambda: "Online: [ n1 n2 ]" in n1.run(["crm_mon", "-1"]).stdout, 90)
        print(f"pacemaker formed in {time.time() - t0:.1f} s")

        run(n1, ["cibadmin", "--create", "--scope", "resources", "--xml-text",
                 PRIMITIVE.format(img=img, mnt=mnt, ctl=ctl)])
        first = wait("the volume started", lambda: location(n1), 60)
        nodes = {"n1": n1, "n2": n2}
        a = nodes[first]
        b = n2 if a is n1 else n1
        if not mounted_in(a, mnt) or mounted_in(b, mnt):
            fail(f"started on {first}, but mounted there: {mounted_in(a, mnt)}, "
                 f"on the other node: {mounted_in(b, mnt)}")
        run(a, ["sh", "-c", f"echo 'written on {first}' > {mnt}/hello && sync {mnt}/hello"])
        print(f"1. running on {first}; wrote {mnt}/hello there")

        run(a, ["crm_attribute", "--node", first, "--name", "standby", "--update", "on"])
        second = wait("the volume moved", lambda: (lambda l: l if l and l != first else None)(location(n1)), 60)
        if mounted_in(a, mnt):
            fail(f"{first} still has it mounted after standby")
        got = run(b, ["cat", f"{mnt}/hello"]).stdout
        if got != f"written on {first}\n":
            fail(f"{second} reads {got!r}")
        print(f"2. {first} in standby: moved to {second}, which reads the file")
        run(a, ["crm_attribute", "--node", first, "--name", "standby", "--update", "off"])

        pids = daemons_in(b, daemon)
        if len(pids) != 1:
            fail(f"{len(pids)} ocfs2d processes on {second}")
        os.kill(pids[0], signal.SIGKILL)
        t0 = time.time()
        wait("pacemaker noticing the dead daemon (fail count)",
             lambda: sum(fail_counts(n1).values()) >= 1, 60)
        wait("the volume served again", lambda: (location(n1) and (mounted_in(n1, mnt) or mounted_in(n2, mnt))
                                              and (daemons_in(n1, daemon) or daemons_in(n2, daemon))), 60)
        where = nodes[location(n1)]
        got = wait("the file after recovery",
                   lambda: where.run(["cat", f"{mnt}/hello"]).stdout, 30)
        if got != f"written on {first}\n":
            fail(f"after the kill, {location(n1)} reads {got!r}")
        print(f"3. ocfs2d SIGKILLed on {second}: failure seen and the volume served again on "
              f"{location(n1)} in {time.time() - t0:.1f} s (fail counts {fail_counts(n1)})")

        run(n1, ["crm_resource", "--resource", "vol", "--meta", "--set-parameter", "target-role",
                 "--parameter-value", "Stopped"])
        wait("the volume stopped", lambda: location(n1) is None and not mounted_in(n1, mnt)
             and not mounted_in(n2, mnt), 60)
        wait("ocfs2d exiting once idle", lambda: not daemons_in(n1, daemon) and not daemons_in(n2, daemon), 30)
        r = subprocess.run(["fsck.ocfs2", "-fn", img], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"fsck.ocfs2 -fn after the resource stopped: exit {r.returncode}\n{r.stdout}")
        print("4. stopped: mounted nowhere, fsck.ocfs2 -fn clean")
        ok = True
    finally:
        for p in pcmk:
            if p.poll() is None:
                p.terminate()
        for p in pcmk:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        if not ok:
            for nd in cluster.nodes:
                try:
                    with open(os.path.join(nd.top, "pcmk-log", "pacemaker.log")) as f:
                        lines = f.read().splitlines()
                    print(f"---- n{nd.nodeid} pacemaker.log (agent lines, last 60) ----")
                    print("\n".join([ln for ln in lines if "vol" in ln][-60:]))
                except OSError:
                    pass
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
