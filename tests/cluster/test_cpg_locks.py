#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The CPG lock service over a real corosync.

Each node is a private corosync in namespaces of its own (network, mount,
IPC, UTS: its /run, /dev/shm and configuration are the test's, not the
machine's), plugged into a bridge in a network namespace of its own
(docs/ARCHITECTURE.md, "Several nodes on one machine"); lockclient
processes join one CPG group through them, each with its own lock table.  Cases:

  counter  four members increment a shared counter file under an EX lock, a
           window open in each critical section; one joins while the others
           run (it gets the table as a snapshot over CPG).  Any lost update
           means two members held EX at once; every valid value block must
           carry the counter the file holds.
  failure  a member holding EX is SIGKILLed: corosync reports it gone, and
           the lock stays frozen (the others make no progress) until an
           admin member sends FENCED and RECOVERED for its node; then they
           finish, without a valid value block at first.
  nodes    three corosync nodes on a private bridge, a member on each,
           incrementing the counter: agreed order across real nodes.
  nodedown the node of a member holding EX loses power (its corosync is
           killed): the others see NODEDOWN and wait until FENCED and
           RECOVERED for that node.
  partition the node of a member holding EX is cut off from the bridge, then
           the cut heals: each side sees the other's members come back as
           stale (no snapshot, no state conflict); a member joining then
           waits (two tables in the group) until the cut-off node is fenced
           (powered off), then syncs and sends FENCED and RECOVERED, and the
           majority finishes.
  cache    the daemon's lock cache (cacheclient) on each of three nodes, and
           a late joiner: threads in every member add to a counter kept
           in a file and cached under the lock, read under PR first now and
           then (two nodes converting PR to EX at once must not deadlock).
           No update may be lost, the value block must match the file at
           every refresh, and a lock only one member wants must cost that
           member one request however often it is taken.
  bigjoin  lock lifetime: a member on each of three nodes takes and caches
           50,000 distinct inode locks (BIGJOIN_N), 150,000 in the table;
           then a fourth member joins and must have its state (one deflated
           snapshot) within BIGJOIN_BOUND seconds (default 30).
  lru      lock lifetime: two members with a bound of 200 unreferenced
           resources each take 5,000 distinct locks, half of them the
           other's too (so drops race with downconverts the other asks
           for), every tenth forgotten: each must end with at most 200
           resources cached, having dropped the rest, and never have seen
           more than twice the bound unreferenced.

Needs root, corosync, unshare, nsenter and ip; otherwise exits 77 (skip).
The cluster itself is o2test.cluster's.  By hand, from the top of the tree:

    PYTHONPATH=tests python3 tests/cluster/test_cpg_locks.py build/tests/cluster/lockclient CASE

Usage: test_cpg_locks.py LOCKCLIENT CASE
"""
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time

from o2test.cluster import Cluster, fail, finish, need_cluster_tools, wait_line


def counter(path):
    with open(path) as f:
        return int(f.read())


def new_counter(tmp):
    path = os.path.join(tmp, "counter")
    with open(path, "w") as f:
        f.write("0\n")
    return path


def holder_and_workers(client, victim, others, path, n):
    """victim's member takes the counter lock in EX; the others' members ask for it."""
    holder = victim.spawn([client, "ocfs2d-test", "hold", "counter"])
    wait_line(holder, "held", 30)
    workers = [nd.spawn([client, "ocfs2d-test", "count", path, str(n), "counter"])
               for nd in others]
    for w in workers:
        wait_line(w, "synced", 30)
    return holder, workers


def recover_and_finish(admin_node, client, nodeid, workers, path, expected):
    """FENCED and RECOVERED for nodeid; then the workers must finish the count."""
    admin = admin_node.spawn([client, "ocfs2d-test", "admin", str(nodeid)])
    finish(admin, "admin (FENCED, RECOVERED)")
    outs = [finish(w, f"worker {i}") for i, w in enumerate(workers)]
    got = counter(path)
    if got != expected:
        fail(f"counter {got}, expected {expected}")
    return outs


def case_counter(cluster, client, tmp):
    node = cluster.nodes[0]
    path = new_counter(tmp)
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


def case_failure(cluster, client, tmp):
    node = cluster.nodes[0]
    path = new_counter(tmp)
    holder, workers = holder_and_workers(client, node, [node, node], path, 40)
    time.sleep(0.5)
    if counter(path) != 0:
        fail("a member got EX while another held it")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    time.sleep(1.5)  # corosync reports the death at once (PROCDOWN)
    if counter(path) != 0:
        fail("the dead member's EX was given away before it was fenced and recovered")
    print("dead member's lock stays frozen")
    outs = recover_and_finish(node, client, 1, workers, path, 80)
    # the first grant after the recovery has no value block (the dead EX holder's is void)
    if not any("done, 0 grants" not in o for o in outs):
        fail("every grant had a valid value block: the dead holder's was not voided")
    print("after FENCED and RECOVERED: counter 80; " + "; ".join(o.strip() for o in outs))


def case_nodes(cluster, client, tmp):
    """One member on each of three nodes: agreed order across real nodes."""
    path = new_counter(tmp)
    n = 100
    members = [nd.spawn([client, "ocfs2d-test", "count", path, str(n), "counter"])
               for nd in cluster.nodes]
    for i, p in enumerate(members):
        print(f"node {i + 1}: {finish(p, f'member on node {i + 1}').strip().splitlines()[-1]}")
    got = counter(path)
    if got != len(members) * n:
        fail(f"counter {got}, expected {len(members) * n}: two nodes held EX at once")
    print(f"counter {got}: no update lost across {len(members)} nodes")


def case_nodedown(cluster, client, tmp):
    """A node holding EX loses power: NODEDOWN, frozen until FENCED and RECOVERED."""
    path = new_counter(tmp)
    victim = cluster.nodes[2]
    holder, workers = holder_and_workers(client, victim, cluster.nodes[:2], path, 30)
    victim.kill()
    holder.wait()
    # corosync notices within a few token timeouts; nothing may move before or after
    time.sleep(6)
    if counter(path) != 0:
        fail("the dead node's EX was given away before it was fenced and recovered")
    print("node 3 down: its lock stays frozen (6 s watched)")
    recover_and_finish(cluster.nodes[0], client, victim.nodeid, workers, path, 60)
    print("after FENCED and RECOVERED of node 3: counter 60")


def case_partition(cluster, client, tmp):
    """The node of a member holding EX is cut off and comes back: the majority
    goes on (the member is stale, its lock frozen until FENCED and RECOVERED)."""
    path = new_counter(tmp)
    victim = cluster.nodes[2]
    holder, workers = holder_and_workers(client, victim, cluster.nodes[:2], path, 30)
    cluster.cut(victim.nodeid)
    time.sleep(6)
    if counter(path) != 0:
        fail("the cut-off node's EX was given away")
    cluster.heal(victim.nodeid)
    for w in workers:
        wait_line(w, "stale node 3", 40)
    wait_line(holder, "stale node 1", 10)
    print("healed: each side sees the other's members as stale")
    if counter(path) != 0:
        fail("the stale member's EX was given away before FENCED and RECOVERED")
    # a member joining now would get either side's table: it waits
    admin = cluster.nodes[0].spawn([client, "ocfs2d-test", "admin", str(victim.nodeid)])
    time.sleep(3)
    if admin.poll() is not None:
        fail(f"a member joined while two tables were in the group ({admin.returncode})")
    os.set_blocking(admin.stdout.fileno(), False)
    try:
        early = os.read(admin.stdout.fileno(), 4096)
    except BlockingIOError:
        early = b""
    os.set_blocking(admin.stdout.fileno(), True)
    if early:
        fail(f"a member got a table while two were in the group: {early!r}")
    if holder.poll() is not None:
        fail(f"the stale holder ended ({holder.returncode}): {holder.stderr.read()}")
    # pacemaker fences the cut-off node: power off; then the joiner gets the majority's
    victim.kill()
    holder.wait()
    finish(admin, "admin (FENCED, RECOVERED)")
    for i, w in enumerate(workers):
        finish(w, f"worker {i}")
    got = counter(path)
    if got != 60:
        fail(f"counter {got}, expected 60")
    print("node 3 fenced: the waiting member synced, FENCED and RECOVERED, counter 60")


# case: (function, nodes)
def case_cache(cluster, client, tmp):
    """The lock cache over the service: local users share cached grants."""
    cacheclient = os.path.join(os.path.dirname(client), "cacheclient")
    path = new_counter(tmp)
    threads, n = 3, int(os.environ.get("CACHE_N", "120"))
    members = [nd.spawn([cacheclient, "ocfs2d-test", path, str(threads), str(n), "counter"])
               for nd in cluster.nodes]
    time.sleep(1.0)  # (wait_line would eat the lines after "synced")
    late = cluster.nodes[0].spawn([cacheclient, "ocfs2d-test", path, str(threads), str(n),
                                   "counter"])
    members.append(late)
    locks = requests = 0
    for i, p in enumerate(members):
        lines = finish(p, f"cache member {i}", timeout=200).strip().splitlines()
        private = [ln.split() for ln in lines if ln.startswith("private ")]
        if private != [["private", str(2 * n), "1"]]:
            fail(f"member {i}, a lock nobody else wants: {private} (want {2 * n} locks, "
                 "1 request): the cache did not cache")
        out = lines[-1].split()
        if out[0] != "done":
            fail(f"member {i} said {out}")
        print(f"member {i}: {out[1]} locks, {out[2]} requests, {out[3]} downconverts, "
              f"{out[4]} cancels")
        locks += int(out[1])
        requests += int(out[2])
    expected = len(members) * threads * n
    got = counter(path)
    if got != expected:
        fail(f"counter {got}, expected {expected}: an update was lost")
    want = len(members) * (threads * (n + (n + 3) // 4) + 2 * n)
    if locks != want:
        fail(f"{locks} locks taken, expected {want}")
    print(f"counter {got}: no update lost; {requests} requests served {locks} locks "
          f"({len(members) * 2 * n} of them on locks nobody else wanted, 1 request each)")


class Lines:
    """p's stdout, line by line, read on a thread (no lines eaten)."""

    def __init__(self, p):
        self.p, self.q = p, queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def until(self, prefix, timeout):
        deadline = time.time() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                fail(f"no '{prefix}' line within {timeout} s")
            if line is None:
                self.p.wait()
                fail(f"client ended ({self.p.returncode}) before '{prefix}': "
                     f"{self.p.stderr.read()}")
            if line.startswith(prefix):
                return line.split()
            if time.time() > deadline:
                fail(f"no '{prefix}' line within {timeout} s")

    def end(self, what, timeout):
        try:
            self.p.wait(timeout=timeout)
        except Exception:
            self.p.kill()
            fail(f"{what} did not finish")
        if self.p.returncode != 0:
            fail(f"{what} exited {self.p.returncode}: {self.p.stderr.read().strip()}")


def case_bigjoin(cluster, client, tmp):
    """150,000 cached locks in the table; a joiner still syncs, quickly."""
    cacheclient = os.path.join(os.path.dirname(client), "cacheclient")
    per = int(os.environ.get("BIGJOIN_N", "50000"))
    bound = float(os.environ.get("BIGJOIN_BOUND", "30"))
    threads = os.environ.get("BIGJOIN_THREADS", "16")
    holders = [Lines(nd.spawn([cacheclient, "ocfs2d-test", "many", str(1000 + i * per), str(per),
                               threads, "0", "1"]))
               for i, nd in enumerate(cluster.nodes)]
    for i, h in enumerate(holders):
        t = h.until("taken", 280)
        if int(t[1]) != per or int(t[3]) != 0 or int(t[4]) != per:
            fail(f"member {i}: {t} (want {per} locks cached, none dropped)")
        print(f"member {i}: {per} distinct locks taken and cached in {t[7]} s "
              f"({t[2]} requests)")
    t0 = time.time()
    joiner = Lines(cluster.nodes[0].spawn([cacheclient, "ocfs2d-test", "join"]))
    synced = joiner.until("synced", 120)
    wall = time.time() - t0
    joiner.end("joiner", 60)
    secs = float(synced[1])
    print(f"joiner: synced {secs:.3f} s after joining ({wall:.3f} s from its start), "
          f"{3 * per} locks in the table")
    if secs > bound:
        fail(f"the joiner took {secs:.3f} s to sync, more than {bound} s")
    for h in holders:
        h.p.send_signal(signal.SIGTERM)
    for i, h in enumerate(holders):
        h.until("done", 200)
        h.end(f"member {i}", 60)
    print(f"joined with {3 * per} locks held in {secs:.3f} s (bound {bound} s)")


def case_lru(cluster, client, tmp):
    """A bound on unreferenced resources keeps a member's locks few."""
    cacheclient = os.path.join(os.path.dirname(client), "cacheclient")
    limit, count = 200, int(os.environ.get("LRU_N", "5000"))
    members = [Lines(nd.spawn([cacheclient, "ocfs2d-test", "many", str(i * count // 2), str(count),
                               "4", str(limit), "0"]))
               for i, nd in enumerate(cluster.nodes[:2])]
    for i, m in enumerate(members):
        t = m.until("taken", 250)
        taken, requests, drops, resources, unused, maxunused = map(int, t[1:7])
        print(f"member {i}: {taken} locks in {t[7]} s, {requests} requests, {drops} dropped, "
              f"{resources} cached at the end ({unused} unreferenced), at most {maxunused} "
              f"unreferenced seen")
        if resources > limit or unused > limit:
            fail(f"member {i}: {resources} resources cached, {unused} unreferenced, bound {limit}")
        if drops < taken - limit:
            fail(f"member {i}: {drops} dropped of {taken} taken with a bound of {limit}")
        if maxunused > 2 * limit:
            fail(f"member {i}: {maxunused} unreferenced resources seen, bound {limit}")
        m.until("done", 120)
        m.end(f"member {i}", 60)
    print(f"bound {limit}: every member stayed under it")


CASES = {
    "counter": (case_counter, 1),
    "failure": (case_failure, 1),
    "nodes": (case_nodes, 3),
    "nodedown": (case_nodedown, 3),
    "partition": (case_partition, 3),
    "cache": (case_cache, 3),
    "bigjoin": (case_bigjoin, 3),
    "lru": (case_lru, 2),
}


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        print(__doc__)
        sys.exit(2)
    client, case = os.path.abspath(sys.argv[1]), sys.argv[2]
    need_cluster_tools("namespaces, corosync")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-cpg-")
    cluster = Cluster(tmp, CASES[case][1])
    try:
        CASES[case][0](cluster, client, tmp)
    finally:
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")


if __name__ == "__main__":
    main()
