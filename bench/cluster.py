#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Clustered mounts, measured: what sharing a volume between nodes costs.

Runs on this machine as root: corosync nodes in namespaces of their own
(tests/o2test/cluster.py, as the cluster suite has them), one pcmk volume
image and a loop device per node over it.  Every figure comes from one run:

  rtt        the lock service's own cost: one lock message (an agreed CPG
             multicast delivered back to its sender), from `lockclient rtt`
  pingpong   n1 (read-write) writes one block of one file, n2 (read-only)
             reads it back, alternately: the time of one transfer of the
             block between the nodes, in round trips, and the lock messages
             each round costs
  parallel   n1 and n2 mount one pcmk volume read-write and run the
             workload below at once, each in a directory of its own; the
             same two nodes each on a pcmk volume of its own: the ratio
             (sharing a volume when not sharing files), and lock messages
  alone      n1 alone mounts the pcmk volume (cluster mode) and runs a small
             metadata workload (create+write, stat walk, read, unlink N
             files); the same workload on a `-M local` volume of the same
             size mounted by n1's ocfs2d: the ratio, and lock messages per
             operation
  statwalk   a second stat walk of the N files on n1 (the median of five
             walks after the first), against kernel ext4 on a loop device
             (the same walks)

Goals (the clustered-mounts issue): pingpong <= 4 round trips, parallel >=
0.9x, alone >= 0.9x,
statwalk >= 0.8x ext4.  Usage: bench/cluster.py [--build DIR] [--files N]
[--rounds N].
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, "tests"))

from o2test.cluster import Cluster, Mounter, host, need_cluster_tools, stop_nodes  # noqa: E402

# A worker inside a node: reads commands on stdin, answers one JSON line each.
WORKER = r"""
import json, os, sys, time
def timed(fn):
    t = time.monotonic(); n = fn(); return {"s": time.monotonic() - t, "n": n}
fd = None
for line in sys.stdin:
    cmd, *a = line.split()
    if cmd == "open":
        fd = os.open(a[0], os.O_RDWR | os.O_CREAT if a[1] == "w" else os.O_RDONLY, 0o644)
        out = {}
    elif cmd == "w":
        t = time.monotonic()
        os.pwrite(fd, a[0].encode().ljust(4096, b"."), 0); out = {"s": time.monotonic() - t}
    elif cmd == "r":
        t = time.monotonic()
        got = os.pread(fd, 4096, 0).split(b".")[0].decode()
        out = {"got": got, "s": time.monotonic() - t}
    elif cmd == "create":
        d, n = a[0], int(a[1]); os.makedirs(d, exist_ok=True)
        def f():
            for i in range(n):
                with open(f"{d}/f{i}", "wb") as x: x.write(b"x" * 4096)
            return n
        out = timed(f)
    elif cmd == "stat":
        d = a[0]
        out = timed(lambda: sum(1 for e in os.scandir(d) if e.stat(follow_symlinks=False)))
    elif cmd == "read":
        d = a[0]
        def f():
            n = 0
            for e in os.scandir(d):
                with open(e.path, "rb") as x: x.read(); n += 1
            return n
        out = timed(f)
    elif cmd == "unlink":
        d = a[0]
        def f():
            n = 0
            for e in os.scandir(d): os.unlink(e.path); n += 1
            return n
        out = timed(f)
    print(json.dumps(out), flush=True)
"""


class Worker:
    """WORKER running in a node, asked one line at a time."""

    def __init__(self, node):
        self.p = subprocess.Popen(node.enter() + ["python3", "-c", WORKER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            raise SystemExit(f"worker died on {line!r}: {self.p.stderr.read()[-2000:]}")
        return json.loads(out)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def messages(m):
    out = m.node.run([m.ctl, "--json", "slots", m.mnt], check=True).stdout
    return json.loads(out)["locks"]["messages"]


COUNTERS = ("messages", "blocking", "waits", "wait_us", "writeback_us")
IO = ("journal_commits", "journal_log_blocks", "journal_times_home", "device_flushes",
      "lock_refreshes", "lock_refreshes_kept")


def counters(m):
    """m's lock counters (COUNTERS) and journal and device counters (IO)."""
    locks = json.loads(m.node.run([m.ctl, "--json", "slots", m.mnt], check=True).stdout)["locks"]
    io = json.loads(m.node.run([m.ctl, "--json", "stats", m.mnt], check=True).stdout)
    return {k: locks.get(k, 0) for k in COUNTERS} | {k: io.get(k, 0) for k in IO}


def per_round(before, after, rounds):
    return {k: round((after[k] - before[k]) / rounds, 2) for k in before}


# Walks after the first, of which stat2 is the median: one walk of 10,000
# cached files takes some 50 ms, where a scheduling hiccup shows.
WALKS = 5


def workload(w, d, n):
    """create, stat walk, read, unlink n files under d: {phase: seconds}."""
    res = {"create": w.ask(f"create {d} {n}")["s"], "stat": w.ask(f"stat {d}")["s"]}
    res["stat2"] = statistics.median(w.ask(f"stat {d}")["s"] for _ in range(WALKS))
    res["read"] = w.ask(f"read {d}")["s"]
    res["unlink"] = w.ask(f"unlink {d}")["s"]
    return res


PHASES = ("create", "stat", "stat2", "read", "unlink")


def workload_at_once(workers, dirs, n):
    """workload on every worker at once, phase by phase: {phase: seconds
    until the last worker ends it}."""
    res = {}
    for ph in PHASES:
        cmd = "stat" if ph == "stat2" else ph
        args = [f"{cmd} {d}" + (f" {n}" if ph == "create" else "") for d in dirs]
        took = []
        for _ in range(WALKS if ph == "stat2" else 1):
            t0 = time.monotonic()
            threads = [threading.Thread(target=w.ask, args=(a,)) for w, a in zip(workers, args)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took.append(time.monotonic() - t0)
        res[ph] = statistics.median(took)
    return res


def print_pingpong(res, alone=True):
    """The round trip and the ping-pong with its breakdown (alone: and the JSON)."""
    p = res["pingpong"]
    print(f"lock message (CPG agreed round trip):  {res['rtt_us']:8.1f} us")
    print(f"ping-pong, one block n1 -> n2 -> n1:   {p['us_per_transfer']:8.1f} us per transfer = "
          f"{p['round_trips']} round trips (goal <= 4); {p['lock_messages_per_round']} lock "
          f"messages per round")
    print(f"  timed inside the workers (no harness round trip): {p['us_per_transfer_inside']:.1f} "
          f"us per transfer = {p['round_trips_inside']} round trips")
    print(f"  a round: n1's pwrite {p['write_us']:.0f} us, n2's pread {p['read_us']:.0f} us")
    for who in ("writer", "reader"):
        q = p[who]
        print(f"  {who} per round: {q['messages']} messages sent, {q['blocking']} blocking asks, "
              f"{q['waits']} lock waits ({q['wait_us']:.0f} us), writing back "
              f"{q['writeback_us']:.0f} us; {q['journal_commits']} commits "
              f"({q['journal_log_blocks']} log blocks), {q['journal_times_home']} times home "
              f"unlogged, {q['device_flushes']} device flushes; {q['lock_refreshes']} lock "
              f"refreshes, {q['lock_refreshes_kept']} of them without a read (value block)")
    if alone:
        print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--pingpong-only", action="store_true",
                    help="measure the lock round trip and the ping-pong, nothing else")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/cluster.py: must run as root")
    ctl = os.path.join(args.build, "cli", "ocfs2ctl")
    lockclient = os.path.join(args.build, "tests", "cluster", "lockclient")
    os.environ.pop("OCFS2D_CONTROL", None)
    need_cluster_tools("namespaces, loop devices, corosync",
                       tools=("corosync", "losetup", "unshare", "nsenter", "ip", "mkfs.ext4"),
                       path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    tmp = tempfile.mkdtemp(prefix="ocfs2d-bench-cluster-")
    img, local, ext4 = (os.path.join(tmp, n) for n in ("shared.img", "local.img", "ext4.img"))
    sep = [os.path.join(tmp, f"own{i}.img") for i in (1, 2)]
    mnt, lmnt, emnt = (os.path.join(tmp, n) for n in ("mnt", "local-mnt", "ext4-mnt"))
    smnt = os.path.join(tmp, "own-mnt")
    for d in (mnt, lmnt, emnt, smnt):
        os.mkdir(d)
    for path in [img, local, ext4] + sep:
        with open(path, "wb") as f:
            f.truncate(1 << 30)
    for path in [img] + sep:
        host([ctl, "format", "-q", "--cluster-stack=pcmk", "--cluster-name=ocfs2d-test", "-N",
              "3", "-b", "4096", path])
    host([ctl, "format", "-q", "-M", "local", "-b", "4096", local])
    host(["mkfs.ext4", "-q", "-F", ext4])
    loops, cluster, res, ext4_mounted = [], None, {}, False
    try:
        for path in [img, img, local, ext4] + sep:
            loops.append(host(["losetup", "-f", "--show", "--direct-io=on", path]).stdout.strip())
        cluster = Cluster(tmp, 2)
        n1, n2 = (Mounter(nd, ctl, loops[i], mnt) for i, nd in enumerate(cluster.nodes))

        r = n1.node.run([lockclient, "ocfs2d-bench-rtt", "rtt", "2000", "bench"])
        rtt = float(r.stdout.split("rtt_us")[1].split()[0])
        res["rtt_us"] = rtt

        n1.must_mount()
        n2.must_mount("ro")
        a, b = Worker(n1.node), Worker(n2.node)
        a.ask(f"open {mnt}/pingpong w")
        a.ask("w 0")
        b.ask(f"open {mnt}/pingpong r")
        for i in range(20):  # warm: locks and files known on both
            a.ask(f"w {i}")
            b.ask("r")
        c0 = [counters(n1), counters(n2)]
        t0 = time.monotonic()
        ws = rs = 0.0
        for i in range(args.rounds):
            ws += a.ask(f"w {i}")["s"]
            got = b.ask("r")
            rs += got["s"]
            if got["got"] != str(i):
                raise SystemExit(f"pingpong: n2 read {got['got']!r} after n1 wrote {i}")
        dt = time.monotonic() - t0
        c1 = [counters(n1), counters(n2)]
        msgs = sum(c1[i]["messages"] - c0[i]["messages"] for i in (0, 1)) / args.rounds
        per = dt / (2 * args.rounds) * 1e6
        # the same, timed inside the workers: without the harness's own
        # round trip to them (a pipe into each node's namespace and back)
        inner = (ws + rs) / (2 * args.rounds) * 1e6
        res["pingpong"] = {"us_per_transfer": round(per, 1), "round_trips": round(per / rtt, 1),
                           "us_per_transfer_inside": round(inner, 1),
                           "round_trips_inside": round(inner / rtt, 1),
                           "lock_messages_per_round": round(msgs, 1),
                           "write_us": round(ws / args.rounds * 1e6, 1),
                           "read_us": round(rs / args.rounds * 1e6, 1),
                           "writer": per_round(c0[0], c1[0], args.rounds),
                           "reader": per_round(c0[1], c1[1], args.rounds)}
        a.close()
        b.close()
        n2.umount()
        if args.pingpong_only:
            return print_pingpong(res)

        # n1 and n2 at once in directories of their own: one volume, then two
        n2.must_mount()
        ws = [Worker(n1.node), Worker(n2.node)]
        m0 = messages(n1) + messages(n2)
        res["parallel_shared"] = workload_at_once(ws, [f"{mnt}/n1", f"{mnt}/n2"], args.files)
        res["parallel_shared"]["lock_messages_per_op"] = round(
            (messages(n1) + messages(n2) - m0) / (2 * args.files * 5), 3)
        for w in ws:
            w.close()
        n2.umount()
        own = [Mounter(nd, ctl, loops[4 + i], smnt) for i, nd in enumerate(cluster.nodes)]
        for m in own:
            m.must_mount()
        ws = [Worker(n1.node), Worker(n2.node)]
        res["parallel_own"] = workload_at_once(ws, [f"{smnt}/n1", f"{smnt}/n2"], args.files)
        for w in ws:
            w.close()
        for m in own:
            m.node.run([ctl, "umount", smnt], check=True)

        # n1 alone in cluster mode, then the same on a local volume
        a = Worker(n1.node)
        m0 = messages(n1)
        res["cluster_alone"] = workload(a, f"{mnt}/work", args.files)
        ops = args.files * 5
        res["cluster_alone"]["lock_messages_per_op"] = round((messages(n1) - m0) / ops, 3)
        a.close()
        n1.umount()
        lm = Mounter(cluster.nodes[0], ctl, loops[2], lmnt)
        lm.must_mount()
        a = Worker(n1.node)
        res["local"] = workload(a, f"{lmnt}/work", args.files)
        a.close()
        lm.umount()

        host(["mount", loops[3], emnt])
        ext4_mounted = True
        a = Worker(n1.node)
        res["ext4"] = workload(a, f"{emnt}/work", args.files)
        a.close()
    finally:
        if ext4_mounted:
            host(["umount", emnt], check=False)
        if cluster:
            stop_nodes(cluster, ctl)
        for dev in loops:
            host(["losetup", "-d", dev], check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    c, lo, e = res["cluster_alone"], res["local"], res["ext4"]
    print_pingpong(res, False)
    print(f"{'phase':8} {'cluster (s)':>12} {'local (s)':>10} {'ext4 (s)':>9}  "
          f"{'cluster/local speed':>20} {'cluster/ext4 speed':>19}")
    for ph in ("create", "stat", "stat2", "read", "unlink"):
        print(f"{ph:8} {c[ph]:12.3f} {lo[ph]:10.3f} {e[ph]:9.3f}  {lo[ph] / c[ph]:20.2f}x "
              f"{e[ph] / c[ph]:18.2f}x")
    print(f"lock messages per operation, one node alone: {c['lock_messages_per_op']}")
    ps, po = res["parallel_shared"], res["parallel_own"]
    print(f"two nodes at once, own directories: {'phase':8} {'one volume (s)':>15} "
          f"{'two volumes (s)':>16} {'speed':>7}")
    for ph in PHASES:
        print(f"{'':36}{ph:8} {ps[ph]:15.3f} {po[ph]:16.3f} {po[ph] / ps[ph]:6.2f}x "
              f"(goal >= 0.9x)")
    print(f"lock messages per operation, two nodes on one volume: {ps['lock_messages_per_op']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
