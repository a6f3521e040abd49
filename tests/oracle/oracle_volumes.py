#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Oracle test: ocfs2ctl against debugfs.ocfs2 on volumes made by the real
mkfs.ocfs2 (and tunefs.ocfs2).

    oracle_volumes.py OCFS2CTL GROUP [--keep DIR]

GROUP is one of b512, b1024, b2048, b4096 (every cluster size x feature
level at that block size) or special (pcmk stack, local mount, indexed
system directory with an external and with an inline dx root, a volume
with a non-ASCII label).

For each volume: info, stat of the superblock, ls and ls -l of every
directory mkfs made, stat of every inode there (by path, and by <N>), the
journal superblocks, slots (fresh, then with occupied slots poked in),
cat of every system file up to 16 MiB, and check, all compared field by
field with debugfs.ocfs2.  Any difference is printed (volume, object,
field, ours, debugfs's) and the test fails.
"""

import argparse
import base64
import os
import re
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True
import o2oracle as o2  # noqa: E402
from o2test.proc import need_tools, text  # noqa: E402

M = 1024 * 1024


class Vol:
    def __init__(self, name, size, args, blocksize=None, post=None, journals=("4M",),
                 expect_dx=None):
        self.expect_dx = expect_dx  # "external" or "inline": the system dir's dx root
        self.name = name
        self.size = size
        self.args = args
        self.blocksize = blocksize
        self.post = post
        self.journals = journals


def matrix(bs):
    vols = []
    for cs in ("4K", "64K", "1M"):
        for level in ("max-compat", "default", "max-features"):
            args = ["-b", str(bs), "-C", cs, "-L", "oracle-b%d-%s" % (bs, cs)]
            if level != "default":
                args.append("--fs-feature-level=" + level)
            # Different slot counts exercise the per-slot files and slot maps.
            args += ["-N", {"max-compat": "3", "default": "2", "max-features": "4"}[level]]
            size = 256 * M if cs != "1M" else 1280 * M
            if bs == 512 and cs == "4K":
                # 37 cluster groups on 19 chain records: chains of two groups.
                size = 512 * M
            # 4M is what we want; mkfs refuses it for 1M clusters, then the
            # smallest journal it takes is used and the refusal reported.
            vols.append(Vol("b%d-c%s-%s" % (bs, cs, level), size, args, blocksize=bs,
                            journals=("4M", "16M", "32M", "64M")))
    return vols


def make_indexed(img, vol, local):
    """noindexed-dirs volume, then tunefs adds the index to existing dirs."""
    bs = vol.blocksize
    if not local:
        o2.flip_local_mount(img, bs, True)
    o2.tunefs_features(img, "indexed-dirs")
    if not local:
        o2.flip_local_mount(img, bs, False)


def special():
    return [
        Vol("pcmk", 256 * M, ["-b", "2048", "-C", "4K", "--cluster-stack=pcmk",
                              "--cluster-name=mycluster", "-N", "3"], blocksize=2048),
        Vol("local", 256 * M, ["-b", "1024", "-C", "8K", "-M", "local"], blocksize=1024),
        Vol("indexed-sysdir", 512 * M, ["-b", "512", "-N", "48", "--fs-features=noindexed-dirs"],
            blocksize=512, post=lambda img, v: make_indexed(img, v, False),
            expect_dx="external"),
        Vol("local-indexed", 256 * M, ["-b", "512", "-M", "local",
                                       "--fs-features=noindexed-dirs"],
            blocksize=512, post=lambda img, v: make_indexed(img, v, True),
            expect_dx="inline"),
        Vol("label-utf8", 128 * M, ["-b", "4096", "-C", "16K", "-L", "vol \u00e9 \u6587"],
            blocksize=4096),
    ]


# ---------------------------------------------------------------- comparisons

def cmp_inode(mm, where, ours, dbg, sections=True):
    """Compare ocfs2ctl stat JSON with a parsed debugfs dump_inode (+ sections:
    what debugfs's stat prints after the inode; its stats verb prints none)."""
    eq = lambda f, a, b: mm.eq(where, f, a, b)  # noqa: E731
    for line in dbg.get("unparsed", []):
        mm.fail(where, "debugfs line not understood by the test: %r" % line)
    if "inode" not in dbg:
        mm.fail(where, "debugfs printed no inode")
        return
    eq("inode", ours["inode"], dbg["inode"])
    eq("mode (permission bits)", ours["permissions"] & 0o777, dbg["perm"])
    eq("generation", ours["generation"], dbg["generation"])
    eq("fs_generation", ours["fs_generation"], dbg["fs_generation"])
    eq("check_crc32", ours["check_crc32"], dbg["check_crc32"])
    eq("check_ecc", ours["check_ecc"], dbg["check_ecc"])
    eq("type", ours["type"], o2.DEBUGFS_TYPES.get(dbg["type"], "?" + dbg["type"]))
    eq("attr", ours["attr"], dbg["attr"])
    bits = 0
    for n in dbg["flag_names"]:
        if n not in o2.DEBUGFS_INODE_FLAGS:
            mm.fail(where, "unknown debugfs inode flag %r" % n)
        bits |= o2.DEBUGFS_INODE_FLAGS.get(n, 0)
    eq("flags", ours["flags"] & o2.DEBUGFS_INODE_FLAGS_MASK, bits)
    eq("dyn_features", ours["dyn_features"], dbg["dyn_features"])
    dyn = 0
    for n in dbg["dyn_names"]:
        dyn |= o2.DEBUGFS_DYN.get(n, 0)
    eq("dyn_feature_names", sorted(ours["dyn_feature_names"]), sorted(dbg["dyn_names"]))
    eq("dyn_features (names)", ours["dyn_features"], dyn)
    if ours["dyn_features"] & 0x2:
        eq("xattr_loc", ours["xattr_loc"], dbg.get("xattr_loc"))
        eq("xattr_inline_size", ours["xattr_inline_size"], dbg.get("xattr_inline_size"))
    elif "xattr_loc" in dbg:
        mm.fail(where, "debugfs printed an xattr block but ours has no HasXattr")
    eq("uid", ours["uid"], dbg["uid"])
    eq("gid", ours["gid"], dbg["gid"])
    eq("size", ours["size"], dbg["size"])
    eq("links", ours["links"], dbg["links"])
    eq("clusters", ours["clusters"], dbg["clusters"])
    for t in ("atime", "ctime", "mtime"):
        eq(t, ours[t], dbg.get(t))
        eq(t + "_nsec", ours[t + "_nsec"], dbg.get(t + "_nsec"))
    eq("dtime", ours["dtime"], dbg["dtime"])
    eq("refcount_loc", ours["refcount_loc"], dbg["refcount_loc"])
    eq("last_eb_blk", ours["last_eb_blk"], dbg["last_eb_blk"])
    eq("orphaned_slot", ours["orphaned_slot"], dbg["orphaned_slot"])
    eq("suballoc_slot", ours["suballoc_slot"], dbg["suballoc_slot"])
    eq("suballoc_global", ours["suballoc_global"], dbg["suballoc_slot"] == 0xFFFF)
    eq("suballoc_bit", ours["suballoc_bit"], dbg["suballoc_bit"])
    eq("suballoc_loc", ours["suballoc_loc"], dbg["suballoc_loc"] or 0)

    flags = ours["flags"]
    if flags & 0x80:
        if "bitmap" not in dbg:
            mm.fail(where, "debugfs printed no bitmap totals for an Allocbitmap inode")
        else:
            total, used, free = dbg["bitmap"]
            eq("bitmap.total", ours["bitmap"]["total"], total)
            eq("bitmap.used", ours["bitmap"]["used"], used)
            eq("bitmap.free", ours["bitmap"]["free"], free)
            eq("bitmap_total", ours["bitmap_total"], total)
            eq("bitmap_used", ours["bitmap_used"], used)
    elif "bitmap" in dbg:
        mm.fail(where, "debugfs printed bitmap totals, ours has no Allocbitmap flag")
    if flags & 0x100:
        j = ours.get("journal")
        if j is None or "journal_flag_names" not in dbg:
            mm.fail(where, "journal flags missing (ours %r, debugfs %r)"
                    % (j is not None, "journal_flag_names" in dbg))
        else:
            eq("journal.dirty", j["dirty"], "Dirty" in dbg["journal_flag_names"])
            eq("journal.flag_names", j["flag_names"], dbg["journal_flag_names"])
            eq("journal.recovery_generation", j["recovery_generation"],
               dbg.get("journal_recovery_generation"))
    elif "journal_flag_names" in dbg:
        mm.fail(where, "debugfs printed journal flags, ours has no Journal flag")

    inline = bool(ours["dyn_features"] & 0x1)
    if inline:
        eq("id2_kind", ours["id2_kind"], "inline")
        eq("inline_data.max", ours.get("inline_data", {}).get("max"), dbg.get("inline_max"))
    elif "inline_max" in dbg:
        mm.fail(where, "debugfs printed Inline Data Max, ours has no InlineData")
    if not inline and ours["dyn_features"] & 0x8:
        eq("dx_root", ours["dx_root"], dbg.get("dx_root"))
    elif "dx_root" in dbg:
        mm.fail(where, "debugfs printed an Indexed Tree Root, ours is not indexed")

    if not sections:
        return
    # The part after the inode, chosen as debugfs's do_stat chooses it.
    is_link = ours["type"] == "symlink"
    if flags & 0x40:
        eq("id2_kind", ours["id2_kind"], "local_alloc")
        la, dla = ours.get("local_alloc"), dbg.get("local_alloc")
        if la is None or dla is None:
            mm.fail(where, "local alloc missing (ours %r, debugfs %r)" % (la, dla))
        else:
            eq("local_alloc.bm_off", la["bm_off"], dla["bm_off"])
            eq("local_alloc.size", la["size"], dla["size"])
            # The window's set bits are what i_used counts.
            eq("local_alloc.used (vs Bitmap Used)", la["used"], dbg["bitmap"][1])
    elif flags & 0x400:
        cmp_chain(mm, where, ours, dbg)
    elif is_link and ours["clusters"] == 0:
        eq("symlink_target", ours.get("symlink_target"), dbg.get("symlink"))
    elif flags & 0x800:
        eq("id2_kind", ours["id2_kind"], "truncate_log")
        tl, dtl = ours.get("truncate_log"), dbg.get("truncate_log")
        if tl is None or dtl is None:
            mm.fail(where, "truncate log missing (ours %r, debugfs %r)" % (tl, dtl))
        else:
            eq("truncate_log.count", tl["count"], dtl["count"])
            eq("truncate_log.used", tl["used"], dtl["used"])
            eq("truncate_log.records", [(r["start"], r["clusters"]) for r in tl["records"]],
               dtl["recs"])
    elif not inline:
        cmp_extents(mm, where, ours, dbg)


def cmp_extents(mm, where, ours, dbg):
    eq = lambda f, a, b: mm.eq(where, f, a, b)  # noqa: E731
    el, lists = ours.get("extent_list"), dbg.get("extent_lists")
    if el is None or not lists:
        mm.fail(where, "extent list missing (ours %r, debugfs %r)" % (el is not None,
                                                                     bool(lists)))
        return
    eq("id2_kind", ours["id2_kind"], "extents")
    top = lists[0]
    eq("extent_list.tree_depth", el["tree_depth"], top["depth"])
    eq("extent_list.count", el["count"], top["count"])
    eq("extent_list.next_free", el["next_free"], top["next_free"])
    ours_recs = [(r["cpos"], r["clusters"], r["blkno"]) for r in el["records"]]
    eq("extent_list.records", ours_recs,
       [(r["cpos"], r["clusters"], r["blkno"]) for r in top["recs"]])
    if top["depth"] == 0:
        eq("extent_list.records.flags", [r["flags"] for r in el["records"]],
           [r["flags"] for r in top["recs"]])
    # The whole tree: leaves in order, and the extent blocks visited.
    leaves = [(r["cpos"], r["clusters"], r["blkno"], r["flags"])
              for l in lists if l["depth"] == 0 for r in l["recs"]]
    tree = ours.get("extent_tree", {})
    eq("extent_tree.extents",
       [(r["cpos"], r["clusters"], r["blkno"], r["flags"]) for r in tree.get("extents", [])],
       leaves)
    eq("extent_tree.extent_blocks", sorted(tree.get("extent_blocks", [])),
       sorted(l["eb"]["blkno"] for l in lists if l.get("eb")))


def cmp_chain(mm, where, ours, dbg):
    eq = lambda f, a, b: mm.eq(where, f, a, b)  # noqa: E731
    eq("id2_kind", ours["id2_kind"], "chain")
    cl, dcl = ours.get("chain_list"), dbg.get("chain")
    if cl is None or dcl is None:
        mm.fail(where, "chain list missing (ours %r, debugfs %r)" % (cl is not None,
                                                                    dcl is not None))
        return
    eq("chain_list.clusters_per_group", cl["clusters_per_group"], dcl["cpg"])
    eq("chain_list.bits_per_cluster", cl["bits_per_cluster"], dcl["bpc"])
    eq("chain_list.count", cl["count"], dcl.get("count"))
    eq("chain_list.next_free", cl["next_free"], dcl.get("next_free"))
    eq("chain_list.records", [(r["total"], r["used"], r["free"], r["blkno"])
                              for r in cl["records"]],
       [(r["total"], r["used"], r["free"], r["blkno"]) for r in dcl["recs"]])
    groups, dgroups = ours.get("groups", []), dbg.get("groups", [])
    eq("number of groups", len(groups), len(dgroups))
    for i, (g, d) in enumerate(zip(groups, dgroups)):
        gw = "%s group %d (blk %d)" % (where, i, d["blkno"])
        e2 = lambda f, a, b: mm.eq(gw, f, a, b)  # noqa: E731
        e2("index in chain", g["index"], d["index"])
        e2("blkno", g["blkno"], d["blkno"])
        e2("bits", g["bits"], d["bits"])
        e2("used_bits", g["used_bits"], d["used"])
        e2("free_bits", g["free_bits"], d["free"])
        e2("contig_free", g["contig_free"], d["contig"])
        e2("size", g["size"], d["size"])
        e2("discontig", g["discontig"], "extent_lists" in d)
        if g["index"] == 0:
            # debugfs prints these for the first group of each chain only.
            e2("chain (bg_chain)", g["group_chain"], d["hdr_chain"])
            e2("chain (walk)", g["chain"], d["hdr_chain"])
            e2("parent", g["parent"], d["hdr_parent"])
            e2("generation", g["generation"], d["hdr_generation"])
            if d["hdr_check"] is not None:
                e2("check_crc32", g["check_crc32"], d["hdr_check"][0])
                e2("check_ecc", g["check_ecc"], d["hdr_check"][1])
            else:
                mm.fail(gw, "debugfs printed no CRC32/ECC line")


def cmp_info(mm, where, info, st, img_size):
    eq = lambda f, a, b: mm.eq(where, f, a, b)  # noqa: E731
    for line in st["unparsed"]:
        mm.fail(where, "debugfs stats line not understood by the test: %r" % line)
    sb = st["super"]
    need = ["rev", "mnt", "state", "check", "os", "fcompat", "fincompat", "tunefs",
            "frocompat", "root", "fcg", "bits", "slots", "xattr", "label", "uuid", "hash",
            "seeds", "stack", "cflags"]
    for k in need:
        if k not in sb:
            mm.fail(where, "debugfs stats: no %s line" % k)
            return
    eq("major_rev", info["major_rev"], int(sb["rev"][0]))
    eq("minor_rev", info["minor_rev"], int(sb["rev"][1]))
    eq("mnt_count", info["mnt_count"], int(sb["mnt"][0]))
    eq("max_mnt_count", info["max_mnt_count"], int(sb["mnt"][1]))
    eq("state", info["state"], int(sb["state"][0]))
    eq("errors", info["errors"], int(sb["state"][1]))
    eq("check_interval", info["check_interval"], int(sb["check"][0]))
    eq("last_check (as ctime)", o2.fmt_ctime(info["last_check"]), sb["check"][1])
    eq("creator_os", info["creator_os"], int(sb["os"][0]))
    for key, dkey, cls in (("feature_compat", "fcompat", "compat"),
                           ("feature_incompat", "fincompat", "incompat"),
                           ("feature_ro_compat", "frocompat", "ro_compat")):
        eq(key, info[key], int(sb[dkey][0]))
        eq("features." + cls, sorted(info["features"][cls]), sorted(sb[dkey][1].split()))
    eq("tunefs_flags", info["tunefs_flags"], int(sb["tunefs"][0]))
    eq("root_blkno", info["root_blkno"], int(sb["root"][0]))
    eq("system_dir_blkno", info["system_dir_blkno"], int(sb["root"][1]))
    eq("first_cluster_group", info["first_cluster_group"], int(sb["fcg"][0]))
    eq("block_bits", info["block_bits"], int(sb["bits"][0]))
    eq("cluster_bits", info["cluster_bits"], int(sb["bits"][1]))
    eq("block_size", info["block_size"], 1 << int(sb["bits"][0]))
    eq("cluster_size", info["cluster_size"], 1 << int(sb["bits"][1]))
    eq("max_slots", info["max_slots"], int(sb["slots"][0]))
    eq("xattr_inline_size", info["xattr_inline_size"], int(sb["xattr"][0]))
    eq("label", info["label"], sb["label"])
    eq("uuid", info["uuid"], sb["uuid"][0])
    if not re.match(r"^[0-9A-F]{32}$", info["uuid"]):
        mm.fail(where, "uuid is not 32 uppercase hex digits: %r" % info["uuid"])
    eq("uuid_hash", info["uuid_hash"], int(sb["hash"][0]))
    eq("dx_seed", info["dx_seed"], [int(x) for x in sb["seeds"]])
    stack = sb["stack"][0]
    incompat = info["feature_incompat"]
    if stack == "classic o2cb":
        eq("stack", info["stack"], "")
        eq("cluster_name", info["cluster_name"], "")
        eq("stack_name", info["stack_name"], "local" if incompat & 0x8 else "o2cb")
        if "cname" in sb:
            mm.fail(where, "debugfs printed a cluster name for a classic stack")
    else:
        eq("stack", info["stack"], stack)
        eq("stack_name", info["stack_name"], "local" if incompat & 0x8 else stack)
        eq("cluster_name", info["cluster_name"], sb.get("cname", ("<none>",))[0])
    eq("stack_flags", info["stack_flags"], int(sb["cflags"][0]))
    eq("fs_generation", info["fs_generation"], st["inode"].get("fs_generation"))
    eq("device_blocks", info["device_blocks"], img_size // info["block_size"])
    eq("free_clusters", info["free_clusters"], info["total_clusters"] - info["used_clusters"])
    eq("free_bytes", info["free_bytes"], info["free_clusters"] * info["cluster_size"])


def cmp_journal_super(mm, where, j, dbg):
    eq = lambda f, a, b: mm.eq(where, f, a, b)  # noqa: E731
    d, bad = o2.parse_logdump_super(dbg)
    for line in bad:
        mm.fail(where, "logdump line not understood by the test: %r" % line)
    for k in ("bs", "commit", "error", "fcompat", "fincompat", "frocompat", "uuid", "users"):
        if k not in d:
            mm.fail(where, "logdump: no %s line" % k)
            return
    eq("block_size", j["block_size"], int(d["bs"][0]))
    eq("maxlen", j["maxlen"], int(d["bs"][1]))
    eq("first", j["first"], int(d["bs"][2]))
    eq("sequence", j["sequence"], int(d["commit"][0]))
    eq("start", j["start"], int(d["commit"][1]))
    eq("errno", j["errno"], int(d["error"][0]))
    eq("feature_compat", j["feature_compat"], int(d["fcompat"][0]))
    eq("feature_incompat", j["feature_incompat"], int(d["fincompat"][0]))
    eq("feature_ro_compat", j["feature_ro_compat"], int(d["frocompat"][0]))
    eq("uuid", j["uuid"], d["uuid"][0])
    eq("nr_users", j["nr_users"], int(d["users"][0]))


def cmp_ls(mm, where, ours, dbg_long, dbg_short):
    ents, bad = o2.parse_ls_long(dbg_long)
    for line in bad:
        mm.fail(where, "debugfs ls -l line not understood by the test: %r" % line)
    sents, sbad = o2.parse_ls(dbg_short)
    for line in sbad:
        mm.fail(where, "debugfs ls line not understood by the test: %r" % line)
    oents = ours["entries"]
    mm.eq(where, "names in order", [e["name"] for e in oents], [e["name"] for e in ents])
    for o, d in zip(oents, ents):
        ew = "%s entry %r" % (where, d["name"])
        mm.eq(ew, "inode", o["inode"], d["inode"])
        mm.eq(ew, "mode_string", o["mode_string"], d["mode_string"])
        mm.eq(ew, "links", o["links"], d["links"])
        mm.eq(ew, "uid", o["uid"], d["uid"])
        mm.eq(ew, "gid", o["gid"], d["gid"])
        mm.eq(ew, "size", o["size"], d["size"])
        mm.eq(ew, "mtime (as ls time)", o2.fmt_ls_time(o["mtime"]), d["time"])
    mm.eq(where, "plain ls entries", len(oents), len(sents))
    for o, d in zip(oents, sents):
        ew = "%s entry %r" % (where, d["name"])
        mm.eq(ew, "name", o["name"], d["name"])
        mm.eq(ew, "name_len", o["name_len"], d["name_len"])
        mm.eq(ew, "file_type", o["file_type"], d["file_type"])
        mm.eq(ew, "inode (plain ls)", o["inode"], d["inode"])


# ---------------------------------------------------------------- one volume

def poke_slots(img, bs, blkno, info):
    """Occupy slots of the slot map in place.  Returns the expected {slot: node}."""
    n = info["max_slots"]
    extended = bool(info["feature_incompat"] & 0x100)
    expect = {}
    with open(img, "r+b") as f:
        f.seek(blkno * bs)
        if extended:
            nodes = [0, 7, 70000, 4000000000, 255]
            buf = bytearray(8 * n)
            for i in range(n):
                if i % 3 == 1:
                    continue  # left empty
                node = nodes[i % len(nodes)] + i // len(nodes)
                buf[8 * i] = 1
                buf[8 * i + 4:8 * i + 8] = node.to_bytes(4, "little")
                expect[i] = node
        else:
            nodes = [0, 3, 254, 65534, 1000]
            buf = bytearray(b"\xff" * (2 * n))
            for i in range(n):
                if i % 3 == 1:
                    continue
                node = nodes[i % len(nodes)] + i // len(nodes)
                node = min(node, 0xFFFE)
                buf[2 * i:2 * i + 2] = node.to_bytes(2, "little")
                expect[i] = node
        f.write(bytes(buf))
    return expect


def cmp_slots(mm, where, ours, dbg_text, expect=None):
    occupied, bad = o2.parse_slotmap(dbg_text)
    for line in bad:
        mm.fail(where, "debugfs slotmap line not understood by the test: %r" % line)
    mine = {s["slot"]: s["node"] for s in ours["slots"] if s["valid"]}
    mm.eq(where, "occupied slots {slot: node}", mine, occupied)
    if expect is not None:
        mm.eq(where, "occupied slots vs what was written", occupied, expect)


def check_volume(ctl, vol, img, tmp, mm):
    where = vol.name
    bs = vol.blocksize

    rc, info, err = ctl.json("info", img)
    if rc != 0 or info is None:
        mm.fail(where, "ocfs2ctl info failed (%d): %s" % (rc, err.strip()))
        return
    bs = info["block_size"]
    nslots = info["max_slots"]

    # Every directory mkfs made, and what is in the system directory.
    rc, sysls, err = ctl.json("ls", "-l", img, "//")
    if rc != 0:
        mm.fail(where, "ocfs2ctl ls -l // failed (%d): %s" % (rc, err.strip()))
        return
    sysnames = [e["name"] for e in sysls["entries"] if e["name"] not in (".", "..")]
    dirs = ["/", "/lost+found", "//"] + ["//" + n for n in sysnames
                                         if n.startswith("orphan_dir:")]
    objects = ["/", "/lost+found", "//"] + ["//" + n for n in sysnames]

    cmds = ["stats"]
    for d in dirs:
        cmds += ["ls -l " + d, "ls " + d, "dx_dump " + d]
    for p in objects:
        cmds.append("stat " + p)
    for s in range(nslots):
        cmds.append("logdump -T %d" % s)
    cmds.append("slotmap")
    out, errtext = o2.debugfs(img, cmds)

    # The volume must be what the test means it to be.
    if vol.expect_dx:
        dx = out["dx_dump //"]
        flags = re.search(r"^\s*Flags: \(0x([0-9a-f]+)\)", dx, re.M)
        leaves = len(re.findall(r"^\s*Dir Index Leaf:", dx, re.M))
        if not flags:
            mm.fail(where, "precondition: the system directory is not indexed")
        elif vol.expect_dx == "inline" and (int(flags.group(1), 16) & 1) == 0:
            mm.fail(where, "precondition: the dx root is not inline")
        elif vol.expect_dx == "external" and ((int(flags.group(1), 16) & 1) or leaves < 2):
            mm.fail(where, "precondition: no external dx root with leaves (%d leaves)" % leaves)

    # Superblock: info, and stat <2> against the inode part of stats.
    st = o2.parse_stats(out["stats"])
    cmp_info(mm, where + " info", info, st, os.path.getsize(img))
    rc, sbi, err = ctl.json("stat", img, "<2>")
    if rc != 0:
        mm.fail(where, "ocfs2ctl stat <2> failed (%d): %s" % (rc, err.strip()))
    else:
        cmp_inode(mm, where + " superblock inode", sbi, dict(st["inode"], unparsed=[]),
                  sections=False)
        mm.eq(where + " superblock inode", "id2_kind", sbi["id2_kind"], "super")

    # Directories.
    for d in dirs:
        rc, ls, err = ctl.json("ls", "-l", img, d)
        if rc != 0:
            mm.fail(where, "ocfs2ctl ls -l %s failed (%d): %s" % (d, rc, err.strip()))
            continue
        cmp_ls(mm, "%s ls %s" % (where, d), ls, out["ls -l " + d], out["ls " + d])

    # Every inode: by path, and once by <N> (must give the same document).
    stats = {}
    for p in objects:
        rc, si, err = ctl.json("stat", img, p)
        if rc != 0:
            mm.fail(where, "ocfs2ctl stat %s failed (%d): %s" % (p, rc, err.strip()))
            continue
        stats[p] = si
        cmp_inode(mm, "%s stat %s" % (where, p), si, o2.parse_stat(out["stat " + p]))
        rc, sn, err = ctl.json("stat", img, "<%d>" % si["inode"])
        if rc != 0:
            mm.fail(where, "ocfs2ctl stat <%d> failed (%d): %s" % (si["inode"], rc, err.strip()))
        else:
            sn.pop("path", None)
            si2 = dict(si)
            si2.pop("path", None)
            mm.eq("%s stat <%d>" % (where, si["inode"]), "same as stat " + p, sn, si2)

    # Space: info's totals are the global bitmap's.
    gb = stats.get("//global_bitmap")
    if gb:
        mm.eq(where + " info", "total_clusters (global_bitmap)", info["total_clusters"],
              gb["bitmap_total"])
        mm.eq(where + " info", "used_clusters (global_bitmap)", info["used_clusters"],
              gb["bitmap_used"])

    # Journals.
    mm.eq(where + " info", "number of journals", len(info["journals"]), nslots)
    for j in info["journals"]:
        jw = "%s journal slot %d" % (where, j["slot"])
        cmp_journal_super(mm, jw, j, out["logdump -T %d" % j["slot"]])
        sj = stats.get("//journal:%04d" % j["slot"])
        if sj:
            mm.eq(jw, "inode", j["inode"], sj["inode"])
            mm.eq(jw, "flags", j["flags"], sj["journal_flags"])
            mm.eq(jw, "recovery_generation", j["recovery_generation"],
                  sj["journal_recovery_generation"])
            mm.eq(jw, "stat's journal.super", sj["journal"].get("super", {}).get("maxlen"),
                  j["maxlen"])
            mm.eq(jw, "size (vs i_size)", j["size"], sj["size"])
    if info["journals"]:
        mm.eq(where + " info", "journal_size", info["journal_size"], info["journals"][0]["size"])

    # Slot map, fresh.
    rc, slots, err = ctl.json("slots", img)
    if rc != 0:
        mm.fail(where, "ocfs2ctl slots failed (%d): %s" % (rc, err.strip()))
        slots = None
    else:
        mm.eq(where + " slots", "num_slots", slots["num_slots"], nslots)
        mm.eq(where + " slots", "extended", slots["extended"],
              bool(info["feature_incompat"] & 0x100))
        cmp_slots(mm, where + " slots (fresh)", slots, out["slotmap"])

    # cat of system files against debugfs dump.
    for p, si in sorted(stats.items()):
        # Chain allocators have no file data to read (their size is their space).
        if (si["type"] != "regular" or si["size"] > 16 * M or not p.startswith("//")
                or si["id2_kind"] not in ("extents", "inline")):
            continue
        dumpf = os.path.join(tmp, "dump")
        o2.debugfs_dump(img, p, dumpf)
        with open(dumpf, "rb") as f:
            theirs = f.read()
        os.unlink(dumpf)
        rc, ours, err = ctl.raw("cat", img, p)
        if rc != 0:
            mm.fail(where, "ocfs2ctl cat %s failed (%d): %s" % (p, rc, text(err).strip()))
            continue
        if ours != theirs:
            first = next((i for i in range(min(len(ours), len(theirs)))
                          if ours[i] != theirs[i]), min(len(ours), len(theirs)))
            at = lambda b: ("0x%02x" % b[first]) if first < len(b) else "EOF"  # noqa: E731
            mm.add(where + " cat " + p, "data differs at offset %d (length, byte there)" % first,
                   (len(ours), at(ours)), (len(theirs), at(theirs)))
        mm.checked += 1
    rc, cj, err = ctl.json("cat", img, "//slot_map")
    if rc != 0:
        mm.fail(where, "ocfs2ctl --json cat //slot_map failed (%d): %s" % (rc, err.strip()))
    else:
        rc2, raw, _ = ctl.raw("cat", img, "//slot_map")
        mm.eq(where + " cat --json //slot_map", "data_base64 decoded equals cat's bytes",
              base64.b64decode(cj["data_base64"]) == raw, True)
        mm.eq(where + " cat --json //slot_map", "size", cj["size"], len(raw))

    # check, and its counts against what debugfs shows.
    rc, chk, err = ctl.json("check", img)
    if rc != 0 or not chk or not chk.get("clean"):
        mm.fail(where, "ocfs2ctl check failed (%d): %s" % (rc, err.strip()))
    else:
        cmp_check_counts(mm, where + " check", chk, stats, out, dirs)

    # Occupied slots, poked into the slot map's first block.
    if slots is not None:
        dsm = o2.parse_stat(out["stat //slot_map"])
        lists = dsm.get("extent_lists") or [{"recs": []}]
        if not lists[0]["recs"]:
            mm.fail(where, "debugfs shows no extent for //slot_map")
        else:
            blk = lists[0]["recs"][0]["blkno"]
            expect = poke_slots(img, bs, blk, info)
            dout, _ = o2.debugfs(img, ["slotmap"])
            rc, slots2, err = ctl.json("slots", img)
            if rc != 0:
                mm.fail(where, "ocfs2ctl slots (poked) failed (%d): %s" % (rc, err.strip()))
            else:
                cmp_slots(mm, where + " slots (occupied)", slots2, dout["slotmap"], expect)


def cmp_check_counts(mm, where, chk, stats, out, dirs):
    """The walk's counts against totals derived from debugfs's view of a fresh volume."""
    inode_allocs = [p for p in stats if p == "//global_inode_alloc"
                    or p.startswith("//inode_alloc:")]
    chain_allocs = [p for p in stats if stats[p]["flags"] & 0x400]
    groups = 0
    inodes = 0
    for p in chain_allocs:
        d = o2.parse_stat(out["stat " + p])
        n = len(d.get("groups", []))
        groups += n
        if p in inode_allocs:
            # Bit 0 of every inode group is its descriptor.
            inodes += d["bitmap"][1] - n
    mm.eq(where, "groups (all chain allocators)", chk["groups"], groups)
    mm.eq(where, "inodes (used bits of the inode allocators)", chk["inodes"], inodes)
    mm.eq(where, "dirs", chk["dirs"], len(dirs))
    dirents = 0
    for d in dirs:
        ents, _ = o2.parse_ls(out["ls " + d])
        dirents += len(ents)
    mm.eq(where, "dirents (all entries, . and .. included)", chk["dirents"], dirents)
    dx = 0
    for d in dirs:
        t = out["dx_dump " + d]
        dx += len(re.findall(r"^\s*Dir Index Root:", t, re.M))
        dx += len(re.findall(r"^\s*Dir Index Leaf:", t, re.M))
    mm.eq(where, "dx_blocks (dx roots + leaves)", chk["dx_blocks"], dx)


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ocfs2ctl")
    ap.add_argument("group")
    ap.add_argument("--keep", help="make the images in this directory and keep them")
    ap.add_argument("--only", help="run only the volume of this name")
    args = ap.parse_args()
    need_tools("mkfs.ocfs2", "debugfs.ocfs2", "tunefs.ocfs2")
    ctl = o2.Ctl(os.path.abspath(args.ocfs2ctl))

    if args.group.startswith("b") and args.group[1:].isdigit():
        vols = matrix(int(args.group[1:]))
    elif args.group == "special":
        vols = special()
    else:
        ap.error("unknown group %r" % args.group)
    if args.only:
        vols = [v for v in vols if v.name == args.only]
        if not vols:
            ap.error("no volume %r in group %s" % (args.only, args.group))

    tmp = args.keep or tempfile.mkdtemp(prefix="o2oracle-")
    os.makedirs(tmp, exist_ok=True)
    refused = []
    failed = []
    total_checked = 0
    try:
        for vol in vols:
            t0 = time.time()
            img = os.path.join(tmp, vol.name + ".img")
            made = None
            for j in vol.journals:
                ok, why = o2.mkfs(img, vol.size, vol.args + ["-J", "size=" + j])
                if ok:
                    made = j
                    break
                refused.append("%s: mkfs.ocfs2 %s -J size=%s (%d MiB image): %s"
                               % (vol.name, " ".join(vol.args), j, vol.size // M, why))
            if made is None:
                print("SKIP %s: mkfs.ocfs2 refused every journal size" % vol.name)
                continue
            if vol.post:
                vol.post(img, vol)
            mm = o2.Mismatches()
            try:
                check_volume(ctl, vol, img, tmp, mm)
            except Exception as e:  # a crash of the harness is a failure too
                import traceback
                traceback.print_exc()
                mm.fail(vol.name, "exception: %r" % e)
            total_checked += mm.checked
            status = "ok" if not mm.items else "FAIL (%d)" % len(mm.items)
            print("%-28s journal %-4s %5d fields  %.1fs  %s"
                  % (vol.name, made, mm.checked, time.time() - t0, status))
            sys.stdout.flush()
            if mm.items:
                mm.report()
                failed.append(vol.name)
            if not args.keep:
                os.unlink(img)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    for r in refused:
        print("REFUSED " + r)
    print("%d volumes, %d fields compared, %d failed%s"
          % (len(vols), total_checked, len(failed),
             (": " + " ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
