#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The CPG lock service over a real corosync.

A private corosync runs in namespaces of its own (network, mount, IPC, UTS:
its /run, /dev/shm and configuration are the test's, not the machine's), and
lockclient processes join one CPG group through it, each with its own lock
table.  Cases:

  counter  four members increment a shared counter file under an EX lock, a
           window open in each critical section; one joins while the others
           run (it gets the table as a snapshot over CPG).  Any lost update
           means two members held EX at once; every valid value block must
           carry the counter the file holds.
  failure  a member holding EX is SIGKILLed: corosync reports it gone, and
           the lock stays frozen (the others make no progress) until an
           admin member sends FENCED and RECOVERED for its node; then they
           finish, without a valid value block at first.

Needs root, corosync, unshare, nsenter and ip; otherwise exits 77 (skip).
Usage: test_cpg_locks.py LOCKCLIENT CASE
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

COROSYNC_CONF = """totem {
	version: 2
	cluster_name: ocfs2d-test
	crypto_cipher: none
	crypto_hash: none
	token: 1000
}
logging {
	to_stderr: yes
	to_logfile: no
	to_syslog: no
}
quorum {
	provider: corosync_votequorum
}
nodelist {
	node {
		name: n1
		nodeid: 1
		ring0_addr: 127.0.0.1
	}
}
system {
	move_to_root_cgroup: no
}
"""


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(77)


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


class Node:
    """One corosync in namespaces of its own, and a way to run commands there."""

    def __init__(self, top):
        self.top = top
        for d in ("etc", "lib", "log"):
            os.makedirs(os.path.join(top, d), exist_ok=True)
        with open(os.path.join(top, "etc", "corosync.conf"), "w") as f:
            f.write(COROSYNC_CONF)
        script = (
            "set -e; ip link set lo up; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /dev/shm; "
            f"mount --bind {top}/etc /etc/corosync; mount --bind {top}/lib /var/lib/corosync; "
            f"mkdir -p /var/log/corosync; mount --bind {top}/log /var/log/corosync; "
            "exec corosync -f")
        self.log = open(os.path.join(top, "corosync.out"), "w")
        self.proc = subprocess.Popen(
            ["unshare", "--net", "--mount", "--uts", "--ipc", "--propagation", "private",
             "sh", "-c", script], stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = None
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                fail(f"corosync exited ({self.proc.returncode}): {self.output()}")
            pid = self.corosync_pid()
            if pid and self.run(["corosync-quorumtool", "-s"], pid=pid).returncode == 0:
                self.pid = pid
                return
            time.sleep(0.2)
        fail(f"corosync did not become ready: {self.output()}")

    def corosync_pid(self):
        # unshare execs sh, which execs corosync: the same process
        try:
            with open(f"/proc/{self.proc.pid}/comm") as f:
                return self.proc.pid if f.read().strip() == "corosync" else None
        except OSError:
            return None

    def output(self):
        self.log.flush()
        with open(os.path.join(self.top, "corosync.out")) as f:
            return f.read()[-2000:]

    def enter(self, pid=None):
        return ["nsenter", "-t", str(pid or self.pid), "-m", "-n", "-i", "-u", "--"]

    def run(self, cmd, pid=None):
        return subprocess.run(self.enter(pid) + cmd, capture_output=True, text=True, timeout=30)

    def spawn(self, cmd):
        return subprocess.Popen(self.enter() + cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


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


def counter(path):
    with open(path) as f:
        return int(f.read())


def case_counter(node, client, tmp):
    path = os.path.join(tmp, "counter")
    with open(path, "w") as f:
        f.write("0\n")
    n = 150
    first = [node.spawn([client, "ocfs2d-test", "count", path, str(n), "counter"])
             for _ in range(3)]
    time.sleep(0.3)
    late = node.spawn([client, "ocfs2d-test", "count", path, str(n), "counter"])
    for i, p in enumerate(first + [late]):
        print(f"member {i}: {finish(p, f'member {i}').strip().splitlines()[-1]}")
    got = counter(path)
    if got != 4 * n:
        fail(f"counter {got}, expected {4 * n}: two members held EX at once")
    print(f"counter {got}: no update lost")


def case_failure(node, client, tmp):
    path = os.path.join(tmp, "counter")
    with open(path, "w") as f:
        f.write("0\n")
    holder = node.spawn([client, "ocfs2d-test", "hold", "counter"])
    wait_line(holder, "held", 30)
    workers = [node.spawn([client, "ocfs2d-test", "count", path, "40", "counter"])
               for _ in range(2)]
    for w in workers:
        wait_line(w, "synced", 30)
    time.sleep(0.5)
    if counter(path) != 0:
        fail("a member got EX while another held it")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(1.5)  # corosync reports the death at once (PROCDOWN)
    if counter(path) != 0:
        fail("the dead member's EX was given away before it was fenced and recovered")
    print("dead member's lock stays frozen")
    admin = node.spawn([client, "ocfs2d-test", "admin", "1"])
    finish(admin, "admin (FENCED, RECOVERED)")
    outs = [finish(w, f"worker {i}") for i, w in enumerate(workers)]
    got = counter(path)
    if got != 80:
        fail(f"counter {got}, expected 80")
    # the first grant after the recovery has no value block (the dead EX holder's is void)
    if not any("done, 0 grants" not in o for o in outs):
        fail("every grant had a valid value block: the dead holder's was not voided")
    print(f"after FENCED and RECOVERED: counter {got}; " + "; ".join(o.strip() for o in outs))


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("counter", "failure"):
        print(__doc__)
        sys.exit(2)
    client, case = os.path.abspath(sys.argv[1]), sys.argv[2]
    if os.geteuid() != 0:
        skip("needs root (namespaces, corosync)")
    for tool in ("corosync", "corosync-quorumtool", "unshare", "nsenter", "ip"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-cpg-")
    node = Node(os.path.join(tmp, "n1"))
    try:
        {"counter": case_counter, "failure": case_failure}[case](node, client, tmp)
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
