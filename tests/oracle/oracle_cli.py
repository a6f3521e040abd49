#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""ocfs2ctl's command-line contract: exit codes, the one-line error form,
--json placement, and no crash on damaged or foreign input.

    oracle_cli.py OCFS2CTL

Volumes come from the real mkfs.ocfs2; damage is written by hand at places
located with debugfs.ocfs2, then by a seeded random byte-flipper over every
metadata block debugfs names.
"""

import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile

sys.dont_write_bytecode = True
import o2oracle as o2  # noqa: E402
from o2test.check import Check  # noqa: E402
from o2test.proc import need_tools, text  # noqa: E402

M = 1024 * 1024
VERBS_IMG = [["info"], ["slots"], ["check"], ["ls", "-l", "{img}", "/"], ["ls", "{img}", "//"],
             ["stat", "{img}", "/"], ["stat", "{img}", "//global_bitmap"],
             ["cat", "{img}", "//slot_map"]]


def argv_for(v, img):
    if len(v) == 1:
        return [v[0], img]
    return [a.replace("{img}", img) for a in v]


def expect_error(r, ctl, argv, rc_want, verb, pattern):
    """rc_want, nothing on stdout (text mode), one stderr line 'ocfs2ctl: VERB: ...'."""
    rc, out, err = ctl.raw(*argv)
    e = text(err)
    lines = e.splitlines()
    what = "ocfs2ctl %s" % " ".join(argv)
    r.ok(rc == rc_want, "%s: exit %d, want %d (stderr %r)" % (what, rc, rc_want, e))
    r.ok(len(lines) == 1, "%s: %d stderr lines, want 1: %r" % (what, len(lines), e))
    prefix = "ocfs2ctl: %s: " % verb if verb else "ocfs2ctl: "
    r.ok(bool(lines) and lines[0].startswith(prefix),
         "%s: stderr %r does not start with %r" % (what, e, prefix))
    if pattern:
        r.ok(re.search(pattern, e) is not None,
             "%s: stderr %r does not match %r" % (what, e, pattern))
    return rc, out, e


def no_crash(r, ctl, argv, label):
    """Any outcome but a crash: exit 0 with quiet stderr, or exit 1 with one line."""
    rc, out, err = ctl.raw(*argv)
    e = text(err)
    what = "%s: ocfs2ctl %s" % (label, " ".join(argv))
    if rc < 0:
        r.ok(False, "%s: killed by signal %s" % (what, signal.Signals(-rc).name))
        return
    r.ok(rc in (0, 1), "%s: exit %d" % (what, rc))
    if rc == 0:
        r.ok(e == "", "%s: exit 0 but stderr %r" % (what, e))
    else:
        lines = e.splitlines()
        r.ok(len(lines) == 1 and lines[0].startswith("ocfs2ctl: %s: " % argv[0]),
             "%s: want one stderr line 'ocfs2ctl: %s: ...', got %r" % (what, argv[0], e))


def test_usage(r, ctl):
    rc, out, err = ctl.raw("--help")
    r.ok(rc == 0 and b"Usage" in out and not err, "--help: rc %d out %r err %r" % (rc, out[:80], err))
    rc, out, err = ctl.raw("--version")
    r.ok(rc == 0 and out.startswith(b"ocfs2ctl ") and not err, "--version: rc %d out %r" % (rc, out))
    rc, out, err = ctl.raw("info", "--help")
    r.ok(rc == 0 and b"Usage" in out, "info --help: rc %d" % rc)
    expect_error(r, ctl, [], 2, None, r"usage")
    expect_error(r, ctl, ["frob", "x"], 2, "frob", r"unknown verb")
    expect_error(r, ctl, ["info"], 2, "info", r"usage: ocfs2ctl .*info IMAGE")
    expect_error(r, ctl, ["info", "a", "b"], 2, "info", r"usage")
    expect_error(r, ctl, ["stat", "img"], 2, "stat", r"usage")
    expect_error(r, ctl, ["cat"], 2, "cat", r"usage")
    expect_error(r, ctl, ["ls"], 2, "ls", r"usage")
    expect_error(r, ctl, ["slots", "a", "b"], 2, "slots", r"usage")
    expect_error(r, ctl, ["check"], 2, "check", r"usage")
    expect_error(r, ctl, ["--bogus", "info", "x"], 2, None, r"unknown option '--bogus'")
    expect_error(r, ctl, ["info", "x", "--bogus"], 2, "info", r"unknown option")
    expect_error(r, ctl, ["stat", "-l", "x", "/"], 2, "stat", r"-l only applies to ls")


def test_foreign(r, ctl, tmp):
    missing = os.path.join(tmp, "no-such-image")
    for v in VERBS_IMG:
        argv = argv_for(v, missing)
        expect_error(r, ctl, argv, 1, v[0], re.escape(missing) + r": No such file or directory")
    zeros = os.path.join(tmp, "zeros.img")
    with open(zeros, "wb") as f:
        f.truncate(4 * M)
    tiny = os.path.join(tmp, "tiny.img")
    with open(tiny, "wb") as f:
        f.write(b"hello, not a filesystem\n" * 4)
    empty = os.path.join(tmp, "empty.img")
    open(empty, "wb").close()
    junk = os.path.join(tmp, "junk.img")
    with open(junk, "wb") as f:
        f.write(random.Random(1).randbytes(M))
    for img in (zeros, tiny, empty, junk):
        for v in VERBS_IMG:
            expect_error(r, ctl, argv_for(v, img), 1, v[0],
                         re.escape(img) + " is not an OCFS2 volume")
        rc, out, err = ctl.raw("--json", "info", img)
        r.ok(rc == 1 and out == b"", "--json info %s: rc %d stdout %r" % (img, rc, out))
    # A directory is not an image.
    for v in (["info"], ["check"]):
        expect_error(r, ctl, argv_for(v, tmp), 1, v[0], re.escape(tmp))


def test_paths(r, ctl, img, info):
    expect_error(r, ctl, ["stat", img, "/no-such-file"], 1, "stat",
                 r"/no-such-file: No such file or directory")
    expect_error(r, ctl, ["stat", img, "//no-such-sysfile"], 1, "stat",
                 r"No such file or directory")
    expect_error(r, ctl, ["ls", img, "//slot_map"], 1, "ls", r"Not a directory")
    expect_error(r, ctl, ["cat", img, "/lost+found"], 1, "cat", r"not a regular file")
    expect_error(r, ctl, ["cat", img, "//global_bitmap"], 1, "cat", r"no file data")
    expect_error(r, ctl, ["stat", img, "<99999999999>"], 1, "stat", r"outside the volume")
    expect_error(r, ctl, ["stat", img, "<18446744073709551615>"], 1, "stat", r"outside")
    expect_error(r, ctl, ["stat", img, "<99999999999999999999999>"], 1, "stat", r"not an inode number")
    expect_error(r, ctl, ["stat", img, "<abc>"], 1, "stat", r"not an inode number")
    expect_error(r, ctl, ["stat", img, "<>"], 1, "stat", r"not an inode number")
    expect_error(r, ctl, ["stat", img, "<%d" % info["root_blkno"]], 1, "stat", r"not an inode")
    # A block that is not an inode (the first cluster group descriptor).
    expect_error(r, ctl, ["stat", img, "<%d>" % info["first_cluster_group"]], 1, "stat",
                 r"%d" % info["first_cluster_group"])
    # Relative paths are taken from the root.
    rc1, a, _ = ctl.json("stat", img, "lost+found")
    rc2, b, _ = ctl.json("stat", img, "/lost+found")
    r.ok(rc1 == 0 and rc2 == 0 and a["inode"] == b["inode"], "relative path lookup")
    # --json anywhere gives the same document.
    rc, o1, _ = o2.run([ctl.path, "--json", "info", img])
    rc2, o2b, _ = o2.run([ctl.path, "info", img, "--json"])
    rc3, o3, _ = o2.run([ctl.path, "info", "--json", img])
    r.ok(rc == rc2 == rc3 == 0 and o1 == o2b == o3, "--json position changes the output")
    rc, o4, _ = o2.run([ctl.path, "ls", img, "-l", "--json", "/"])
    rc2, o5, _ = o2.run([ctl.path, "--json", "ls", "-l", img, "/"])
    r.ok(rc == rc2 == 0 and o4 == o5 and b"mode_string" in o4, "ls -l --json in any order")
    rc, o6, _ = o2.run([ctl.path, "--json", "--", "ls", img, "/"])
    r.ok(rc == 0 and json.loads(o6)["entries"][0]["name"] == ".", "-- ends options")
    # Every verb: human output works and --json output parses.
    for v in VERBS_IMG:
        argv = argv_for(v, img)
        rc, out, err = ctl.raw(*argv)
        r.ok(rc == 0 and out and not err, "ocfs2ctl %s: rc %d err %r" % (argv, rc, err))
        rc, doc, e = ctl.json(*argv)
        r.ok(rc == 0 and isinstance(doc, dict), "ocfs2ctl --json %s: rc %d" % (argv, rc))


def write_at(img, off, data):
    with open(img, "r+b") as f:
        f.seek(off)
        f.write(data)


def test_damage(r, ctl, tmp):
    """Targeted damage: clear errors naming the block, check exits 1."""
    img = os.path.join(tmp, "damage.img")
    ok, why = o2.mkfs(img, 64 * M, ["-b", "1024", "-C", "4K", "-J", "size=4M",
                                     "--fs-feature-level=max-compat"])
    r.ok(ok, "mkfs for the damage test: " + why)
    if not ok:
        return
    pristine = img + ".orig"
    shutil.copyfile(img, pristine)
    rc, info, _ = ctl.json("info", img)
    bs = info["block_size"]
    out, _ = o2.debugfs(img, ["stat //", "stat //global_bitmap"])
    sysdir_blk = o2.parse_stat(out["stat //"])["extent_lists"][0]["recs"][0]["blkno"]
    group_blk = o2.parse_stat(out["stat //global_bitmap"])["groups"][0]["blkno"]

    cases = [
        ("root inode signature", info["root_blkno"] * bs, b"XXXXXXX\0",
         [["check"], ["ls", "{img}", "/"], ["stat", "{img}", "/"]]),
        ("system dir block rec_len", sysdir_blk * bs + 8, b"\x03\x00",
         [["check"], ["ls", "{img}", "//"], ["stat", "{img}", "//slot_map"]]),
        ("global bitmap group signature", group_blk * bs, b"NOTAGRP\0",
         [["check"], ["stat", "{img}", "//global_bitmap"]]),
    ]
    for name, off, data, verbs in cases:
        shutil.copyfile(pristine, img)
        write_at(img, off, data)
        blk = off // bs
        for v in verbs:
            rc, out, e = expect_error(r, ctl, argv_for(v, img), 1, v[0], None)
            r.ok(str(blk) in e, "%s: %s: the message %r does not name block %d"
                 % (name, v, e, blk))
        rc, doc, e = ctl.json("check", img)
        r.ok(rc == 1 and doc is not None and doc.get("clean") is False and doc.get("error"),
             "%s: check --json: rc %d doc %r" % (name, rc, doc))
    # A damaged journal superblock: info and stat still show the volume and
    # say what is wrong with that journal; check gives the verdict.
    shutil.copyfile(pristine, img)
    out, _ = o2.debugfs(img, ["stat //journal:0001"])
    jblk = o2.parse_stat(out["stat //journal:0001"])["extent_lists"][0]["recs"][0]["blkno"]
    write_at(img, jblk * bs, b"XXXX")
    rc, doc, e = ctl.json("info", img)
    r.ok(rc == 0 and doc["journals"][1].get("error") and str(jblk) in doc["journals"][1]["error"]
         and "sequence" in doc["journals"][0] and e == "",
         "damaged journal 1: info rc %d journals %r stderr %r"
         % (rc, doc and doc.get("journals"), e))
    rc, doc, e = ctl.json("stat", img, "//journal:0001")
    r.ok(rc == 0 and doc["journal"].get("super_error") and doc["journal"]["slot"] == 1,
         "damaged journal 1: stat rc %d journal %r" % (rc, doc and doc.get("journal")))
    expect_error(r, ctl, ["check", img], 1, "check", str(jblk))
    # A superblock that is no longer one.
    shutil.copyfile(pristine, img)
    write_at(img, 2 * bs, b"BADSIG\0\0")
    expect_error(r, ctl, ["info", img], 1, "info", "is not an OCFS2 volume")
    os.unlink(pristine)
    os.unlink(img)


def metadata_blocks(img, ctl):
    """Block numbers debugfs names as metadata: superblock, every inode of the
    root and system directories, their directory blocks, group descriptors,
    extent records' first blocks of directories."""
    rc, sysls, _ = ctl.json("ls", img, "//")
    rc, rootls, _ = ctl.json("ls", img, "/")
    names = ["//" + e["name"] for e in sysls["entries"] if e["name"] not in (".", "..")]
    objs = ["/", "/lost+found", "//"] + names
    out, _ = o2.debugfs(img, ["stat " + p for p in objs])
    blocks = {2}
    for p in objs:
        d = o2.parse_stat(out["stat " + p])
        if "inode" in d:
            blocks.add(d["inode"])
        for g in d.get("groups", []):
            blocks.add(g["blkno"])
        if d.get("type") == "Directory":
            for l in d.get("extent_lists", []):
                for rec in l["recs"]:
                    blocks.add(rec["blkno"])
    return sorted(blocks)


def test_fuzz(r, ctl, tmp, seed, level, iterations):
    """Random byte damage in metadata blocks: never a crash, always the contract."""
    img = os.path.join(tmp, "fuzz.img")
    ok, why = o2.mkfs(img, 64 * M, ["-b", "1024", "-C", "4K", "-J", "size=4M", "-N", "2"]
                      + (["--fs-feature-level=" + level] if level else []))
    r.ok(ok, "mkfs for the fuzz test: " + why)
    if not ok:
        return
    pristine = img + ".orig"
    shutil.copyfile(img, pristine)
    rc, info, _ = ctl.json("info", img)
    bs = info["block_size"]
    blocks = metadata_blocks(img, ctl)
    rng = random.Random(seed)
    for it in range(iterations):
        shutil.copyfile(pristine, img)
        blk = rng.choice(blocks)
        nflips = rng.choice([1, 2, 4, 16])
        desc = []
        with open(img, "r+b") as f:
            for _ in range(nflips):
                off = rng.randrange(bs)
                f.seek(blk * bs + off)
                old = f.read(1)[0]
                new = rng.choice([0x00, 0xFF, old ^ (1 << rng.randrange(8)), rng.randrange(256)])
                f.seek(blk * bs + off)
                f.write(bytes([new]))
                desc.append("%d+%d:%02x->%02x" % (blk, off, old, new))
        label = "fuzz %s seed %d #%d [%s]" % (level or "default", seed, it, " ".join(desc))
        for v in VERBS_IMG + [["stat", "{img}", "//journal:0000"], ["ls", "-l", "{img}", "//"]]:
            no_crash(r, ctl, argv_for(v, img), label)
    os.unlink(pristine)
    os.unlink(img)


def main():
    if len(sys.argv) != 2:
        print("usage: oracle_cli.py OCFS2CTL")
        return 2
    need_tools("mkfs.ocfs2", "debugfs.ocfs2")
    ctl = o2.Ctl(os.path.abspath(sys.argv[1]))
    r = Check()
    tmp = tempfile.mkdtemp(prefix="o2cli-")
    try:
        test_usage(r, ctl)
        test_foreign(r, ctl, tmp)
        img = os.path.join(tmp, "good.img")
        ok, why = o2.mkfs(img, 64 * M, ["-b", "4096", "-C", "4K", "-J", "size=4M"])
        r.ok(ok, "mkfs: " + why)
        if ok:
            rc, info, _ = ctl.json("info", img)
            test_paths(r, ctl, img, info)
        test_damage(r, ctl, tmp)
        test_fuzz(r, ctl, tmp, 1, None, 60)
        test_fuzz(r, ctl, tmp, 2, "max-compat", 60)
        test_fuzz(r, ctl, tmp, 3, "max-features", 30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d checks, %d failed" % (r.count, r.failures))
    return 1 if r.failures else 0


if __name__ == "__main__":
    sys.exit(main())
