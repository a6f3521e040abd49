# SPDX-License-Identifier: GPL-2.0-or-later
"""Block-by-block comparison of an image made by `ocfs2ctl format` with one
made by mkfs.ocfs2 with the same parameters and the same identity (UUID,
generation, dx seeds and format time are read from the mkfs.ocfs2 image and
handed to ocfs2ctl).

What may differ is listed, with the reason, in KNOWN below; anything else
is a failure.  Timestamps written by mkfs.ocfs2's library phase (journals,
slot map, quota files, lost+found) may fall in the next second, so inode
times are masked, and with them the block checks (metaecc) of blocks whose
masked bytes differ; fsck.ocfs2 judges the checks separately.

Usage as a module: compare(ref_img, our_img) -> list of difference strings.
Standalone: parity.py OCFS2CTL WORKDIR  (runs the built-in configurations);
by hand, from the top of the tree (o2test, the tests' library, is found
through PYTHONPATH):

    PYTHONPATH=tests python3 tests/format/parity.py build/cli/ocfs2ctl /tmp/parity
"""

import os
import struct
import subprocess
import sys

from o2test.proc import SKIP, run_split, tool_env
from o2test.volume import make_image

# the tools' environment (without meson's MALLOC_PERTURB_: see proc.tool_env)
ENV = tool_env(TZ="UTC", LANG="C", LC_ALL="C")


def read_super(path):
    """(blocksize, superblock dinode bytes) by probing like the tools."""
    with open(path, "rb") as f:
        for bits in range(9, 13):
            bs = 1 << bits
            f.seek(2 * bs)
            b = f.read(bs)
            if b[:8] == b"OCFSV2\0\0" and struct.unpack_from("<I", b, 0xC0 + 0x38)[0] == bits:
                return bs, b
    raise RuntimeError("%s: no OCFS2 superblock" % path)


def identity(path):
    """uuid hex, generation, dx seeds, format time of an OCFS2 image."""
    bs, sb = read_super(path)
    uuid = sb[0xC0 + 0x90:0xC0 + 0xA0].hex()
    gen = struct.unpack_from("<I", sb, 0x08)[0]
    seeds = struct.unpack_from("<3I", sb, 0xC0 + 0xBC)
    ctime = struct.unpack_from("<Q", sb, 0x38)[0]
    return uuid, gen, seeds, ctime


def _mask(b, bs, ranges):
    b = bytearray(b)
    for start, end in ranges:
        b[start:end] = bytes(end - start)
    return bytes(b)


# Byte ranges that legitimately differ, by block kind.
INODE_TIMES = [(0x30, 0x50), (0x64, 0x70)]


def _kind(b, bs):
    if b[:8] == b"OCFSV2\0\0":
        return "super"
    if b[:8] == b"INODE01\0":
        return "inode"
    if b[:8] == b"GROUP01\0":
        return "group"
    if b[:8] == b"DXDIR01\0":
        return "dxroot"
    if b[:8] == b"DXLEAF1\0":
        return "dxleaf"
    if b[:8] == b"EXBLK01\0":
        return "extent"
    if b[bs - 64 + 0x10:bs - 64 + 0x17] == b"DIRTRL1":
        return "dirblock"
    magic = struct.unpack_from("<I", b, 0)[0]
    if magic in (0x0cf52470, 0x0cf52471):
        return "quota-global-header"
    if magic in (0x0cf524c0, 0x0cf524c1):
        return "quota-local-header"
    if b[:4] == b"\xc0\x3b\x39\x98":
        return "jbd2"
    return "data"


def _masks(kind, bs, ecc):
    m = []
    if kind in ("super", "inode"):
        m += INODE_TIMES
        if kind == "super":
            m.append((0xC0 + 0x10, 0xC0 + 0x18))   # s_lastcheck
        if ecc:
            m.append((0x80, 0x88))
    elif kind == "group" and ecc:
        m.append((0x30, 0x38))
    elif kind == "dxroot" and ecc:
        m.append((0x08, 0x10))
    elif kind == "dirblock" and ecc:
        m.append((bs - 8, bs))
    elif kind == "quota-global-header":
        # mkfs.ocfs2 leaves stale bytes of an earlier buffer after the
        # 32-byte header + info; we write zeros there.
        m.append((0x20, bs - 8))
        m.append((bs - 8, bs))
    elif kind.startswith("quota") or kind == "data":
        if ecc:
            m.append((bs - 8, bs))
    return m


# Differences by design, each (kind, description, predicate(ref, ours, bs) -> bool).
def _lf_isize(ref, ours, bs):
    # mkfs.ocfs2 (libocfs2 ocfs2_init_dir) sets a block-based lost+found's
    # i_size to the space before the trailer (blocksize - 64); we write the
    # block size, as the kernel does for every block-based directory.
    r = _mask(ref, bs, INODE_TIMES + [(0x80, 0x88), (0x20, 0x28)])
    o = _mask(ours, bs, INODE_TIMES + [(0x80, 0x88), (0x20, 0x28)])
    return r == o and struct.unpack_from("<Q", ref, 0x20)[0] == bs - 64 and \
        struct.unpack_from("<Q", ours, 0x20)[0] == bs


def _trailer_free(ref, ours, bs):
    # libocfs2 does not update a trailer's largest-free-hole after linking
    # lost+found into an indexed root; we write the true value.
    off = bs - 64 + 0x0E
    r = _mask(ref, bs, [(off, off + 2), (bs - 8, bs)])
    o = _mask(ours, bs, [(off, off + 2), (bs - 8, bs)])
    return r == o


def _dx_order(ref, ours, bs):
    # The inline dx root of an indexed root directory lists the same entries;
    # libocfs2 appends "lost+found" between "." and ".." (both hash to 0/0).
    n = struct.unpack_from("<H", ref, 0xC0 + 6)[0]
    if n != struct.unpack_from("<H", ours, 0xC0 + 6)[0]:
        return False
    er = sorted(ref[0xC8 + 16 * i:0xC8 + 16 * i + 16] for i in range(n))
    eo = sorted(ours[0xC8 + 16 * i:0xC8 + 16 * i + 16] for i in range(n))
    head = _mask(ref, bs, [(0xC8, 0xC8 + 16 * n), (0x08, 0x10)])
    head_o = _mask(ours, bs, [(0xC8, 0xC8 + 16 * n), (0x08, 0x10)])
    return er == eo and head == head_o


def _entries(b, limit):
    out, off = [], 0
    while off + 12 <= limit:
        ino, rec, nlen, ftype = struct.unpack_from("<QHBB", b, off)
        if rec < 12:
            return None
        out.append((off, ino, rec, nlen, ftype, bytes(b[off + 12:off + 12 + nlen])))
        off += rec
    return out


def _dirent_padding(ref, ours, bs):
    # libocfs2 builds lost+found's first block in an uninitialised buffer:
    # the bytes after the names of "." and ".." are stale memory.  Same
    # entries (inode, rec_len, name, type) and same trailer is equivalence.
    trailer = ref[bs - 64 + 0x10:bs - 64 + 0x17] == b"DIRTRL1"
    limit = bs - 64 if trailer else bs
    er, eo = _entries(ref, limit), _entries(ours, limit)
    if er is None or er != eo:
        return False
    return not trailer or ref[bs - 64:bs - 8] == ours[bs - 64:bs - 8]


def _cluster_name_tail(ref, ours, bs):
    # mkfs.ocfs2 copies 16 bytes from the cluster name string, so the bytes
    # after its NUL are whatever followed it in memory; we write zeros.
    start, end = 0xC0 + 0xA8, 0xC0 + 0xB8
    name = ref[start:end].split(b"\0")[0]
    keep = start + len(name) + 1
    m = INODE_TIMES + [(0x80, 0x88), (0xC0 + 0x10, 0xC0 + 0x18), (keep, end)]
    return _mask(ref, bs, m) == _mask(ours, bs, m) and ours[keep:end] == bytes(end - keep)


def _quota_usage(ref, ours, bs):
    # The global quota leaf for id 0: mkfs.ocfs2 counts only the root
    # directory (it makes lost+found after the quota files); we count both.
    if struct.unpack_from("<H", ref, 8)[0] != 1:
        return False
    m = [(16 + 0x18, 16 + 0x20), (16 + 0x30, 16 + 0x38), (bs - 8, bs)]
    return (_mask(ref, bs, m) == _mask(ours, bs, m) and
            struct.unpack_from("<Q", ref, 16 + 0x18)[0] == 1 and
            struct.unpack_from("<Q", ours, 16 + 0x18)[0] == 2)


KNOWN = [
    ("data", "quota usage of id 0 includes lost+found", _quota_usage),
    ("inode", "lost+found i_size: mkfs.ocfs2 writes blocksize-64", _lf_isize),
    ("data", "stale bytes in the padding of lost+found's entries", _dirent_padding),
    ("dirblock", "stale bytes in the padding of lost+found's entries", _dirent_padding),
    ("super", "stale bytes after the cluster name", _cluster_name_tail),
    ("dirblock", "trailer free-space hint after the lost+found link", _trailer_free),
    ("dxroot", "order of entries in an inline dx root", _dx_order),
]


def _hole(f, off, length):
    """Whether [off, off+length) of f is a hole (reads as zeros, no data)."""
    try:
        return os.lseek(f.fileno(), off, os.SEEK_DATA) >= off + length
    except OSError:  # ENXIO: no data after off
        return True


def compare(ref_img, our_img, max_report=20):
    """Differences between two images, as strings (empty: equivalent)."""
    bs, sb = read_super(ref_img)
    ecc = bool(struct.unpack_from("<I", sb, 0xC0 + 0x20)[0] & 0x800)
    diffs = []
    known = {}
    with open(ref_img, "rb") as fr, open(our_img, "rb") as fo:
        size_r = os.fstat(fr.fileno()).st_size
        size_o = os.fstat(fo.fileno()).st_size
        if size_r != size_o:
            return ["image sizes differ: %d vs %d" % (size_r, size_o)]
        chunk = 1 << 20
        off = 0
        while off < size_r:
            if _hole(fr, off, chunk) and _hole(fo, off, chunk):
                off += chunk
                continue
            fr.seek(off)
            fo.seek(off)
            a = fr.read(chunk)
            b = fo.read(chunk)
            if a != b:
                for i in range(0, len(a), bs):
                    ra, ob = a[i:i + bs], b[i:i + bs]
                    if ra == ob:
                        continue
                    blk = (off + i) // bs
                    kind = _kind(ra, bs)
                    kind_o = _kind(ob, bs)
                    if kind != kind_o:
                        diffs.append("block %d: %s in mkfs.ocfs2's image, %s in ours"
                                     % (blk, kind, kind_o))
                        continue
                    m = _masks(kind, bs, ecc)
                    if _mask(ra, bs, m) == _mask(ob, bs, m):
                        continue
                    why = None
                    for k, desc, pred in KNOWN:
                        if k == kind and pred(ra, ob, bs):
                            why = desc
                            break
                    if why:
                        known[why] = known.get(why, 0) + 1
                        continue
                    ma, mb = _mask(ra, bs, m), _mask(ob, bs, m)
                    first = next(j for j in range(bs) if ma[j] != mb[j])
                    last = max(j for j in range(bs) if ma[j] != mb[j])
                    diffs.append("block %d (%s): bytes 0x%x..0x%x differ: mkfs.ocfs2 %s, "
                                 "ours %s" % (blk, kind, first, last,
                                              ra[first:min(last + 1, first + 16)].hex(),
                                              ob[first:min(last + 1, first + 16)].hex()))
                    if len(diffs) >= max_report:
                        return diffs
            off += len(a)
    return diffs


def _rw(f, blk, bs, data=None):
    f.seek(blk * bs)
    if data is None:
        return bytearray(f.read(bs))
    f.write(bytes(data))
    return None


def _sysfile(f, bs, sysdir, name):
    """Block number of a system file, by a scan of the system directory's blocks."""
    di = _rw(f, sysdir, bs)
    if struct.unpack_from("<H", di, 0x76)[0] & 1:
        spans = [(sysdir, 0xC8, bs)]
    else:
        spans = []
        cbits = struct.unpack_from("<I", read_super_f(f)[1], 0xC0 + 0x3C)[0]
        for i in range(struct.unpack_from("<H", di, 0xC4)[0]):
            cpos, clen, start = struct.unpack_from("<IHxxQ", di, 0xD0 + 16 * i)
            for b in range(clen << (cbits - (bs.bit_length() - 1))):
                spans.append((start + b, 0, bs))
    for blk, off, end in spans:
        b = _rw(f, blk, bs)
        while off + 12 <= end:
            ino, rec, nlen = struct.unpack_from("<QHB", b, off)
            if rec < 12:
                break
            if ino and b[off + 12:off + 12 + nlen] == name.encode():
                return ino
            off += rec
    raise RuntimeError("no system file " + name)


def read_super_f(f):
    for bits in range(9, 13):
        bs = 1 << bits
        f.seek(2 * bs)
        b = f.read(bs)
        if b[:8] == b"OCFSV2\0\0":
            return bs, b
    raise RuntimeError("no superblock")


def _free_bit(f, bs, alloc_ino, gd_blkno, bit):
    """Clear bit in the group at gd_blkno of the chain allocator alloc_ino."""
    gd = _rw(f, gd_blkno, bs)
    byte, mask = 0x40 + bit // 8, 1 << (bit % 8)
    assert gd[byte] & mask, "bit %d of group %d is not set" % (bit, gd_blkno)
    gd[byte] &= ~mask
    struct.pack_into("<H", gd, 0x0C, struct.unpack_from("<H", gd, 0x0C)[0] + 1)
    _rw(f, gd_blkno, bs, gd)
    chain = struct.unpack_from("<H", gd, 0x0E)[0]
    di = _rw(f, alloc_ino, bs)
    struct.pack_into("<I", di, 0xB8, struct.unpack_from("<I", di, 0xB8)[0] - 1)
    off = 0xD0 + 16 * chain
    struct.pack_into("<I", di, off, struct.unpack_from("<I", di, off)[0] + 1)
    _rw(f, alloc_ino, bs, di)


def _alloc_total(path, name):
    with open(path, "rb") as f:
        bs, sb = read_super_f(f)
        ino = _sysfile(f, bs, struct.unpack_from("<Q", sb, 0xC0 + 0x30)[0], name)
        return struct.unpack_from("<I", _rw(f, ino, bs), 0xBC)[0]


def unindex_sysdir(path, ref):
    """Undo our index of the system directory in the image at path.  ref is
    mkfs.ocfs2's image: if its extent_alloc:0000 is empty, the group ours
    got for the index root goes too."""
    ref_empty = _alloc_total(ref, "extent_alloc:0000") == 0
    with open(path, "r+b") as f:
        bs, sb = read_super_f(f)
        bits = bs.bit_length() - 1
        cbits = struct.unpack_from("<I", sb, 0xC0 + 0x3C)[0]
        fcg = struct.unpack_from("<Q", sb, 0xC0 + 0x48)[0]
        sysdir = struct.unpack_from("<Q", sb, 0xC0 + 0x30)[0]
        di = _rw(f, sysdir, bs)
        dyn = struct.unpack_from("<H", di, 0x76)[0]
        if not dyn & 0x8:
            return False
        dxr = struct.unpack_from("<Q", di, 0x88)[0]
        struct.pack_into("<H", di, 0x76, dyn & ~0x8)
        struct.pack_into("<Q", di, 0x88, 0)
        _rw(f, sysdir, bs, di)
        # the trailers' free-space list
        for i in range(struct.unpack_from("<H", di, 0xC4)[0]):
            cpos, clen, start = struct.unpack_from("<IHxxQ", di, 0xD0 + 16 * i)
            for b in range(clen << (cbits - bits)):
                blk = _rw(f, start + b, bs)
                if blk[bs - 64 + 0x10:bs - 64 + 0x17] == b"DIRTRL1":
                    struct.pack_into("<H", blk, bs - 64 + 0x0E, 0)
                    struct.pack_into("<Q", blk, bs - 64 + 0x20, 0)
                    _rw(f, start + b, bs, blk)
        root = _rw(f, dxr, bs)
        gbm = _sysfile(f, bs, sysdir, "global_bitmap")
        cpg = 8 * (bs - 64)
        if not root[0x2C] & 1:
            for i in range(struct.unpack_from("<H", root, 0xC4)[0]):
                cpos, clen, start = struct.unpack_from("<IHxxQ", root, 0xD0 + 16 * i)
                for c in range(clen):
                    cl = (start >> (cbits - bits)) + c
                    g = cl // cpg
                    gd = fcg if g == 0 else (g * cpg) << (cbits - bits)
                    _free_bit(f, bs, gbm, gd, cl % cpg)
                    f.seek(cl << cbits)
                    f.write(bytes(1 << cbits))
        loc = struct.unpack_from("<Q", root, 0x48)[0]
        ea = _sysfile(f, bs, sysdir, "extent_alloc:0000")
        _free_bit(f, bs, ea, loc, dxr - loc)
        _rw(f, dxr, bs, bytes(bs))
        # a group made only for the index (mkfs.ocfs2 made the allocator empty)
        di = _rw(f, ea, bs)
        gd = _rw(f, loc, bs)
        used, total = struct.unpack_from("<II", di, 0xB8)
        bg_bits = struct.unpack_from("<H", gd, 0x0A)[0]
        if ref_empty and used == 1 and total == bg_bits:
            bpc = struct.unpack_from("<H", di, 0xC2)[0]
            first = loc >> (cbits - bits)
            for cl in range(first, first + bg_bits // bpc):
                g = cl // cpg
                gdb = fcg if g == 0 else (g * cpg) << (cbits - bits)
                _free_bit(f, bs, gbm, gdb, cl % cpg)
            _rw(f, loc, bs, bytes(bs))
            di = _rw(f, ea, bs)
            struct.pack_into("<I", di, 0x14, 0)           # i_clusters
            struct.pack_into("<Q", di, 0x20, 0)           # i_size
            struct.pack_into("<II", di, 0xB8, 0, 0)       # used, total
            struct.pack_into("<H", di, 0xC6, 0)           # cl_next_free_rec
            struct.pack_into("<IIQ", di, 0xD0, 0, 0, 0)   # chain record 0
            _rw(f, ea, bs, di)
    return True


def unindexed_sysdir(img):
    """Whether img has indexed-dirs and a block-based system directory
    without an index: what fsck.ocfs2 reports as DX_TREE_MISSING."""
    with open(img, "rb") as f:
        bs, sb = read_super_f(f)
        if not struct.unpack_from("<I", sb, 0xC0 + 0x20)[0] & 0x400:
            return False
        di = _rw(f, struct.unpack_from("<Q", sb, 0xC0 + 0x30)[0], bs)
        return not struct.unpack_from("<H", di, 0x76)[0] & (0x1 | 0x8)


def mkfs_pair(ocfs2ctl, workdir, name, size, args, mkfs_extra=None, ours_extra=None):
    """Format two fresh images; returns (ref, ours) paths or raises."""
    ref = os.path.join(workdir, name + ".ref.img")
    ours = os.path.join(workdir, name + ".ours.img")
    for p in (ref, ours):
        make_image(p, size)
    rc, out, err = run_split(["mkfs.ocfs2", "-q"] + args + (mkfs_extra or []) + [ref], env=ENV)
    if rc != 0:
        raise RuntimeError("mkfs.ocfs2 %s: %s" % (" ".join(args), out + err))
    uuid, gen, seeds, t = identity(ref)
    cmd = [ocfs2ctl, "format", "-q", "-U", uuid, "--generation", str(gen),
           "--dx-seed", ",".join(str(s) for s in seeds), "--time", str(t)]
    cmd += args + (ours_extra or []) + [ours]
    rc, out, err = run_split(cmd, env=ENV)
    if rc != 0:
        raise RuntimeError("ocfs2ctl format %s: %s" % (" ".join(args), out + err))
    return ref, ours


CONFIGS = [
    ("b4096-c4k-default", 256 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M"]),
    ("b4096-c4k-maxfeat", 256 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                      "--fs-feature-level=max-features"]),
    ("b4096-c4k-maxcompat", 256 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                        "--fs-feature-level=max-compat"]),
    ("b512-c4k-maxfeat", 128 << 20, ["-b", "512", "-C", "4096", "-J", "size=4M",
                                     "--fs-feature-level=max-features"]),
    ("b512-c4k-maxcompat", 128 << 20, ["-b", "512", "-C", "4096", "-J", "size=4M",
                                       "--fs-feature-level=max-compat"]),
    ("b1024-c64k-default", 256 << 20, ["-b", "1024", "-C", "65536", "-J", "size=4M"]),
    ("b2048-c1m-maxfeat", 512 << 20, ["-b", "2048", "-C", "1M", "-J", "size=16M",
                                      "--fs-feature-level=max-features"]),
    ("b4096-c4k-noinline", 256 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                       "--fs-features=noinline-data"]),
    ("b4096-c4k-noinline-ecc", 256 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                           "--fs-features=noinline-data,metaecc"]),
    ("b4096-pcmk-12slots", 512 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                       "-N", "12", "-L", "lbl",
                                       "--cluster-stack=pcmk", "--cluster-name=x"]),
    ("b1024-local", 256 << 20, ["-b", "1024", "-C", "4096", "-J", "size=4M", "-M", "local"]),
    ("b4096-backup", 1200 << 20, ["-b", "4096", "-C", "4096", "-J", "size=4M", "-N", "2"]),
    ("b4096-bigjournal", 512 << 20, ["-b", "4096", "-C", "4096", "-J", "size=120M", "-N", "2"]),
    ("defaults-300m", 300 << 20, []),
    ("b512-c1m-maxfeat", 256 << 20, ["-b", "512", "-C", "1M", "-J", "size=16M",
                                     "--fs-feature-level=max-features"]),
    ("b512-c1m-noinline", 256 << 20, ["-b", "512", "-C", "1M", "-J", "size=16M",
                                      "--fs-features=noinline-data"]),
    ("b2048-c64k-40slots", 600 << 20, ["-b", "2048", "-C", "65536", "-J", "size=4M",
                                       "-N", "40", "--fs-feature-level=max-features"]),
    ("b4096-c4k-255slots", 3 << 30, ["-b", "4096", "-C", "4096", "-J", "size=4M",
                                     "-N", "255"]),
    ("b1024-c4k-quota-only", 256 << 20, ["-b", "1024", "-C", "4096", "-J", "size=4M",
                                         "--fs-feature-level=max-compat",
                                         "--fs-features=usrquota"]),
    ("b4096-vmstore", 3 << 30, ["-T", "vmstore", "-J", "size=8M", "-N", "2"]),
    ("b4096-mail", 1 << 30, ["-T", "mail", "-N", "2"]),
    ("tiny-8m", 8 << 20, ["-N", "1", "-M", "local"]),
    ("o2cb-clusterinfo", 256 << 20, ["-b", "4096", "-J", "size=4M",
                                     "--cluster-stack=o2cb", "--cluster-name=abc"]),
]


def main(argv):
    if len(argv) != 3:
        print("usage: parity.py OCFS2CTL WORKDIR", file=sys.stderr)
        return 2
    ocfs2ctl, workdir = argv[1], argv[2]
    if subprocess.run(["sh", "-c", "command -v mkfs.ocfs2"], stdout=subprocess.DEVNULL).returncode:
        print("SKIP: mkfs.ocfs2 is not installed")
        return SKIP
    os.makedirs(workdir, exist_ok=True)
    failed = 0
    for name, size, args in CONFIGS:
        ref, ours = mkfs_pair(ocfs2ctl, workdir, name, size, args)
        note = ""
        if unindexed_sysdir(ref):
            # mkfs.ocfs2 left the block-based system directory unindexed
            # (fsck.ocfs2: DX_TREE_MISSING); we index it.  Compare the rest.
            if not unindex_sysdir(ours, ref):
                print("FAIL %s: mkfs.ocfs2's system directory lacks an index and so "
                      "does ours" % name)
                failed += 1
                continue
            note = " (after removing our index of the system directory)"
        diffs = compare(ref, ours)
        if diffs:
            failed += 1
            print("FAIL %s: %d differences" % (name, len(diffs)))
            for d in diffs:
                print("   ", d)
        else:
            print("ok   %s%s" % (name, note))
            os.unlink(ref)
            os.unlink(ours)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
