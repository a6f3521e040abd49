# SPDX-License-Identifier: GPL-2.0-or-later
"""Clusters of the test's own: each node a private corosync in namespaces of
its own (network, mount, IPC, UTS: its /run, /dev/shm and configuration are
the test's, not the machine's), plugged into a bridge in a network namespace
of its own (docs/ARCHITECTURE.md, "Several nodes on one machine").  Needs root, corosync, unshare,
nsenter and ip (see need_cluster_tools).

    cluster = Cluster(tmp, 3)              # three nodes, formed (quorate)
    try:
        p = cluster.nodes[0].spawn([...])  # a process inside node 1
        cluster.cut(2); cluster.heal(2)    # a partition, healed
        cluster.nodes[2].kill()            # node 3 loses power
    finally:
        cluster.stop()

The helpers end the test on their own: fail() exits 1 saying FAIL, skip()
exits 77 (meson's skip) saying SKIP.
"""
import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from o2test.proc import sanitizer_report

SUBNET = "192.168.77"  # exists only inside the test's namespaces

COROSYNC_CONF = """totem {{
	version: 2
	cluster_name: ocfs2d-test
	crypto_cipher: none
	crypto_hash: none
	token: 1000
}}
logging {{
	to_stderr: yes
	to_logfile: no
	to_syslog: no
}}
quorum {{
	provider: corosync_votequorum
}}
nodelist {{
{nodes}
}}
system {{
	move_to_root_cgroup: no
}}
"""

NODE_CONF = """	node {{
		name: n{i}
		nodeid: {i}
		ring0_addr: {subnet}.{addr}
	}}"""


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    # said again at exit, after whatever logs the test's clean-up prints,
    # so that the end of the output (all a CI report may keep) names it
    atexit.register(print, f"FAIL (as said above, before the logs): {why}")
    sys.exit(1)


def sh(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


def wait_unshared(pid, what):
    """Wait until process pid is in namespaces of its own (one unshare(2) makes
    them all): until then, entering it would mean entering ours."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                return
        except OSError:
            fail(f"{what} ended early")
        time.sleep(0.02)
    fail(f"{what} did not get a namespace of its own")


class Node:
    """One corosync in namespaces of its own (network, mount, IPC, UTS), and a
    way to run commands there.  Its eth0 is one end of a veth pair whose other
    end the cluster plugs into its bridge; corosync starts once it is there."""

    def __init__(self, top, nodeid, conf, extra=""):
        """extra: shell commands run in the node's namespaces before corosync."""
        self.top, self.nodeid = top, nodeid
        for d in ("etc", "lib", "log"):
            os.makedirs(os.path.join(top, d), exist_ok=True)
        with open(os.path.join(top, "etc", "corosync.conf"), "w") as f:
            f.write(conf)
        script = (
            "set -e; while ! ip link show eth0 >/dev/null 2>&1; do sleep 0.05; done; "
            f"ip addr add {SUBNET}.{10 + nodeid}/24 dev eth0; ip link set eth0 up; ip link set lo up; "
            # the copies of FUSE mounts this namespace inherited would keep
            # their connections alive after their owners unmount them
            "awk '{ for (i = 7; i <= NF; i++) if ($i == \"-\") break; "
            "if ($(i + 1) ~ /^fuse(\\.|$|blk)/) print $5 }' /proc/self/mountinfo | sort -r | "
            "while read -r m; do umount -l \"$m\" 2>/dev/null || true; done; "
            "mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /dev/shm; "
            f"mount --bind {top}/etc /etc/corosync; mount --bind {top}/lib /var/lib/corosync; "
            f"mkdir -p /var/log/corosync; mount --bind {top}/log /var/log/corosync; "
            f"{extra}"
            "exec corosync -f")
        self.log = open(os.path.join(top, "corosync.out"), "w")
        self.proc = subprocess.Popen(
            ["unshare", "--net", "--mount", "--uts", "--ipc", "--propagation", "private",
             "sh", "-c", script], stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid  # unshare execs sh, which execs corosync: one process
        wait_unshared(self.pid, f"node {nodeid}")

    def ready(self, members):
        """corosync answers and sees members nodes."""
        if self.proc.poll() is not None:
            fail(f"corosync of node {self.nodeid} exited ({self.proc.returncode}): {self.output()}")
        r = self.run(["corosync-quorumtool", "-s"])
        return r.returncode == 0 and f"Nodes:            {members}" in r.stdout

    def output(self):
        self.log.flush()
        with open(os.path.join(self.top, "corosync.out")) as f:
            return f.read()[-2000:]

    def enter(self):
        return ["nsenter", "-t", str(self.pid), "-m", "-n", "-i", "-u", "--"]

    def run(self, cmd, check=False, timeout=30):
        """cmd in the node's namespaces: its CompletedProcess (text).  check:
        fail() unless it exits 0."""
        r = subprocess.run(self.enter() + cmd, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            fail(f"n{self.nodeid}: {' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
        return r

    def spawn(self, cmd):
        return subprocess.Popen(self.enter() + cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def kill(self):
        """Power off: corosync dies at once (the others see NODEDOWN)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class Cluster:
    """n nodes on a bridge in a network namespace of its own (no uplink)."""

    def __init__(self, top, n, extra=None):
        """extra(top, nodeid): shell commands for each node (see Node)."""
        self.bridge = subprocess.Popen(["unshare", "--net", "sleep", "infinity"])
        self.nodes = []
        wait_unshared(self.bridge.pid, "the bridge")
        try:
            br = ["nsenter", "-t", str(self.bridge.pid), "-n", "--"]
            sh(br + ["ip", "link", "add", "br0", "type", "bridge"])
            sh(br + ["ip", "link", "set", "br0", "up"])
            conf = COROSYNC_CONF.format(nodes="\n".join(
                NODE_CONF.format(i=i, subnet=SUBNET, addr=10 + i) for i in range(1, n + 1)))
            for i in range(1, n + 1):
                ntop = os.path.join(top, f"n{i}")
                node = Node(ntop, i, conf, extra(ntop, i) if extra else "")
                self.nodes.append(node)
                sh(br + ["ip", "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0",
                         "netns", str(node.pid)])
                sh(br + ["ip", "link", "set", f"v{i}", "master", "br0", "up"])
            deadline = time.time() + 40
            while not all(nd.ready(n) for nd in self.nodes):
                if time.time() > deadline:
                    fail("corosync did not form the cluster: " + self.nodes[0].output())
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def port(self, nodeid, state):
        sh(["nsenter", "-t", str(self.bridge.pid), "-n", "--", "bridge", "link", "set", "dev",
            f"v{nodeid}", "state", str(state)])

    def cut(self, nodeid):
        """The node's bridge port stops forwarding: a partition."""
        self.port(nodeid, 0)

    def heal(self, nodeid):
        self.port(nodeid, 3)

    def stop(self):
        for nd in self.nodes:
            nd.stop()
        self.bridge.kill()
        self.bridge.wait()


def wait_line(p, want, timeout):
    """Read p's stdout until a line equal to want (the process must not end first)."""
    deadline = time.time() + timeout
    fd = p.stdout.fileno()
    os.set_blocking(fd, False)
    buf = b""
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            chunk = None
        if chunk:
            buf += chunk
            if want in buf.decode(errors="replace").splitlines():
                os.set_blocking(fd, True)
                return
        elif p.poll() is not None:
            fail(f"client ended ({p.returncode}) before '{want}': {p.stderr.read()}")
        else:
            time.sleep(0.05)
    fail(f"no '{want}' from a client within {timeout} s")


def finish(p, what, timeout=120):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        fail(f"{what} did not finish")
    if p.returncode != 0:
        fail(f"{what} exited {p.returncode}: {err.strip()}")
    return out


def wait_for(what, cond, timeout, interval=0.5, detail=None):
    """Poll cond() until it returns something true, which wait_for returns;
    fail() after timeout seconds, saying detail() too if given (what was
    seen last)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    fail(f"{what}: not within {timeout} s" + (f" ({detail()})" if detail else ""))


CLUSTER_TOOLS = ("corosync", "corosync-quorumtool", "unshare", "nsenter", "ip")


def need_cluster_tools(why, tools=CLUSTER_TOOLS, path=None):
    """skip() unless root and every one of tools is found (in path, default
    $PATH); why: what root is needed for."""
    if os.geteuid() != 0:
        skip(f"needs root ({why})")
    for tool in tools:
        if not shutil.which(tool, path=path):
            skip(f"{tool} is not installed")


# ---- what runs in a node ----

def mounted_in(node, mnt):
    """Whether an ocfs2d (fuse.ocfs2) mount is on mnt in node's mount namespace."""
    r = node.run(["awk", "-v", "m=" + mnt, "$5 == m { print }", "/proc/self/mountinfo"])
    return "fuse.ocfs2" in r.stdout


def show_daemon_log(node, last=40):
    """Print the end of the ocfs2d log in node's /run (lost when the node stops)."""
    print(f"---- n{node.nodeid} ocfs2d log (last {last} lines) ----")
    print(node.run(["sh", "-c", f"cat /run/ocfs2d/*.log 2>/dev/null | tail -n {last}"]).stdout)


def daemon_logs_clean(cluster):
    """fail() if any node's ocfs2d logged a sanitizer report, a critical
    error or a volume turned read-only by an error."""
    for nd in cluster.nodes:
        text = nd.run(["sh", "-c", "cat /run/ocfs2d/*.log 2>/dev/null"]).stdout
        if sanitizer_report(text) or "CRITICAL" in text or "is now read-only" in text:
            fail(f"n{nd.nodeid}'s ocfs2d logged a sanitizer report, a critical error or a "
                 f"turn to read-only:\n{text[-3000:]}")


def stop_nodes(cluster, ctl, ok=True):
    """A test's end: each node's daemon log if it failed (not ok), every
    ocfs2d (the one next to ctl) killed, corosync stopped."""
    daemon = os.path.join(os.path.dirname(ctl), "..", "daemon", "ocfs2d")
    if not ok:
        for nd in cluster.nodes:
            show_daemon_log(nd)
    for nd in cluster.nodes:
        for pid in daemons_in(nd, daemon):
            os.kill(pid, signal.SIGKILL)
    cluster.stop()


def daemons_in(node, daemon):
    """The pids of the processes running daemon (an executable) in node's mount namespace."""
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


# ---- a volume shared by the nodes (one loop device each over one image) ----

def host(cmd, check=True, timeout=120):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stdout}{r.stderr}")
    return r


def slot_map(ctl, img):
    """{slot: node} for the slots in use, as `ocfs2ctl slots` reads the image."""
    out = host([ctl, "--json", "slots", img]).stdout
    return {s["slot"]: s["node"] for s in json.loads(out)["slots"] if s["valid"]}


def free_clusters(m):
    """f_bfree of Mounter m's mount, as statfs(2) answers on its node."""
    r = m.node.run(["python3", "-c", f"import os; print(os.statvfs({m.mnt!r}).f_bfree)"])
    if r.returncode != 0:
        fail(f"n{m.node.nodeid}: statvfs: {r.stderr.strip()}")
    return int(r.stdout)


def fsck_clean(img, when, timeout=900):
    # fsck.ocfs2 mlock()s caches of hundreds of megabytes first (as much as
    # the machine's free memory allows): seconds when idle, minutes on a
    # machine busy with other tests
    r = host(["fsck.ocfs2", "-fn", img], check=False, timeout=timeout)
    if r.returncode != 0 or "All passes succeeded." not in r.stdout:
        fail(f"fsck.ocfs2 -fn {when}: exit {r.returncode}\n{r.stdout[-3000:]}")


TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run inside a node: the tree under argv[1] as o2test.tree snapshots it, with
# each name's extended attributes, as JSON.
SNAPSHOT = """
import json, os, sys
from o2test.tree import snapshot
root = sys.argv[1]
snap = snapshot(root)
for rel, e in snap.items():
    p = os.path.join(root, rel)
    e["xattrs"] = {n: os.getxattr(p, n, follow_symlinks=False).hex()
                   for n in sorted(os.listxattr(p, follow_symlinks=False))}
print(json.dumps(snap, sort_keys=True))
"""


def snap(m):
    """The whole tree under Mounter m's mount point, as its node reads it."""
    # a few hundred names, but on sanitized daemons of a machine at a load
    # of 20 a snapshot has taken over 30 s
    r = m.node.run(["env", f"PYTHONPATH={TESTS}", "python3", "-c", SNAPSHOT, m.mnt], timeout=120)
    if r.returncode != 0:
        fail(f"n{m.node.nodeid}: snapshot of {m.mnt}: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def same_everywhere(writer, readers, what):
    """The readers' trees equal the writer's, read at once after its change."""
    want = snap(writer)
    for m in readers:
        got = snap(m)
        if got != want:
            diff = {k: (want.get(k), got.get(k)) for k in sorted(set(want) | set(got))
                    if want.get(k) != got.get(k)}
            fail(f"{what}: n{m.node.nodeid} sees another tree than n{writer.node.nodeid}:\n"
                 f"{json.dumps(diff, indent=1)[:3000]}")
    return want


def run_at_once(nodes, argv_of, timeout, what):
    """Start argv_of(m) in the node of every Mounter m at once; their
    stdouts, once all have ended.  fail() if one has not ended timeout s
    after the start (a request stuck behind a lock: a deadlock between
    nodes?) or exits other than 0."""
    procs = [subprocess.Popen(m.node.enter() + argv_of(m), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for m in nodes]
    deadline = time.time() + timeout
    outs = []
    for m, p in zip(nodes, procs):
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            fail(f"{what}: n{m.node.nodeid} still runs {timeout:.0f} s after the start: a "
                 f"request stuck behind a lock (a deadlock between nodes)?")
        if p.returncode != 0:
            fail(f"{what}: n{m.node.nodeid} failed: {err.strip()[-3000:]}")
        outs.append(out)
    return outs


def shared_volume_args(doc, optional=0):
    """The start of every test on a shared volume: OCFS2CTL from the command
    line (and up to `optional` more arguments, returned as a list), each
    node's own daemon (not a control socket of the caller's), and what
    they need - corosync, loop devices, FUSE, fsck.ocfs2 - or exit 77."""
    if not 2 <= len(sys.argv) <= 2 + optional:
        print(doc)
        sys.exit(2)
    os.environ.pop("OCFS2D_CONTROL", None)
    need_cluster_tools("namespaces, loop devices, corosync",
                       tools=("corosync", "losetup", "fsck.ocfs2", "unshare", "nsenter", "ip"),
                       path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if not os.path.exists("/dev/fuse"):
        skip("no /dev/fuse")
    return os.path.abspath(sys.argv[1]), sys.argv[2:]


@contextlib.contextmanager
def shared_volume(ctl, prefix, size, format_args, nodes=3):
    """A pcmk volume of size bytes (ocfs2ctl format with format_args, in
    cluster "ocfs2d-test"), a loop device per node over it (direct I/O: the
    nodes share the disk, not a page cache), and a Cluster of that many
    nodes: yields (img, mnt, [Mounter]), all on mnt.  Afterwards the nodes
    stop and the loop devices go; the scratch directory too, unless the
    test failed."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    img, mnt = os.path.join(tmp, "shared.img"), os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    with open(img, "wb") as f:
        f.truncate(size)
    host([ctl, "format", "-q", "--cluster-stack=pcmk", "--cluster-name=ocfs2d-test", "-N",
          str(nodes)] + format_args + [img])
    loops, cluster, ok = [], None, False
    try:
        for _ in range(nodes):
            r = host(["losetup", "-f", "--show", "--direct-io=on", img], check=False)
            if r.returncode != 0:
                skip(f"no loop device: {r.stderr.strip()}")
            loops.append(r.stdout.strip())
        cluster = Cluster(tmp, nodes)
        yield img, mnt, [Mounter(nd, ctl, loops[i], mnt) for i, nd in enumerate(cluster.nodes)]
        daemon_logs_clean(cluster)
        ok = True
    finally:
        if cluster:
            stop_nodes(cluster, ctl, ok)
        for dev in loops:
            host(["losetup", "-d", dev], check=False)
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")


def live_threads(pid):
    """The threads of process pid that have not exited ({tid: kernel wait
    channel}): a process's files - its sockets, /dev/fuse - close only
    when the last one has, even once its first thread is a zombie."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state not in ("Z", "X"):
                with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                    out[int(tid)] = f"{state} {f.read().strip()}"
        except OSError:
            pass
    return out


class Mounter:
    """One node's view of the volume: its loop device and its mount point."""

    def __init__(self, node, ctl, dev, mnt):
        self.node, self.ctl, self.dev, self.mnt = node, ctl, dev, mnt
        self.daemon = os.path.join(os.path.dirname(ctl), "..", "daemon", "ocfs2d")

    def daemons(self):
        return daemons_in(self.node, self.daemon)

    def locks(self):
        """The lock counters of this node's daemon (ClusterState, through
        ocfs2ctl slots --json)."""
        r = self.node.run([self.ctl, "--json", "slots", self.mnt])
        if r.returncode != 0:
            fail(f"n{self.node.nodeid}: ocfs2ctl slots {self.mnt}: {r.stderr.strip()}")
        return json.loads(r.stdout)["locks"]

    def kill_daemons(self):
        """SIGKILL this node's ocfs2d (a crash) and wait until every thread
        of it is gone: the kill is asynchronous, and until then its control
        socket still takes connections, which it then resets (seen: the
        next mount failed with "Connection reset by peer").  Returns how
        many."""
        pids = self.daemons()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        deadline = time.time() + 30
        for pid in pids:
            while time.time() < deadline and live_threads(pid):
                time.sleep(0.05)
            if live_threads(pid):
                fail(f"n{self.node.nodeid}: ocfs2d {pid} still has threads 30 s after "
                     f"SIGKILL: {live_threads(pid)}")
        return len(pids)

    def mount(self, opts=None):
        # CLUSTER_MOUNT_OPTS: added to every mount (a suite run again with uring, say)
        opts = ",".join(o for o in (opts, os.environ.get("CLUSTER_MOUNT_OPTS")) if o)
        cmd = [self.ctl, "mount"] + (["-o", opts] if opts else []) + [self.dev, self.mnt]
        return self.node.run(cmd)

    def must_mount(self, opts=None):
        r = self.mount(opts)
        if r.returncode != 0:
            fail(f"n{self.node.nodeid}: mount failed ({r.returncode}): {r.stderr.strip()}\n"
                 f"{self.log()}")
        return r

    def refused(self, what, words, opts=None):
        r = self.mount(opts)
        if r.returncode == 0:
            fail(f"n{self.node.nodeid} mounted although {what}")
        msg = r.stderr.strip()
        missing = [w for w in words if w not in msg]
        if missing:
            fail(f"n{self.node.nodeid}, {what}: the refusal does not name {missing}: {msg}")
        if self.node.run(["mountpoint", "-q", self.mnt]).returncode == 0:
            fail(f"n{self.node.nodeid}: something is mounted after a refused mount")
        print(f"   n{self.node.nodeid} refused: {msg}")

    def umount(self, timeout=30):
        """timeout: for ocfs2ctl umount (a node caching many locks gives
        each back with a message of its own)."""
        r = self.node.run([self.ctl, "umount", self.mnt], timeout=timeout)
        if r.returncode != 0:
            fail(f"n{self.node.nodeid}: umount failed: {r.stderr.strip()}")
        deadline = time.time() + 30
        while self.daemons():  # a daemon ocfs2ctl started exits once idle
            if time.time() > deadline:
                fail(f"n{self.node.nodeid}: ocfs2d still runs 30 s after the last unmount")
            time.sleep(0.1)

    def slot(self):
        out = self.node.run([self.ctl, "--json", "mounts"]).stdout
        for m in json.loads(out or "[]"):
            if m["mountpoint"] == self.mnt:
                return m["slot"]
        fail(f"n{self.node.nodeid}: {self.mnt} is not in `ocfs2ctl mounts`: {out}")

    def sh(self, script):
        r = self.node.run(["sh", "-c", script])
        if r.returncode != 0:
            fail(f"n{self.node.nodeid}: {script}: {r.stderr.strip()}")
        return r.stdout

    def log(self):
        return self.node.run(["sh", "-c", "cat /run/ocfs2d/*.log 2>/dev/null | tail -n 30"]).stdout
