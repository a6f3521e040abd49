# SPDX-License-Identifier: GPL-2.0-or-later
"""fsx: one file under random operations, checked against a model after each.

In the spirit of the classic file system exerciser: a seeded random mix of
pread/pwrite, shared-mmap reads and writes, truncates up and down,
fallocate (default, KEEP_SIZE and punching holes), copy_file_range (from another file and
within the file), O_DIRECT reads and writes, SEEK_DATA/SEEK_HOLE, fsync,
page-cache drops, closing and reopening, and recreating the file (so that
inline data and its conversion to extents come back again and again).
After every operation the size must match the model, and each read must
return the model's bytes.  Each volume geometry (block and cluster sizes)
runs for its share of FUSE_FSX_SECONDS; then the file is compared once
more, the volume unmounted, judged by fsck.ocfs2 -fn, dumped with
debugfs.ocfs2 rdump and remounted, and both must hold the model's bytes.

A failure prints the seed (FUSE_FSX_SEED reruns it) and the last
operations.
"""

import collections
import errno
import mmap
import os
import random
import time

from o2test.check import Failure
from o2test.proc import log
from o2test.syscalls import FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, SEEK_DATA, SEEK_HOLE, fallocate

PAGE = mmap.PAGESIZE

# (block size, cluster size, the file's largest size): 4K/4K is the common
# volume, 1K blocks under 32K clusters puts several blocks in a page and
# clusters across pages, 4K/1M makes every allocation a partial cluster,
# and 512-byte blocks hold so few extent records (19 in the inode, 28 in an
# extent block) that a fragmented file's tree grows two or three levels.
GEOMETRIES = [(4096, 4096, 1 << 20), (1024, 32768, 768 << 10), (4096, 1 << 20, 3 << 20),
              (512, 4096, 1 << 20)]


class FsxFailure(Failure):
    pass


class Fsx:
    def __init__(self, path, src_path, rnd, maxlen, align):
        self.path, self.rnd, self.maxlen, self.align = path, rnd, maxlen, align
        self.model = bytearray()
        self.history = collections.deque(maxlen=40)
        self.counts = collections.Counter()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.src = bytes(rnd.randbytes(maxlen))
        with open(src_path, "wb") as f:
            f.write(self.src)
        self.src_fd = os.open(src_path, os.O_RDONLY)
        self.dbuf = mmap.mmap(-1, 1 << 20)  # page-aligned for O_DIRECT

    def close(self):
        for fd in (self.fd, self.src_fd):
            if fd is not None:
                os.close(fd)
        self.fd = self.src_fd = None
        self.dbuf.close()

    # ---- helpers ----

    def fail(self, what):
        raise FsxFailure("%s (file size %d in the model)\nlast operations, oldest first:\n  %s" % (
            what, len(self.model), "\n  ".join(self.history)))

    def expect(self, got, off, what):
        want = bytes(self.model[off:off + len(got)])
        if got != want:
            i = next(i for i in range(min(len(got), len(want)) + 1)
                     if i >= len(got) or i >= len(want) or got[i] != want[i])
            self.fail("%s: bytes differ at file offset %d (read %d bytes at %d; got %r, want %r)" % (
                what, off + i, len(got), off, got[i:i + 8], want[i:i + 8]))

    def put(self, off, data):
        end = off + len(data)
        if end > len(self.model):
            self.model.extend(bytes(end - len(self.model)))
        self.model[off:end] = data

    def resize(self, size):
        if size < len(self.model):
            del self.model[size:]
        else:
            self.model.extend(bytes(size - len(self.model)))

    def range(self, limit=None, minlen=1):
        limit = limit or self.maxlen
        # mostly small, sometimes large; offsets near the end of the file
        # and at cluster/page boundaries often
        n = self.rnd.choice([self.rnd.randint(minlen, 64), self.rnd.randint(minlen, 4096),
                             self.rnd.randint(minlen, max(minlen, limit // 4))])
        n = min(n, limit)
        r = self.rnd.random()
        if r < 0.3 and self.model:
            off = max(0, len(self.model) - self.rnd.randint(0, min(len(self.model), 8192)))
        elif r < 0.5:
            off = self.rnd.randrange(0, limit, self.align) + self.rnd.choice([0, 0, -1, 1, -512, 512])
        else:
            off = self.rnd.randrange(0, limit)
        off = max(0, min(off, limit - n))
        return off, n

    # ---- operations ----

    def op_read(self):
        off, n = self.range()
        got = os.pread(self.fd, n, off)
        self.history.append("read %d+%d -> %d" % (off, n, len(got)))
        want = max(0, min(n, len(self.model) - off))
        if len(got) != want:
            self.fail("pread %d+%d returned %d bytes, want %d" % (off, n, len(got), want))
        self.expect(got, off, "pread")

    def op_write(self):
        off, n = self.range()
        data = self.rnd.randbytes(n)
        self.history.append("write %d+%d" % (off, n))
        done = os.pwrite(self.fd, data, off)
        if done != n:
            self.fail("pwrite %d+%d wrote %d" % (off, n, done))
        self.put(off, data)

    def op_mapread(self):
        if not self.model:
            return self.op_write()
        off, n = self.range(len(self.model))
        start = off - off % PAGE
        self.history.append("mapread %d+%d" % (off, n))
        with mmap.mmap(self.fd, off + n - start, mmap.MAP_SHARED, mmap.PROT_READ, offset=start) as m:
            got = m[off - start:]
        self.expect(got, off, "mmap read")

    def op_mapwrite(self):
        off, n = self.range()
        if off + n > len(self.model):
            self.history.append("mapwrite: ftruncate %d" % (off + n))
            os.ftruncate(self.fd, off + n)
            self.resize(off + n)
        data = self.rnd.randbytes(n)
        start = off - off % PAGE
        sync = self.rnd.random() < 0.5
        self.history.append("mapwrite %d+%d%s" % (off, n, " msync" if sync else ""))
        with mmap.mmap(self.fd, off + n - start, mmap.MAP_SHARED, offset=start) as m:
            m[off - start:] = data
            if sync:
                m.flush()
        self.put(off, data)

    def op_truncate(self):
        size = self.rnd.choice([0, self.rnd.randrange(0, self.maxlen), len(self.model) // 2,
                                len(self.model) + self.rnd.randint(1, 3 * self.align)])
        size = min(size, self.maxlen)
        self.history.append("truncate %d -> %d" % (len(self.model), size))
        os.ftruncate(self.fd, size)
        self.resize(size)

    def op_fallocate(self):
        off, n = self.range()
        keep = self.rnd.random() < 0.5
        self.history.append("fallocate%s %d+%d" % (" keep_size" if keep else "", off, n))
        try:
            fallocate(self.fd, FALLOC_FL_KEEP_SIZE if keep else 0, off, n)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                self.history.append("  (ENOSPC)")
                return
            raise
        if not keep and off + n > len(self.model):
            self.resize(off + n)

    def op_punch(self):
        off, n = self.range()
        self.history.append("punch hole %d+%d" % (off, n))
        fallocate(self.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n)
        end = min(off + n, len(self.model))
        if off < end:
            self.model[off:end] = bytes(end - off)

    def op_copy(self):
        off, n = self.range()
        inside = self.rnd.random() < 0.4 and len(self.model) > 1
        if inside:
            # within the file: source and destination must not overlap
            soff = self.rnd.randrange(0, len(self.model))
            n = min(n, len(self.model) - soff)
            if off < soff + n and soff < off + n:
                off = soff + n if soff + 2 * n <= self.maxlen else max(0, soff - n)
                if off < soff + n and soff < off + n:
                    return
            src_fd, data = self.fd, bytes(self.model[soff:soff + n])
        else:
            soff = self.rnd.randrange(0, len(self.src))
            src_fd, data = self.src_fd, self.src[soff:soff + n]
        self.history.append("copy_file_range %s %d -> %d+%d" % ("self" if inside else "src", soff, off, n))
        done = 0
        while done < len(data):
            k = os.copy_file_range(src_fd, self.fd, len(data) - done, soff + done, off + done)
            if k <= 0:
                self.fail("copy_file_range returned %d after %d of %d bytes" % (k, done, len(data)))
            done += k
        self.put(off, data)

    def op_direct(self):
        a = max(self.align, PAGE)
        off = self.rnd.randrange(0, self.maxlen // a) * a
        n = min(self.rnd.randint(1, 16) * a, self.maxlen - off, len(self.dbuf))
        if n <= 0:
            return
        write = self.rnd.random() < 0.5
        self.history.append("direct %s %d+%d" % ("write" if write else "read", off, n))
        fd = os.open(self.path, os.O_RDWR | os.O_DIRECT)
        try:
            view = memoryview(self.dbuf)[:n]
            if write:
                data = self.rnd.randbytes(n)
                self.dbuf[:n] = data
                done = os.pwrite(fd, view, off)
                if done != n:
                    self.fail("O_DIRECT pwrite %d+%d wrote %d" % (off, n, done))
                self.put(off, data)
            else:
                got = os.preadv(fd, [view], off)
                want = max(0, min(n, len(self.model) - off))
                if got != want:
                    self.fail("O_DIRECT pread %d+%d returned %d, want %d" % (off, n, got, want))
                self.expect(bytes(self.dbuf[:got]), off, "O_DIRECT read")
        finally:
            os.close(fd)

    def op_seek(self):
        size = len(self.model)
        off = self.rnd.randrange(0, size + 2)
        self.history.append("seek data/hole at %d" % off)
        for whence, name in ((SEEK_DATA, "SEEK_DATA"), (SEEK_HOLE, "SEEK_HOLE")):
            try:
                pos = os.lseek(self.fd, off, whence)
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                # SEEK_DATA in a hole that runs to the end of the file is ENXIO
                if off < size and (whence == SEEK_HOLE or any(self.model[off:])):
                    self.fail("%s at %d inside a %d-byte file: ENXIO" % (name, off, size))
                continue
            if off >= size or pos < off or pos > size:
                self.fail("%s at %d of a %d-byte file: %d" % (name, off, size, pos))
            # what SEEK_DATA skips, and what SEEK_HOLE reports, is a hole
            if whence == SEEK_DATA and any(self.model[off:pos]):
                self.fail("SEEK_DATA at %d skips data: %d" % (off, pos))
            if whence == SEEK_HOLE and pos < size:
                try:
                    end = os.lseek(self.fd, pos, SEEK_DATA)
                except OSError as e:
                    if e.errno != errno.ENXIO:
                        raise
                    end = size
                if any(self.model[pos:end]):
                    self.fail("SEEK_HOLE at %d: the hole %d..%d holds data" % (off, pos, end))

    def op_fsync(self):
        self.history.append("fsync")
        os.fsync(self.fd)

    def op_dropcache(self):
        self.history.append("drop page cache")
        os.fsync(self.fd)
        os.posix_fadvise(self.fd, 0, 0, os.POSIX_FADV_DONTNEED)

    def op_reopen(self):
        self.history.append("close, reopen")
        os.close(self.fd)
        self.fd = None
        self.fd = os.open(self.path, os.O_RDWR)

    def op_recreate(self):
        self.history.append("unlink, create")
        os.close(self.fd)
        self.fd = None
        os.unlink(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        self.model = bytearray()

    OPS = [("read", 12), ("write", 12), ("mapread", 5), ("mapwrite", 5), ("truncate", 4),
           ("fallocate", 4), ("punch", 4), ("copy", 4), ("direct", 3), ("seek", 3), ("fsync", 1),
           ("dropcache", 2), ("reopen", 1), ("recreate", 1)]

    def step(self):
        name = self.rnd.choices([o for o, _ in self.OPS], [w for _, w in self.OPS])[0]
        getattr(self, "op_" + name)()
        self.counts[name] += 1
        st = os.fstat(self.fd)
        if st.st_size != len(self.model):
            self.fail("after %s: st_size %d, the model's size %d" % (name, st.st_size, len(self.model)))

    def verify_all(self, path, what):
        with open(path, "rb") as f:
            got = f.read()
        if len(got) != len(self.model):
            self.fail("%s: %d bytes, the model has %d" % (what, len(got), len(self.model)))
        self.expect(got, 0, what)


def case_fsx(env, chk):
    seconds = float(os.environ.get("FUSE_FSX_SECONDS", "60"))
    seed = int(os.environ.get("FUSE_FSX_SEED", "0")) or random.randrange(1, 1 << 31)
    log("fsx: seed %d (FUSE_FSX_SEED=%d reruns it), %.0f s" % (seed, seed, seconds))
    for bs, cs, maxlen in GEOMETRIES:
        rnd = random.Random("%d-%d-%d" % (seed, bs, cs))
        vol = env.volume("fsx-b%d-c%dk" % (bs, cs >> 10), size="256M", mkfs="mkfs",
                         mkfs_args=["-b", str(bs), "-C", str(cs), "-J", "size=%dM" % max(8, 16 * cs >> 20)])
        vol.mount()
        path = os.path.join(vol.mnt, "f")
        fsx = Fsx(path, os.path.join(vol.mnt, "src"), rnd, maxlen, min(cs, 65536))
        deadline = time.time() + seconds / len(GEOMETRIES)
        steps = 0
        try:
            while time.time() < deadline:
                fsx.step()
                steps += 1
            if len(fsx.model) < maxlen // 4:  # something for the checks after the unmount
                fsx.op_write()
            # fsck.ocfs2 1.8.7 takes clusters that KEEP_SIZE allocated past
            # the last one i_size reaches for a wrong size (INODE_SPARSE_SIZE),
            # although the kernel makes them too: end with a size that
            # covers every allocation (none goes past maxlen)
            fsx.history.append("truncate %d -> %d (the end)" % (len(fsx.model), maxlen))
            os.ftruncate(fsx.fd, maxlen)
            fsx.resize(maxlen)
            fsx.verify_all(path, "the whole file at the end")
        except FsxFailure as e:
            chk.ok(False, "fsx seed %d, %s, step %d: %s" % (seed, vol.name, steps, e))
            fsx.close()
            env.show_logs = True
            return
        fsx.close()
        log("fsx %s: %d operations (%s), final size %d" % (
            vol.name, steps, ", ".join("%s %d" % kv for kv in sorted(fsx.counts.items())), len(fsx.model)))
        chk.ok(steps > 50, "%s: fsx ran only %d operations" % (vol.name, steps))
        vol.umount()
        vol.fsck(chk, "after fsx")
        if env.debugfs:
            out = os.path.join(env.tmp, "rdump-" + vol.name)
            os.mkdir(out)
            rc, text, got = vol.rdump("/f", out)
            chk.ok(rc == 0, "debugfs rdump /f: exit %d: %s" % (rc, text))
            if rc == 0:
                try:
                    fsx.verify_all(got, "debugfs.ocfs2 rdump of the file")
                except FsxFailure as e:
                    chk.ok(False, "fsx seed %d, %s: %s" % (seed, vol.name, e))
        vol.mount()
        try:
            fsx.verify_all(path, "the file after a remount")
        except FsxFailure as e:
            chk.ok(False, "fsx seed %d, %s: %s" % (seed, vol.name, e))
        vol.umount()
        vol.fsck(chk, "after the remount")
