# SPDX-License-Identifier: GPL-2.0-or-later
"""Trees and files: snapshots of everything persistent about a tree, and
whole-file reads and writes."""

import hashlib
import os
import stat


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def snapshot(root):
    """Everything persistent about the tree under root (not atime)."""
    out = {}

    def one(p, rel):
        st = os.lstat(p)
        e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid, "nlink": st.st_nlink,
             "size": st.st_size, "ino": st.st_ino, "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns,
             "blocks": st.st_blocks}
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            e["rdev"] = st.st_rdev
        if stat.S_ISREG(st.st_mode):
            e["sha"] = file_sha(p)
        if stat.S_ISLNK(st.st_mode):
            e["target"] = os.readlink(p)
        out[rel] = e

    one(root, ".")
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            one(p, os.path.relpath(p, root))
    return out


def compare_snapshots(chk, before, after, what):
    ok = chk.ok(set(before) == set(after), "%s: names differ: only before %s, only after %s" % (
        what, sorted(set(before) - set(after))[:20], sorted(set(after) - set(before))[:20]))
    bad = [(k, before[k], after[k]) for k in sorted(set(before) & set(after)) if before[k] != after[k]]
    for k, b, a in bad[:20]:
        diff = {f: (b.get(f), a.get(f)) for f in set(b) | set(a) if b.get(f) != a.get(f)}
        chk.ok(False, "%s: %s changed: %s" % (what, k, diff))
    return ok and not bad
