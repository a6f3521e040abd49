#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ocfs2ctl's offline write verbs (put, mkdir, rm, mv, ln, reflink) judged by the
real ocfs2-tools.

    cli_write.py OCFS2CTL [LEVEL BLOCKSIZE CLUSTERSIZE]

A host tree (contents of many sizes, a sparse file, modes, mtimes, short
and long symlinks, hard links, a FIFO, odd names, nesting) goes in with
"put -r"; fsck.ocfs2 -fn must print what it printed for the fresh volume
and debugfs.ocfs2 rdump must give the tree back.  Then every verb, its
errors (exit 1, one line "ocfs2ctl: VERB: ...") and its usage errors
(exit 2), with the volume judged again after each group of changes
against a host-side mirror of what it must hold.  By hand, from the top of
the tree (o2test, the tests' library, is found through PYTHONPATH):

    PYTHONPATH=tests python3 tests/model/cli_write.py build/cli/ocfs2ctl default 4096 4096
"""

import os
import random
import shutil
import stat
import sys
import tempfile

from o2test.check import Check, Failure
from o2test.ctl import Ctl
from o2test.proc import SKIP, which
from o2test.volume import Image


# ---- the host tree ----

def make_tree(root, rnd):
    """A tree with everything put must carry; returns nothing (the tree is the mirror)."""
    os.makedirs(os.path.join(root, "d1", "d2", "d3"))
    os.makedirs(os.path.join(root, "empty dir"))
    sizes = [0, 1, 100, 511, 512, 513, 4095, 4096, 4097, 65536, 300001]
    for i, sz in enumerate(sizes):
        p = os.path.join(root, "d1" if i % 2 else "", "f%d-%d" % (i, sz))
        with open(p, "wb") as f:
            f.write(rnd.randbytes(sz))
        os.chmod(p, [0o644, 0o600, 0o755, 0o640, 0o444, 0o4755][i % 6])
        os.utime(p, (1600000000 + i, 1500000000 + i * 1000))
    # sparse: data at 3 MiB and at the very end of 9 MiB
    p = os.path.join(root, "d1", "d2", "sparse")
    with open(p, "wb") as f:
        f.truncate(9 * 1024 * 1024)
        f.seek(3 * 1024 * 1024)
        f.write(rnd.randbytes(10000))
        f.seek(9 * 1024 * 1024 - 7)
        f.write(b"the end")
    # a file ending in a hole
    p = os.path.join(root, "d1", "d2", "d3", "tail-hole")
    with open(p, "wb") as f:
        f.write(b"head")
        f.truncate(2 * 1024 * 1024 + 3)
    os.symlink("f0-0", os.path.join(root, "short-link"))
    os.symlink("x/" * 750, os.path.join(root, "d1", "long-link"))  # 1500 bytes
    os.symlink("/nowhere/at/all", os.path.join(root, "d1", "d2", "dangling"))
    os.link(os.path.join(root, "f2-100"), os.path.join(root, "d1", "d2", "hard-to-f2"))
    os.mkfifo(os.path.join(root, "a fifo"))
    for n in ["with space", "caf\u00e9", "x" * 255, ".dot"]:
        with open(os.path.join(root, "d1", n), "wb") as f:
            f.write(n.encode())
    os.chmod(os.path.join(root, "d1", "d2"), 0o711)
    os.chmod(os.path.join(root, "empty dir"), 0o1777)
    os.utime(os.path.join(root, "d1", "d2", "d3"), (1400000000, 1400000000))


def compare(chk, want, got, what):
    """Compare host tree want with rdump output got: names, types, data, modes, mtimes."""
    wn = sorted(n for n in os.listdir(want)
                if not stat.S_ISFIFO(os.lstat(os.path.join(want, n)).st_mode))
    gn = sorted(os.listdir(got))
    if not chk.ok(wn == gn, "%s: %s names %r, want %r" % (what, got, gn[:20], wn[:20])):
        return
    for n in wn:
        w, g = os.path.join(want, n), os.path.join(got, n)
        ws, gs = os.lstat(w), os.lstat(g)
        if not chk.ok(stat.S_IFMT(ws.st_mode) == stat.S_IFMT(gs.st_mode),
                      "%s: %s type 0%o, want 0%o" % (what, g, gs.st_mode, ws.st_mode)):
            continue
        if stat.S_ISLNK(ws.st_mode):
            chk.ok(os.readlink(w) == os.readlink(g), "%s: %s symlink target differs" % (what, g))
            continue
        # rdump chmods, then chowns: the chown clears set-user/group-ID of
        # files, so those bits are checked with ocfs2ctl stat instead
        mask = 0o7777 if stat.S_ISDIR(ws.st_mode) else 0o1777
        chk.ok(stat.S_IMODE(ws.st_mode) & mask == stat.S_IMODE(gs.st_mode) & mask,
               "%s: %s mode 0%o, want 0%o" % (what, g, stat.S_IMODE(gs.st_mode),
                                             stat.S_IMODE(ws.st_mode)))
        if stat.S_ISDIR(ws.st_mode):
            compare(chk, w, g, what)
            continue
        chk.ok(int(ws.st_mtime) == int(gs.st_mtime),
               "%s: %s mtime %d, want %d" % (what, g, gs.st_mtime, ws.st_mtime))
        with open(w, "rb") as a, open(g, "rb") as b:
            chk.ok(a.read() == b.read(), "%s: %s contents differ" % (what, g))


def make_volume(tmp, level, bs, cs):
    """A 256 MiB volume made by mkfs.ocfs2 at this feature level and geometry."""
    try:
        return Image(os.path.join(tmp, "vol.img"), 256 * 1024 * 1024,
                     ["mkfs.ocfs2", "-q", "-M", "local", "--fs-feature-level=" + level,
                      "-b", str(bs), "-C", str(cs), "-J", "size=4M"])
    except Failure as e:
        raise SystemExit("mkfs.ocfs2 failed: %s" % e)


def judge(chk, vol, mirror, vol_path, what):
    """fsck as fresh, then rdump vol_path and compare with the host tree mirror."""
    rc, out = vol.fsck_output()
    chk.ok(rc == 0 and "All passes succeeded." in out and out == vol.baseline,
           "%s: fsck.ocfs2 -fn exit %d, output differs from the fresh volume's:\n%s"
           % (what, rc, out))
    dest = tempfile.mkdtemp(prefix="rdump", dir=os.path.dirname(vol.img))
    rc, out, got = vol.rdump(vol_path, dest)
    if chk.ok(os.path.isdir(got), "%s: rdump %s made nothing: %s" % (what, vol_path, out)):
        compare(chk, mirror, got, what)
    shutil.rmtree(dest)


def copy_mirror(src, dst):
    """The host tree as rdump will give it back: FIFOs are not dumped."""
    def fifos(d, names):
        return [n for n in names if stat.S_ISFIFO(os.lstat(os.path.join(d, n)).st_mode)]
    shutil.copytree(src, dst, symlinks=True, ignore=fifos)


def links_of(ctl, path):
    d = os.path.dirname(path) or "/"
    doc = ctl.json_ok("ls", "-l", "{img}", d)
    for e in doc.get("entries", []):
        if e["name"] == os.path.basename(path):
            return e["links"]
    return None


def main():
    if len(sys.argv) not in (2, 5):
        print(__doc__)
        return 2
    exe = os.path.abspath(sys.argv[1])
    level, bs, cs = (sys.argv[2:5] if len(sys.argv) == 5 else ["default", "4096", "4096"])
    for tool in ("mkfs.ocfs2", "fsck.ocfs2", "debugfs.ocfs2"):
        if not which(tool):
            print("SKIP: %s (ocfs2-tools) is not installed" % tool)
            return SKIP
    chk = Check()
    tmp = tempfile.mkdtemp(prefix="o2cliwrite-")
    keep = False
    try:
        vol = make_volume(tmp, level, int(bs), int(cs))
        ctl = Ctl(exe, vol.img, chk)
        rnd = random.Random(20240611)
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        make_tree(src, rnd)
        mirror = os.path.join(tmp, "mirror")

        # put -r into a new name, then into an existing directory (cp semantics)
        ctl.ok("mkdir", "{img}", "/TOP")
        ctl.ok("put", "-r", "{img}", src, "/TOP/tree")
        copy_mirror(src, os.path.join(mirror, "TOP", "tree"))
        doc = ctl.json_ok("put", "-r", "{img}", src + "/", "/TOP")
        chk.ok(doc.get("path") == "/TOP/src" and doc.get("hard_links") == 1 and
               doc.get("special") == 1 and doc.get("symlinks") == 3 and doc.get("files") == 17,
               "put --json summary: %r" % doc)
        copy_mirror(src, os.path.join(mirror, "TOP", "src"))
        judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after put -r")
        chk.ok(links_of(ctl, "/TOP/tree/f2-100") == 2, "hard link in put -r: links of f2-100")
        doc = ctl.json_ok("stat", "{img}", "/TOP/tree/d1/f5-513")
        chk.ok(doc.get("permissions") == 0o4755, "put keeps set-user-ID: %r" % doc.get("mode"))
        doc = ctl.json_ok("ls", "-l", "{img}", "/TOP/tree")
        chk.ok(any(e["name"] == "a fifo" and e["type"] == "fifo" for e in doc.get("entries", [])),
               "put -r: the FIFO is in the volume")

        # put errors and -f
        ctl.fails(1, "put", "is a directory (use -r", "put", "{img}", src, "/TOP/x")
        ctl.fails(1, "put", "already exists (use -f", "put", "{img}",
                  os.path.join(src, "d1", "f1-1"), "/TOP/tree/d1/f1-1")
        ctl.fails(1, "put", "parent directory /TOP/nope does not exist", "put", "{img}",
                  os.path.join(src, "d1", "f1-1"), "/TOP/nope/f")
        ctl.fails(1, "put", "No such file", "put", "{img}", os.path.join(tmp, "absent"), "/TOP/f")
        ctl.fails(1, "put", "not an absolute path", "put", "{img}",
                  os.path.join(src, "d1", "f1-1"), "TOP/f")
        big = os.path.join(src, "f10-300001")
        ctl.ok("put", "-f", "{img}", big, "/TOP/tree/d1/f1-1")
        shutil.copy2(big, os.path.join(mirror, "TOP", "tree", "d1", "f1-1"))
        ctl.ok("put", "-rf", "{img}", src, "/TOP")  # merge over everything
        judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after put -f")

        # mkdir
        ctl.ok("mkdir", "{img}", "/TOP/new")
        ctl.fails(1, "mkdir", "already exists", "mkdir", "{img}", "/TOP/new")
        ctl.fails(1, "mkdir", "parent directory /TOP/a does not exist", "mkdir", "{img}",
                  "/TOP/a/b")
        ctl.fails(1, "mkdir", "name too long", "mkdir", "{img}", "/TOP/" + "n" * 256)
        ctl.fails(1, "mkdir", "not a directory", "mkdir", "{img}", "/TOP/tree/f0-0/sub")
        ctl.ok("mkdir", "-p", "{img}", "/TOP/a/b/c")
        ctl.ok("mkdir", "-p", "{img}", "/TOP/a/b/c")
        ctl.fails(1, "mkdir", "exists and is not a directory", "mkdir", "-p", "{img}",
                  "/TOP/tree/f0-0/x")
        ctl.ok("mkdir", "{img}", "/TOP/" + "n" * 255)
        for d in ["new", "a/b/c", "n" * 255]:
            os.makedirs(os.path.join(mirror, "TOP", d))
            os.chmod(os.path.join(mirror, "TOP", d), 0o755)
        for d in ["a", "a/b"]:
            os.chmod(os.path.join(mirror, "TOP", d), 0o755)
        doc = ctl.json_ok("mkdir", "{img}", "/TOP/jsondir")
        chk.ok(doc.get("path") == "/TOP/jsondir" and doc.get("inode", 0) > 0,
               "mkdir --json: %r" % doc)
        os.mkdir(os.path.join(mirror, "TOP", "jsondir"), 0o755)
        os.chmod(os.path.join(mirror, "TOP", "jsondir"), 0o755)

        # ln and ln -s
        ctl.ok("ln", "{img}", "/TOP/tree/f4-512", "/TOP/new/hard")
        os.link(os.path.join(mirror, "TOP", "tree", "f4-512"),
                os.path.join(mirror, "TOP", "new", "hard"))
        chk.ok(links_of(ctl, "/TOP/new/hard") == 2, "ln: links of /TOP/new/hard")
        ctl.ok("ln", "{img}", "/TOP/tree/f6-4095", "/TOP/new")  # into the directory
        os.link(os.path.join(mirror, "TOP", "tree", "f6-4095"),
                os.path.join(mirror, "TOP", "new", "f6-4095"))
        ctl.fails(1, "ln", "hard links to directories", "ln", "{img}", "/TOP/a", "/TOP/a2")
        ctl.fails(1, "ln", "already exists", "ln", "{img}", "/TOP/tree/f0-0", "/TOP/new/hard")
        ctl.fails(1, "ln", "no such file", "ln", "{img}", "/TOP/absent", "/TOP/new/x")
        ctl.ok("ln", "-s", "{img}", "../tree/f0-0", "/TOP/new/sym")
        os.symlink("../tree/f0-0", os.path.join(mirror, "TOP", "new", "sym"))
        ctl.ok("ln", "-s", "{img}", "t" * 3000, "/TOP/new/longsym")
        os.symlink("t" * 3000, os.path.join(mirror, "TOP", "new", "longsym"))
        ctl.fails(1, "ln", "already exists", "ln", "-s", "{img}", "x", "/TOP/new/sym")
        judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after mkdir and ln")

        # reflink: copies sharing clusters, then one changed (copy on write)
        if level == "max-compat":
            ctl.fails(1, "reflink", "lacks the refcount feature", "reflink", "{img}",
                      "/TOP/tree/f10-300001", "/TOP/new/r")
        else:
            ctl.ok("reflink", "{img}", "/TOP/tree/f10-300001", "/TOP/new/r1")
            ctl.ok("reflink", "{img}", "/TOP/new/r1", "/TOP/a/b")  # into the directory
            ctl.ok("reflink", "{img}", "/TOP/tree/f0-0", "/TOP/new/r0")
            for s_, d_ in (("tree/f10-300001", "new/r1"), ("new/r1", "a/b/r1"),
                           ("tree/f0-0", "new/r0")):
                # the data and mode of the source, times of their own
                d_path = os.path.join(mirror, "TOP", d_)
                shutil.copy(os.path.join(mirror, "TOP", s_), d_path)
                t = ctl.json_ok("stat", "{img}", "/TOP/" + d_)["mtime"]
                os.utime(d_path, (t, t))
            chk.ok(ctl.json_ok("stat", "{img}", "/TOP/new/r1").get("permissions") ==
                   stat.S_IMODE(os.stat(os.path.join(mirror, "TOP", "tree", "f10-300001")).st_mode),
                   "reflink keeps the mode")
            ctl.fails(1, "reflink", "already exists", "reflink", "{img}", "/TOP/tree/f0-0",
                      "/TOP/new/r0")
            ctl.fails(1, "reflink", "is a directory", "reflink", "{img}", "/TOP/a", "/TOP/a2")
            ctl.fails(1, "reflink", "not a regular file", "reflink", "{img}", "/TOP/new/sym",
                      "/TOP/s2")
            ctl.fails(1, "reflink", "no such file", "reflink", "{img}", "/TOP/absent", "/TOP/x")
            judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after reflink")
            small = os.path.join(src, "f4-512")
            ctl.ok("put", "-f", "{img}", small, "/TOP/new/r1")
            shutil.copy2(small, os.path.join(mirror, "TOP", "new", "r1"))
            judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after overwriting a reflink")
        ctl.fails(2, "reflink", "usage", "reflink", "{img}", "/TOP/x")

        # mv
        ctl.ok("mv", "{img}", "/TOP/new/hard", "/TOP/new/renamed")
        os.rename(os.path.join(mirror, "TOP", "new", "hard"),
                  os.path.join(mirror, "TOP", "new", "renamed"))
        ctl.ok("mv", "{img}", "/TOP/a", "/TOP/new")  # into the directory
        os.rename(os.path.join(mirror, "TOP", "a"), os.path.join(mirror, "TOP", "new", "a"))
        ctl.fails(1, "mv", "into itself", "mv", "{img}", "/TOP/new", "/TOP/new/a/b")
        ctl.fails(1, "mv", "no such file", "mv", "{img}", "/TOP/absent", "/TOP/x")
        ctl.fails(1, "mv", "parent directory /TOP/nope does not exist", "mv", "{img}",
                  "/TOP/jsondir", "/TOP/nope/x")
        ctl.ok("mv", "{img}", "/TOP/tree/d1/f3-511", "/TOP/tree/d1/f5-513")  # replaces a file
        os.rename(os.path.join(mirror, "TOP", "tree", "d1", "f3-511"),
                  os.path.join(mirror, "TOP", "tree", "d1", "f5-513"))
        judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after mv")

        # rm
        ctl.fails(1, "rm", "is a directory", "rm", "{img}", "/TOP/new")
        ctl.fails(1, "rm", "directory not empty", "rm", "-d", "{img}", "/TOP/new")
        ctl.fails(1, "rm", "no such file", "rm", "{img}", "/TOP/absent")
        ctl.ok("rm", "-f", "{img}", "/TOP/absent")
        ctl.ok("rm", "-d", "{img}", "/TOP/jsondir")
        os.rmdir(os.path.join(mirror, "TOP", "jsondir"))
        ctl.ok("rm", "{img}", "/TOP/new/sym")
        os.unlink(os.path.join(mirror, "TOP", "new", "sym"))
        ctl.ok("rm", "{img}", "/TOP/tree/a fifo")
        doc = ctl.json_ok("rm", "-r", "{img}", "/TOP/src")
        chk.ok(doc.get("removed", 0) > 20, "rm -r --json: %r" % doc)
        shutil.rmtree(os.path.join(mirror, "TOP", "src"))
        judge(chk, vol, os.path.join(mirror, "TOP"), "/TOP", "after rm")
        chk.ok(links_of(ctl, "/TOP/tree/f2-100") == 2, "links of f2-100 after rm -r of /TOP/src")

        # usage errors
        ctl.fails(2, "mkdir", "not valid", "mkdir", "-r", "{img}", "/TOP/q")
        ctl.fails(2, "rm", "usage", "rm", "{img}")
        ctl.fails(2, "ln", "not valid", "ln", "-p", "{img}", "/a", "/b")
        ctl.fails(1, "mkdir", "not an OCFS2 volume", "mkdir", os.path.join(src, "d1", "f1-1"), "/x")

        # everything away: the volume is as it was
        ctl.ok("rm", "-r", "{img}", "/TOP")
        rc, out = vol.fsck_output()
        chk.ok(out == vol.baseline, "after rm -r /TOP: fsck output differs:\n%s" % out)
    except BaseException:
        keep = True
        raise
    finally:
        if chk.failures or keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp)
    print("%d checks, %d failures (%s -b %s -C %s)" % (chk.count, chk.failures, level, bs, cs))
    return 1 if chk.failures else 0


if __name__ == "__main__":
    sys.exit(main())
