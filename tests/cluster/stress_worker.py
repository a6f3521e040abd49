#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One node's share of the multi-node stress run (test_cluster_stress.py).

Usage: stress_worker.py NODE MOUNTPOINT SECONDS SEED

Random operations for SECONDS on names this node owns (prefix nNODE_) in the
directories every node shares (shared/s0..s3) and in one of its own
(privNODE), keeping a model of what each name should hold: files (data,
mode, one xattr, hard links), symlinks and directories.  Reads of its own
files are checked against the model at once (a stale read fails); other
nodes' files are read and listed too, unchecked, so that locks move.  Every
operation is timed: one that takes longer than 30 s is a request stuck
behind a lock (a deadlock between nodes).  At the end it prints JSON: the
model, what it did, the slowest operation and any failure.
"""
import errno
import hashlib
import json
import os
import random
import sys
import time

SHARED = ["shared/s0", "shared/s1", "shared/s2", "shared/s3"]
STUCK_S = 30.0


class Worker:
    def __init__(self, node, mnt, seed):
        self.node, self.mnt = node, mnt
        self.rng = random.Random(seed)
        self.dirs = SHARED + [f"priv{node}"]  # where this node's names may live
        self.files = {}  # relative name -> inode key
        self.inodes = {}  # inode key -> {"data": bytearray, "mode": int, "xattr": bytes|None}
        self.links = {}  # symlink name -> target
        self.own_dirs = []  # directories this node made (relative)
        self.counter = 0
        self.ops = {}
        self.slowest = (0.0, "")
        self.failure = None

    def path(self, rel):
        return os.path.join(self.mnt, rel)

    def new_name(self, kind="f"):
        self.counter += 1
        parent = self.rng.choice(self.dirs + self.own_dirs)
        return f"{parent}/n{self.node}_{kind}{self.counter}"

    def check(self, rel):
        """Read a file of ours back: it must be what the model says."""
        ino = self.inodes[self.files[rel]]
        with open(self.path(rel), "rb") as f:
            got = f.read()
        if got != bytes(ino["data"]):
            raise AssertionError(f"{rel}: read {len(got)} bytes that differ from the "
                                 f"{len(ino['data'])} the model holds")
        st = os.lstat(self.path(rel))
        if st.st_mode & 0o7777 != ino["mode"]:
            raise AssertionError(f"{rel}: mode {oct(st.st_mode)} not {oct(ino['mode'])}")

    # ---- operations: each returns its name for the counts ----

    def op_create(self):
        rel = self.new_name()
        data = os.urandom(self.rng.choice([0, 10, 4096, 5000, 70000]))
        with open(self.path(rel), "xb") as f:
            f.write(data)
        self.counter += 1
        key = f"i{self.counter}"
        self.inodes[key] = {"data": bytearray(data), "mode": 0o644, "xattr": None}
        os.chmod(self.path(rel), 0o644)
        self.files[rel] = key

    def pick_file(self):
        return self.rng.choice(sorted(self.files)) if self.files else None

    def op_write(self):
        rel = self.pick_file()
        if not rel:
            return
        ino = self.inodes[self.files[rel]]
        off = self.rng.randrange(0, len(ino["data"]) + 8192)
        data = os.urandom(self.rng.choice([1, 100, 4096, 9000]))
        fd = os.open(self.path(rel), os.O_WRONLY)
        try:
            os.pwrite(fd, data, off)
        finally:
            os.close(fd)
        d = ino["data"]
        if off > len(d):
            d.extend(b"\0" * (off - len(d)))
        d[off:off + len(data)] = data

    def op_append(self):
        rel = self.pick_file()
        if not rel:
            return
        data = f"append {self.counter} from n{self.node}\n".encode()
        with open(self.path(rel), "ab") as f:
            f.write(data)
        self.inodes[self.files[rel]]["data"].extend(data)

    def op_truncate(self):
        rel = self.pick_file()
        if not rel:
            return
        ino = self.inodes[self.files[rel]]
        size = self.rng.choice([0, len(ino["data"]) // 2, len(ino["data"]) + 3000])
        os.truncate(self.path(rel), size)
        d = ino["data"]
        if size < len(d):
            del d[size:]
        else:
            d.extend(b"\0" * (size - len(d)))

    def op_rename(self):
        rel = self.pick_file()
        if not rel:
            return
        to = self.new_name()
        os.rename(self.path(rel), self.path(to))
        self.files[to] = self.files.pop(rel)

    def op_link(self):
        rel = self.pick_file()
        if not rel:
            return
        to = self.new_name()
        os.link(self.path(rel), self.path(to))
        self.files[to] = self.files[rel]

    def op_unlink(self):
        rel = self.pick_file()
        if not rel:
            return
        os.unlink(self.path(rel))
        key = self.files.pop(rel)
        if key not in self.files.values():
            del self.inodes[key]

    def op_symlink(self):
        rel = self.new_name("l")
        target = f"target-{self.counter}"
        os.symlink(target, self.path(rel))
        self.links[rel] = target

    def op_unlink_symlink(self):
        if self.links:
            rel = self.rng.choice(sorted(self.links))
            os.unlink(self.path(rel))
            del self.links[rel]

    def op_mkdir(self):
        if len(self.own_dirs) < 6:
            rel = self.new_name("d")
            os.mkdir(self.path(rel))
            self.own_dirs.append(rel)

    def op_rmdir(self):
        empty = [d for d in self.own_dirs
                 if not any(n.startswith(d + "/") for n in list(self.files) + list(self.links) +
                            self.own_dirs)]
        if empty:
            rel = self.rng.choice(sorted(empty))
            os.rmdir(self.path(rel))
            self.own_dirs.remove(rel)

    def op_chmod(self):
        rel = self.pick_file()
        if rel:
            mode = self.rng.choice([0o600, 0o640, 0o644, 0o755])
            os.chmod(self.path(rel), mode)
            self.inodes[self.files[rel]]["mode"] = mode

    def op_xattr(self):
        rel = self.pick_file()
        if not rel:
            return
        ino = self.inodes[self.files[rel]]
        if ino["xattr"] is not None and self.rng.random() < 0.3:
            os.removexattr(self.path(rel), "user.stress")
            ino["xattr"] = None
        else:
            value = os.urandom(self.rng.choice([5, 200, 3000]))
            os.setxattr(self.path(rel), "user.stress", value)
            ino["xattr"] = value

    def op_check(self):
        rel = self.pick_file()
        if rel:
            self.check(rel)
            got = os.getxattr(self.path(rel), "user.stress") if self.inodes[
                self.files[rel]]["xattr"] is not None else None
            if got != self.inodes[self.files[rel]]["xattr"]:
                raise AssertionError(f"{rel}: xattr differs from the model")

    def op_browse(self):
        """List a shared directory and read what others wrote (unchecked)."""
        d = self.rng.choice(SHARED)
        for name in os.listdir(self.path(d))[:20]:
            p = os.path.join(self.path(d), name)
            try:
                st = os.lstat(p)
                if not name.startswith(f"n{self.node}_") and os.path.isfile(p):
                    with open(p, "rb") as f:
                        f.read(65536)
                del st
            except OSError as e:
                if e.errno not in (errno.ENOENT, errno.ESTALE):
                    raise  # gone meanwhile: another node's rename or unlink

    def run(self, seconds):
        ops = [(self.op_create, 12), (self.op_write, 12), (self.op_append, 8),
               (self.op_truncate, 5), (self.op_rename, 8), (self.op_link, 4),
               (self.op_unlink, 7), (self.op_symlink, 3), (self.op_unlink_symlink, 2),
               (self.op_mkdir, 2), (self.op_rmdir, 2), (self.op_chmod, 4), (self.op_xattr, 5),
               (self.op_check, 12), (self.op_browse, 6)]
        fns = [f for f, w in ops for _ in range(w)]
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            fn = self.rng.choice(fns)
            name = fn.__name__[3:]
            t0 = time.monotonic()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - reported, the run stops
                self.failure = f"{name}: {type(e).__name__}: {e}"
                break
            dt = time.monotonic() - t0
            self.ops[name] = self.ops.get(name, 0) + 1
            if dt > self.slowest[0]:
                self.slowest = (dt, name)
            if dt > STUCK_S:
                self.failure = f"{name} took {dt:.1f} s (over {STUCK_S:.0f} s: stuck behind a lock?)"
                break
        if not self.failure:
            try:
                for rel in sorted(self.files):
                    self.check(rel)
            except Exception as e:  # noqa: BLE001
                self.failure = f"final check: {type(e).__name__}: {e}"

    def report(self):
        model = {}
        for rel, key in self.files.items():
            ino = self.inodes[key]
            model[rel] = {"type": "file", "sha256": hashlib.sha256(ino["data"]).hexdigest(),
                          "size": len(ino["data"]), "mode": ino["mode"],
                          "nlink": sum(1 for k in self.files.values() if k == key),
                          "xattr": ino["xattr"].hex() if ino["xattr"] is not None else None}
        for rel, target in self.links.items():
            model[rel] = {"type": "symlink", "target": target}
        for rel in self.own_dirs:
            model[rel] = {"type": "dir"}
        return {"node": self.node, "model": model, "ops": self.ops,
                "slowest": list(self.slowest), "failure": self.failure}


def main():
    node, mnt, seconds, seed = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    w = Worker(node, mnt, seed)
    os.makedirs(w.path(f"priv{node}"), exist_ok=True)
    w.run(seconds)
    print(json.dumps(w.report()))


if __name__ == "__main__":
    main()
