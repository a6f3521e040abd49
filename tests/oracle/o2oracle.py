# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared helpers of the oracle tests: run the real ocfs2-tools and ocfs2ctl,
parse debugfs.ocfs2's text output, and compare field by field.

The parsers are strict on purpose: a line of debugfs output that no parser
recognises is reported as a mismatch ("unparsed"), so a field debugfs prints
can never be skipped silently.

Running programs, ocfs2ctl (Ctl) and images come from o2test, the tests'
library, found through PYTHONPATH; by hand, from the top of the tree:

    PYTHONPATH=tests python3 tests/oracle/oracle_volumes.py build/cli/ocfs2ctl b4096
"""

import functools
import os
import re
import sys
import time

from o2test.ctl import Ctl as _Ctl
from o2test.proc import run_split, text, tool_env, which
from o2test.volume import make_image

# the tools' environment (without meson's MALLOC_PERTURB_: see proc.tool_env)
TOOL_ENV = tool_env(TZ="UTC", LANG="C", LC_ALL="C")
# run(argv, input=None, check=False): (exit status, stdout bytes, stderr bytes) in TOOL_ENV
run = functools.partial(run_split, env=TOOL_ENV, binary=True)


# ---------------------------------------------------------------- mkfs

def mkfs(path, size, args):
    """Format a fresh sparse image with the real mkfs.ocfs2.

    Returns (ok, message): ok False when mkfs refused, with its reason.
    """
    make_image(path, size)
    rc, out, err = run([which("mkfs.ocfs2"), "-q"] + args + [path])
    msg = (text(out) + text(err)).strip()
    # mkfs prints the cluster stack on stdout even with -q; ignore that.
    lines = [l for l in msg.splitlines()
             if l.strip() and not l.startswith("Cluster stack:")
             and not l.startswith("Cluster name:") and not l.startswith("Stack Flags:")
             and not l.startswith("NOTE:")]
    if rc != 0:
        return False, "; ".join(lines) or ("exit %d" % rc)
    return True, ""


SB_INCOMPAT_OFFSET_IN_DINODE = 0xC0 + 0x20


def flip_local_mount(path, blocksize, on):
    """Set or clear OCFS2_FEATURE_INCOMPAT_LOCAL_MOUNT (0x8) in the superblock."""
    off = 2 * blocksize + SB_INCOMPAT_OFFSET_IN_DINODE
    with open(path, "r+b") as f:
        f.seek(off)
        v = int.from_bytes(f.read(4), "little")
        v = (v | 0x8) if on else (v & ~0x8)
        f.seek(off)
        f.write(v.to_bytes(4, "little"))


def tunefs_features(path, features):
    rc, out, err = run([which("tunefs.ocfs2"), "--fs-features=" + features, path], input=b"y\n")
    if rc != 0:
        raise RuntimeError("tunefs.ocfs2 --fs-features=%s failed (%d): %s%s"
                           % (features, rc, text(out), text(err)))


# ---------------------------------------------------------------- debugfs

def debugfs(img, cmds):
    """Run debugfs.ocfs2 commands in one batch (-f).

    Returns {command: output text}.  debugfs echoes "debugfs: CMD" before the
    output of each command; the outputs are split on those lines.
    """
    cmdfile = img + ".debugfs-cmds"
    with open(cmdfile, "w") as f:
        for c in cmds:
            f.write(c + "\n")
    try:
        rc, out, err = run([which("debugfs.ocfs2"), "-f", cmdfile, img])
    finally:
        os.unlink(cmdfile)
    res = {}
    cur = None
    buf = []
    for line in text(out).splitlines():
        if line.startswith("debugfs: "):
            if cur is not None:
                res[cur] = "\n".join(buf)
            cur = line[len("debugfs: "):]
            buf = []
        elif cur is not None:
            buf.append(line)
    if cur is not None:
        res[cur] = "\n".join(buf)
    errtext = "\n".join(l for l in text(err).splitlines()
                        if not l.startswith("debugfs.ocfs2 "))
    for c in cmds:
        if c not in res:
            raise RuntimeError("debugfs printed nothing for %r (stderr: %s)" % (c, errtext))
    return res, errtext


def debugfs_dump(img, path, out):
    rc, o, e = run([which("debugfs.ocfs2"), "-R", "dump %s %s" % (path, out), img])
    if rc != 0 or not os.path.exists(out):
        raise RuntimeError("debugfs dump %s failed: %s" % (path, text(e)))


# ---------------------------------------------------------------- ocfs2ctl

class Ctl(_Ctl):
    """ocfs2ctl (o2test.ctl.Ctl) in TOOL_ENV.  With O2ORACLE_MUTATE=NAME in
    the environment, one of MUTATIONS falsifies what ocfs2ctl said, so the
    self-test can prove that the comparisons catch a wrong answer."""

    def __init__(self, path):
        super().__init__(path, env=TOOL_ENV)
        self.mutation = os.environ.get("O2ORACLE_MUTATE")
        if self.mutation and self.mutation not in MUTATIONS:
            raise ValueError("unknown mutation %r" % self.mutation)

    def raw(self, *args):
        rc, out, err = super().raw(*args)
        if self.mutation == "cat-byte" and args[0] == "cat" and args[-1] == "//slot_map" and out:
            out = bytes([out[0] ^ 0x01]) + out[1:]
        return rc, out, err

    def json(self, *args):
        """Run ocfs2ctl --json ARGS; returns (rc, parsed or None, stderr text)."""
        rc, doc, err = super().json(*args)
        if self.mutation and doc is not None:
            MUTATIONS[self.mutation](list(args), doc)
        return rc, doc, err


def _mut_stat(path, fn):
    def m(args, doc):
        if args[0] == "stat" and args[-1] == path:
            fn(doc)
    return m


def _swap_entries(args, doc):
    if args[0] == "ls" and args[-1] == "//" and len(doc["entries"]) > 3:
        e = doc["entries"]
        e[2], e[3] = e[3], e[2]


def _slot_node(args, doc):
    if args[0] == "slots":
        for s in doc["slots"]:
            if s["valid"]:
                s["node"] += 1
                break


def _inc(d, *path):
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] += 1


MUTATIONS = {
    "stat-generation": _mut_stat("//global_bitmap", lambda d: _inc(d, "generation")),
    "stat-flags": _mut_stat("//local_alloc:0000", lambda d: d.update(flags=d["flags"] ^ 0x40)),
    "group-contig": _mut_stat("//global_bitmap", lambda d: _inc(d, "groups", -1, "contig_free")),
    "chain-rec": _mut_stat("//global_inode_alloc",
                           lambda d: _inc(d, "chain_list", "records", 0, "free")),
    "extent-blkno": _mut_stat("//journal:0000",
                              lambda d: _inc(d, "extent_list", "records", 0, "blkno")),
    "inline-max": _mut_stat("/", lambda d: _inc(d, "inline_data", "max")
                            if "inline_data" in d else _inc(d, "extent_list", "count")),
    "mtime-nsec": _mut_stat("/lost+found", lambda d: _inc(d, "mtime_nsec")),
    "ls-order": _swap_entries,
    "slot-node": _slot_node,
    "info-uuid": lambda a, d: a[0] == "info" and d.update(uuid=d["uuid"].lower()),
    "info-label": lambda a, d: a[0] == "info" and d.update(label=d["label"] + "x"),
    "journal-seq": lambda a, d: a[0] == "info" and _inc(d, "journals", 0, "sequence"),
    "check-dirents": lambda a, d: a[0] == "check" and _inc(d, "dirents"),
    "cat-byte": lambda a, d: None,  # applied to raw output, see Ctl.raw
}


# ---------------------------------------------------------------- comparison

class Mismatches:
    """Collects differences; each names the volume, the object, the field."""

    def __init__(self):
        self.items = []
        self.checked = 0

    def add(self, where, field, ours, theirs):
        self.items.append((where, field, ours, theirs))

    def eq(self, where, field, ours, theirs):
        self.checked += 1
        if ours != theirs:
            self.add(where, field, ours, theirs)

    def fail(self, where, what):
        self.items.append((where, what, None, None))

    def report(self, out=sys.stdout):
        for where, field, ours, theirs in self.items:
            if ours is None and theirs is None:
                out.write("MISMATCH %s: %s\n" % (where, field))
            else:
                out.write("MISMATCH %s: %s: ours=%s debugfs=%s\n"
                          % (where, field, _short(ours), _short(theirs)))


def _short(v, limit=400):
    r = repr(v)
    if len(r) <= limit:
        return r
    return r[:limit] + "...(%d chars)" % len(r)


# ---------------------------------------------------------------- parsers

def _lines(t):
    return [l.strip() for l in t.splitlines() if l.strip()]


def fmt_ctime(sec):
    """time.ctime() in UTC, as debugfs prints with TZ=UTC."""
    return time.strftime("%a %b %e %H:%M:%S %Y", time.gmtime(sec))


def fmt_ls_time(sec):
    tm = time.gmtime(sec)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
              "Nov", "Dec"]
    return "%d-%s-%d %02d:%02d" % (tm.tm_mday, months[tm.tm_mon - 1], tm.tm_year,
                                   tm.tm_hour, tm.tm_min)


DEBUGFS_INODE_FLAGS = {
    "Valid": 0x1, "Unused2": 0x2, "Orphan": 0x4, "Unused3": 0x8, "System": 0x10,
    "Superblock": 0x20, "Localalloc": 0x40, "Allocbitmap": 0x80, "Journal": 0x100,
    "Heartbeat": 0x200, "Chain": 0x400, "Dealloc": 0x800,
}
DEBUGFS_INODE_FLAGS_MASK = 0xFFF

DEBUGFS_DYN = {"InlineData": 0x1, "HasXattr": 0x2, "InlineXattr": 0x4, "IndexedDir": 0x8,
               "Refcounted": 0x10}

DEBUGFS_TYPES = {"Regular": "regular", "Directory": "directory", "Char Device": "char",
                 "Block Device": "block", "FIFO": "fifo", "Symbolic Link": "symlink",
                 "Socket": "socket", "Unknown": "unknown"}

_INODE_RES = [
    ("inode", r"Inode: (\d+)\s+Mode: 0([0-7]*)\s+Generation: (\d+) \(0x[0-9a-f]+\)"),
    ("fsgen", r"FS Generation: (\d+) \(0x[0-9a-f]+\)"),
    ("check", r"CRC32: ([0-9a-f]{8})\s+ECC: ([0-9a-f]{4})"),
    ("type", r"Type: (.+?)\s+Attr: 0x([0-9a-f]+)\s+Flags: ?(.*)"),
    ("dyn", r"Dynamic Features: \(0x([0-9a-f]+)\) ?(.*)"),
    ("xattr", r"Extended Attributes Block: (\d+)\s+Extended Attributes Inline Size: (\d+)"),
    ("user", r"User: (\d+) \(.*?\)\s+Group: (\d+) \(.*?\)\s+Size: (\d+)"),
    ("links", r"Links: (\d+)\s+Clusters: (\d+)"),
    ("time", r"([cam])time: 0x([0-9a-f]+) 0x([0-9a-f]+) -- (.*)"),
    ("dtime", r"dtime: 0x([0-9a-f]+) -- (.*)"),
    ("refcount", r"Refcount Block: (\d+)"),
    ("lastext", r"Last Extblk: (\d+)\s+Orphan Slot: (-?\d+)"),
    ("suballoc", r"Sub Alloc Slot: (Global|\d+)\s+Sub Alloc Bit: (\d+)(?:\s+Sub Alloc Group (\d+))?"),
    ("bitmap", r"Bitmap Total: (\d+)\s+Used: (\d+)\s+Free: (-?\d+)"),
    ("jflags", r"Journal Flags: ?(.*)"),
    ("jrecgen", r"Recovery Generation: (\d+)"),
    ("inline", r"Inline Data Max: (\d+)"),
    ("dxroot", r"Indexed Tree Root: (\d+)"),
]
_INODE_RES = [(k, re.compile("^" + r + "$")) for k, r in _INODE_RES]


def _parse_inode_line(d, line):
    """Parse one line of debugfs's dump_inode into d; False if not one."""
    for key, rx in _INODE_RES:
        m = rx.match(line)
        if not m:
            continue
        g = m.groups()
        if key == "inode":
            d["inode"] = int(g[0])
            d["perm"] = int(g[1] or "0", 8)
            d["generation"] = int(g[2])
        elif key == "fsgen":
            d["fs_generation"] = int(g[0])
        elif key == "check":
            d["check_crc32"] = int(g[0], 16)
            d["check_ecc"] = int(g[1], 16)
        elif key == "type":
            d["type"] = g[0]
            d["attr"] = int(g[1], 16)
            d["flag_names"] = g[2].split()
        elif key == "dyn":
            d["dyn_features"] = int(g[0], 16)
            d["dyn_names"] = g[1].split()
        elif key == "xattr":
            d["xattr_loc"] = int(g[0])
            d["xattr_inline_size"] = int(g[1])
        elif key == "user":
            d["uid"], d["gid"], d["size"] = int(g[0]), int(g[1]), int(g[2])
        elif key == "links":
            d["links"], d["clusters"] = int(g[0]), int(g[1])
        elif key == "time":
            d[g[0] + "time"] = int(g[1], 16)
            d[g[0] + "time_nsec"] = int(g[2], 16)
            d[g[0] + "time_str"] = g[3]
        elif key == "dtime":
            d["dtime"] = int(g[0], 16)
        elif key == "refcount":
            d["refcount_loc"] = int(g[0])
        elif key == "lastext":
            d["last_eb_blk"] = int(g[0])
            d["orphaned_slot"] = int(g[1])
        elif key == "suballoc":
            d["suballoc_slot"] = 0xFFFF if g[0] == "Global" else int(g[0])
            d["suballoc_bit"] = int(g[1])
            d["suballoc_loc"] = int(g[2]) if g[2] is not None else None
        elif key == "bitmap":
            d["bitmap"] = (int(g[0]), int(g[1]), int(g[2]))
        elif key == "jflags":
            d["journal_flag_names"] = g[0].split()
        elif key == "jrecgen":
            d["journal_recovery_generation"] = int(g[0])
        elif key == "inline":
            d["inline_max"] = int(g[0])
        elif key == "dxroot":
            d["dx_root"] = int(g[0])
        return True
    return False


_EXT_HDR = re.compile(r"^Tree Depth: (\d+)\s+Count: (\d+)\s+Next Free Rec: (\d+)$")
_EXT_COLS = re.compile(r"^## Offset\s+Clusters\s+Block#(\s+Flags)?$")
_EXT_LEAF = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+0x([0-9a-f]+)(?:\s+(.*))?$")
_EXT_BRANCH = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")
_EB_HDR1 = re.compile(r"^SubAlloc Bit: (\d+)\s+SubAlloc Slot: (\d+)(?:\s+SubAlloc Group: (\d+))?$")
_EB_HDR2 = re.compile(r"^Blknum: (\d+)\s+Next Leaf: (\d+)$")
_EB_FSGEN = re.compile(r"^FS Generation: (\d+) \(0x[0-9a-f]+\)$")
_LA = re.compile(r"^Local Bitmap Offset: (\d+)\s+Size: (\d+)$")
_CHAIN_HDR1 = re.compile(r"^Clusters per Group: (\d+)\s+Bits per Cluster: (\d+)$")
_CHAIN_HDR2 = re.compile(r"^Count: (\d+)\s+Next Free Rec: (\d+)$")
_CHAIN_COLS = re.compile(r"^##\s+Total\s+Used\s+Free\s+Block#$")
_CHAIN_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(-?\d+)\s+(\d+)\s+(\d+)$")
_GRP_HDR = re.compile(r"^Group Chain: (\d+)\s+Parent Inode: (\d+)\s+Generation: (\d+)$")
_GRP_COLS = re.compile(r"^##\s+Block#\s+Total\s+Used\s+Free\s+Contig\s+Size$")
_GRP_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+)\s+(\d+)\s+(\d+)\s+(\d+)$")
_CHECK = re.compile(r"^CRC32: ([0-9a-f]{8})\s+ECC: ([0-9a-f]{4})$")
_TL_HDR = re.compile(r"^Total Records: (\d+)\s+Used: (\d+)$")
_TL_COLS = re.compile(r"^##\s+Start Cluster\s+Num Clusters$")
_TL_ROW = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)$")
_SYMLINK = re.compile(r"^Fast Symlink Destination: (.*)$")


def parse_stat(t):
    """Parse `debugfs.ocfs2 -R "stat PATH"`.

    Returns a dict: the inode fields (see _parse_inode_line) plus, as present,
    "extent_lists" (list of {depth, count, next_free, recs, eb}), "local_alloc",
    "chain" {cpg, bpc, count, next_free, recs}, "groups" (list of dicts in
    print order), "truncate_log", "symlink"; "unparsed" lists the lines no
    parser knew.
    """
    d = {"unparsed": []}
    mode = "inode"
    cur_list = None
    cur_eb = None
    cur_grp_hdr = None
    pending_check = None
    for line in _lines(t):
        if mode == "inode" and _parse_inode_line(d, line):
            continue
        m = _EXT_HDR.match(line)
        if m:
            mode = "extents"
            cur_list = {"depth": int(m.group(1)), "count": int(m.group(2)),
                        "next_free": int(m.group(3)), "recs": [], "eb": cur_eb}
            cur_eb = None
            if cur_grp_hdr is not None and d.get("groups"):
                # A discontiguous group's own extent list.
                d["groups"][-1].setdefault("extent_lists", []).append(cur_list)
            else:
                d.setdefault("extent_lists", []).append(cur_list)
            continue
        if _EXT_COLS.match(line) and cur_list is not None:
            continue
        if mode == "extents" and cur_list is not None:
            m = _EXT_LEAF.match(line)
            if m and cur_list["depth"] == 0:
                cur_list["recs"].append({"cpos": int(m.group(2)), "clusters": int(m.group(3)),
                                         "blkno": int(m.group(4)), "flags": int(m.group(5), 16),
                                         "flag_names": (m.group(6) or "").split()})
                continue
            m = _EXT_BRANCH.match(line)
            if m and cur_list["depth"] > 0:
                cur_list["recs"].append({"cpos": int(m.group(2)), "clusters": int(m.group(3)),
                                         "blkno": int(m.group(4))})
                continue
        m = _EB_HDR1.match(line)
        if m:
            cur_eb = {"suballoc_bit": int(m.group(1)), "suballoc_slot": int(m.group(2)),
                      "suballoc_loc": int(m.group(3) or 0)}
            mode = "eb"
            continue
        if mode == "eb" and cur_eb is not None:
            m = _EB_HDR2.match(line)
            if m:
                cur_eb["blkno"], cur_eb["next_leaf"] = int(m.group(1)), int(m.group(2))
                continue
            m = _CHECK.match(line)
            if m:
                cur_eb["check"] = (int(m.group(1), 16), int(m.group(2), 16))
                continue
            m = _EB_FSGEN.match(line)
            if m:
                cur_eb["fs_generation"] = int(m.group(1))
                continue
        m = _LA.match(line)
        if m:
            d["local_alloc"] = {"bm_off": int(m.group(1)), "size": int(m.group(2))}
            mode = "la"
            continue
        m = _CHAIN_HDR1.match(line)
        if m:
            d["chain"] = {"cpg": int(m.group(1)), "bpc": int(m.group(2)), "recs": []}
            mode = "chain"
            continue
        if mode == "chain":
            m = _CHAIN_HDR2.match(line)
            if m:
                d["chain"]["count"], d["chain"]["next_free"] = int(m.group(1)), int(m.group(2))
                continue
            if _CHAIN_COLS.match(line):
                continue
            m = _CHAIN_ROW.match(line)
            if m:
                d["chain"]["recs"].append({"total": int(m.group(2)), "used": int(m.group(3)),
                                           "free": int(m.group(4)), "blkno": int(m.group(5))})
                continue
        m = _GRP_HDR.match(line)
        if m:
            cur_grp_hdr = {"chain": int(m.group(1)), "parent": int(m.group(2)),
                           "generation": int(m.group(3))}
            pending_check = None
            mode = "group"
            continue
        if cur_grp_hdr is not None and mode in ("group", "extents"):
            m = _CHECK.match(line)
            if m:
                pending_check = (int(m.group(1), 16), int(m.group(2), 16))
                continue
            if _GRP_COLS.match(line):
                continue
            m = _GRP_ROW.match(line)
            if m:
                d.setdefault("groups", []).append({
                    "hdr_chain": cur_grp_hdr["chain"], "hdr_parent": cur_grp_hdr["parent"],
                    "hdr_generation": cur_grp_hdr["generation"], "hdr_check": pending_check,
                    "index": int(m.group(1)), "blkno": int(m.group(2)),
                    "bits": int(m.group(3)), "used": int(m.group(4)), "free": int(m.group(5)),
                    "contig": int(m.group(6)), "size": int(m.group(7))})
                mode = "group"
                continue
        m = _TL_HDR.match(line)
        if m:
            d["truncate_log"] = {"count": int(m.group(1)), "used": int(m.group(2)), "recs": []}
            mode = "tl"
            continue
        if mode == "tl":
            if _TL_COLS.match(line):
                continue
            m = _TL_ROW.match(line)
            if m:
                d["truncate_log"]["recs"].append((int(m.group(2)), int(m.group(3))))
                continue
        m = _SYMLINK.match(line)
        if m:
            d["symlink"] = m.group(1)
            continue
        d["unparsed"].append(line)
    return d


_SB_RES = [
    ("rev", r"Revision: (\d+)\.(\d+)"),
    ("mnt", r"Mount Count: (\d+)\s+Max Mount Count: (\d+)"),
    ("state", r"State: (\d+)\s+Errors: (\d+)"),
    ("check", r"Check Interval: (\d+)\s+Last Check: (.*)"),
    ("os", r"Creator OS: (\d+)"),
    ("fcompat", r"Feature Compat: (\d+) ?(.*)"),
    ("fincompat", r"Feature Incompat: (\d+) ?(.*)"),
    ("tunefs", r"Tunefs Incomplete: (\d+) ?(.*)"),
    ("frocompat", r"Feature RO compat: (\d+) ?(.*)"),
    ("root", r"Root Blknum: (\d+)\s+System Dir Blknum: (\d+)"),
    ("fcg", r"First Cluster Group Blknum: (\d+)"),
    ("bits", r"Block Size Bits: (\d+)\s+Cluster Size Bits: (\d+)"),
    ("slots", r"Max Node Slots: (\d+)"),
    ("xattr", r"Extended Attributes Inline Size: (\d+)"),
    ("label", r"Label: ?(.*)"),
    ("uuid", r"UUID: ([0-9A-F]{32})"),
    ("hash", r"Hash: (\d+) \(0x[0-9a-f]+\)"),
    ("seeds", r"DX Seeds: (\d+) (\d+) (\d+) \(.*\)"),
    ("stack", r"Cluster stack: (.*)"),
    ("cname", r"Cluster name: (.*)"),
    ("cflags", r"Cluster flags: (\d+) ?(.*)"),
]
_SB_RES = [(k, re.compile("^" + r + "$")) for k, r in _SB_RES]


def parse_stats(t):
    """Parse `debugfs.ocfs2 -R stats`: {"super": {...}, "inode": {...}, "unparsed": []}.

    The label keeps its spaces; every other line is stripped.
    """
    sb = {}
    ino = {}
    unparsed = []
    in_inode = False
    for raw in t.splitlines():
        line = raw.strip()
        if not line and not raw.startswith("\tLabel:"):
            continue
        if not in_inode:
            if raw.startswith("\tLabel:"):
                sb["label"] = raw[len("\tLabel: "):] if raw.startswith("\tLabel: ") else ""
                continue
            matched = False
            for key, rx in _SB_RES:
                m = rx.match(line)
                if m:
                    sb[key] = m.groups()
                    matched = True
                    break
            if matched:
                continue
            if line.startswith("Inode: "):
                in_inode = True
        if in_inode:
            if not _parse_inode_line(ino, line):
                unparsed.append(line)
            continue
        unparsed.append(line)
    return {"super": sb, "inode": ino, "unparsed": unparsed}


_LS_L = re.compile(r"^\t(\d+)\s+(\S{10})\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                   r"(\d{1,2}-[A-Z][a-z]{2}-\d+ \d\d:\d\d) (.*)$")
# "%-15llu %-4u %-4u %-2u %s": the type is padded to two columns, then a space.
_LS = re.compile(r"^\t(\d+)\s+(\d+)\s+(\d+)\s+(\d+)( +)(.*)$")


def parse_ls_long(t):
    """Parse `ls -l DIR`: list of dicts, on-disk order; (entries, unparsed)."""
    ents, bad = [], []
    for raw in t.splitlines():
        if not raw.strip():
            continue
        m = _LS_L.match(raw)
        if not m:
            bad.append(raw)
            continue
        ents.append({"inode": int(m.group(1)), "mode_string": m.group(2),
                     "links": int(m.group(3)), "uid": int(m.group(4)), "gid": int(m.group(5)),
                     "size": int(m.group(6)), "time": m.group(7), "name": m.group(8)})
    return ents, bad


def parse_ls(t):
    """Parse plain `ls DIR`: inode, rec_len, name_len, file_type, name."""
    ents, bad = [], []
    for raw in t.splitlines():
        if not raw.strip():
            continue
        m = _LS.match(raw)
        if not m:
            bad.append(raw)
            continue
        pad = max(1, 3 - len(m.group(4)))
        if len(m.group(5)) < pad:
            bad.append(raw)
            continue
        ents.append({"inode": int(m.group(1)), "rec_len": int(m.group(2)),
                     "name_len": int(m.group(3)), "file_type": int(m.group(4)),
                     "name": m.group(5)[pad:] + m.group(6)})
    return ents, bad


_SLOT_HDR = re.compile(r"^Slot#\s+Node#$")
_SLOT_ROW = re.compile(r"^(\d+)\s+(\d+)$")


def parse_slotmap(t):
    """Parse `slotmap`: ({slot: node} of the occupied slots, unparsed)."""
    slots, bad = {}, []
    for line in _lines(t):
        if _SLOT_HDR.match(line):
            continue
        m = _SLOT_ROW.match(line)
        if m:
            slots[int(m.group(1))] = int(m.group(2))
        else:
            bad.append(line)
    return slots, bad


_JSB_RES = [
    ("block0", r"Block 0: Journal Superblock"),
    ("seq", r"Seq: (\d+)\s+Type: (\d+) \((.*)\)"),
    ("bs", r"Blocksize: (\d+)\s+Total Blocks: (\d+)\s+First Block: (\d+)"),
    ("commit", r"First Commit ID: (\d+)\s+Start Log Blknum: (\d+)"),
    ("error", r"Error: (-?\d+)"),
    ("fcompat", r"Feature Compat: (\d+) ?(.*)"),
    ("fincompat", r"Feature Incompat: (\d+) ?(.*)"),
    ("frocompat", r"Feature RO compat: (\d+) ?(.*)"),
    ("uuid", r"Journal UUID: ([0-9A-F]{32})"),
    ("users", r"FS Share Cnt: (\d+)\s+Dynamic Superblk Blknum: (\d+)"),
    ("txn", r"Per Txn Block Limit\s+Journal: (\d+)\s+Data: (\d+)"),
    ("rest", r"Block \d+( to \d+)?: .*"),
]
_JSB_RES = [(k, re.compile("^" + r + "$")) for k, r in _JSB_RES]


def parse_logdump_super(t):
    """Parse `logdump -T SLOT` (the journal superblock part)."""
    d, bad = {}, []
    for line in _lines(t):
        for key, rx in _JSB_RES:
            m = rx.match(line)
            if m:
                d[key] = m.groups()
                break
        else:
            bad.append(line)
    return d, bad
