/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block-device interface: the only way fscore reaches storage.
 *
 * A device is a byte-addressed store read and written in whole sectors
 * (sector_size, 512 for every implementation here).  Implementations: a file
 * or block device, memory, and (for tests) the wrappers in later modules.
 * All calls return 0 or -errno.
 */
#ifndef O2FS_BLOCKDEV_H
#define O2FS_BLOCKDEV_H

#include <stddef.h>
#include <stdint.h>

struct o2_blockdev;

struct o2_blockdev_ops {
	int (*read)(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off);
	int (*write)(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct o2_blockdev *dev);
	void (*destroy)(struct o2_blockdev *dev);
	/*
	 * Optional: a read of file data, which the caller reads under the
	 * lock that covers it (never a read of metadata, which a cluster
	 * mount may read without one): a cache may answer it from what it
	 * kept of earlier writes and reads.  owner: the inode whose lock
	 * covers the data; a read that names none (0) trusts no cache.
	 * NULL: read.
	 */
	int (*read_data)(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off,
			 uint64_t owner);
	/* Optional: a write of owner's file data (as read_data).  NULL: write. */
	int (*write_data)(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off,
			  uint64_t owner);
};

struct o2_blockdev {
	const struct o2_blockdev_ops *ops;
	uint64_t size; /* bytes */
	unsigned sector_size;
	int read_only;
	/*
	 * Flushes that reached ops->flush (o2_blockdev_flush counts them;
	 * implementations leave it alone): what a volume's syncs cost the
	 * device.  Counted atomically: a caller may flush without the lock
	 * it holds around every other call (read it with o2_blockdev_flushes).
	 */
	uint64_t flushes;
	/*
	 * Writes completed so far (o2_blockdev_write counts them, under the
	 * caller's lock).  A flush that starts when this is N makes writes
	 * 1..N durable: how a volume knows which flushes cover what.
	 */
	uint64_t writes;
};

#define O2_DEV_RDONLY 0x1 /* open for reading only */
#define O2_DEV_DIRECT 0x2 /* O_DIRECT: bypass the page cache (shared disks) */
/*
 * Exclusive use on this machine: an advisory lock (flock) held while the
 * device is open, so that a mounted volume is not also changed by an offline
 * tool.  -EBUSY if another process holds it.
 */
#define O2_DEV_EXCLUSIVE 0x4

/*
 * Read or write len bytes at byte offset off.  off and len must be multiples
 * of the sector size (-EINVAL otherwise); a range past the end of the device
 * gives -ENXIO; a write to a read-only device gives -EROFS.
 */
int o2_blockdev_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off);
int o2_blockdev_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off);
/* o2_blockdev_read and _write for file data of inode owner (ops->read_data, write_data). */
int o2_blockdev_read_data(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off,
			  uint64_t owner);
int o2_blockdev_write_data(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off,
			   uint64_t owner);
/*
 * Make every completed write durable.  Safe to call from another thread
 * while the device's other calls run (their owner's lock not held): the
 * implementations here flush with fdatasync(2) or not at all.
 */
int o2_blockdev_flush(struct o2_blockdev *dev);
/* dev->flushes, read atomically. */
uint64_t o2_blockdev_flushes(const struct o2_blockdev *dev);
void o2_blockdev_free(struct o2_blockdev *dev);

/*
 * Open an image file or a block device.  flags: O2_DEV_*.  The size of a
 * block device comes from BLKGETSIZE64, of a file from its length (rounded
 * down to whole sectors).  -ENOENT, -EACCES, ... from open(2); -EROFS for
 * a read-only block device opened without O2_DEV_RDONLY.
 */
int o2_blockdev_open_file(const char *path, unsigned flags, struct o2_blockdev **ret_dev);
/*
 * The descriptor under a device o2_blockdev_open_file opened (-1 for any
 * other): for a caller that submits several writes at once itself.  Its
 * writes must be whole 4 KiB at 4 KiB offsets from 4 KiB-aligned memory
 * when the device was opened O2_DEV_DIRECT (*direct says so).
 */
int o2_blockdev_file_fd(const struct o2_blockdev *dev, int *direct);

/*
 * A zero-filled memory device of size bytes (rounded down to whole
 * sectors), or one holding a copy of data[0..len) padded with zeros to
 * size.  -ENOMEM.
 */
int o2_blockdev_new_memory(uint64_t size, struct o2_blockdev **ret_dev);
int o2_blockdev_new_memory_from(const void *data, size_t len, uint64_t size,
				struct o2_blockdev **ret_dev);
/* The backing store of a memory device (NULL for any other kind). */
uint8_t *o2_blockdev_memory_data(struct o2_blockdev *dev);



/* ---- test devices (fscore/blockdev_crash.c, blockdev_fault.c) ---- */

/*
 * Crash recording.  The device wraps inner (borrowed; typically a memory
 * device), takes a snapshot of inner's contents when created, passes every
 * write and flush through to inner, and records them in order as "ops"
 * (op i is the i-th write or flush, 0-based).
 */
int o2_crashdev_new(struct o2_blockdev *inner, struct o2_blockdev **ret_dev);
/* Number of ops recorded so far. */
size_t o2_crashdev_nops(struct o2_blockdev *dev);
/* Whether op i is a flush (else a write). */
int o2_crashdev_op_is_flush(struct o2_blockdev *dev, size_t i);

/*
 * A new device holding what the disk could contain after a crash just
 * before op `point` (0..nops): the snapshot, then every write before the
 * last flush that precedes point, then each write between that flush and
 * point either applied, dropped, or - if it spans several sectors - torn
 * (a subset of its sectors applied), in order, as chosen by seed.  seed 0
 * applies every write before point (a crash that lost nothing unflushed).
 * The result is independent of later ops; it is cheap (copy-on-write over
 * the snapshot) and writable.  -ERANGE for point > nops, -ENOMEM.
 */
int o2_crashdev_materialise(struct o2_blockdev *dev, size_t point, uint64_t seed,
			    struct o2_blockdev **ret_dev);

/*
 * Fault injection.  Wraps inner (borrowed) and counts reads, writes and
 * flushes from 1.  The plan says which one fails with -EIO; with sticky,
 * every later write and flush fails too (a device that died).  A short
 * write stores only the first half (rounded down to sectors) of the
 * failing write before failing.
 */
struct o2_fault_plan {
	uint64_t fail_read;  /* Nth read fails; 0 = never */
	uint64_t fail_write; /* Nth write fails; 0 = never */
	uint64_t fail_flush; /* Nth flush fails; 0 = never */
	int sticky;
	int short_write;
};

struct o2_fault_counts {
	uint64_t reads, writes, flushes;
	uint64_t failed; /* calls failed so far */
};

int o2_faultdev_new(struct o2_blockdev *inner, struct o2_blockdev **ret_dev);
void o2_faultdev_set_plan(struct o2_blockdev *dev, const struct o2_fault_plan *plan);
void o2_faultdev_counts(struct o2_blockdev *dev, struct o2_fault_counts *ret);
#endif
