/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Opening a volume: probe the superblock, validate it, decide whether the
 * features it carries can be served; closing, syncing and the volume-wide
 * queries.  This is the top of fscore: it calls the journal, allocators
 * and orphan handling, and nothing below calls it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "blockcheck.h"
#include "cache.h"
#include "error.h"
#include "internal.h"
#include "journal.h"
#include "quota.h"
#include "namei.h"

/* What fscore implements.  Read-only access tolerates any ro-compat bit. */
#define O2_SUPPORTED_COMPAT (O2_FEATURE_COMPAT_BACKUP_SB | O2_FEATURE_COMPAT_JBD2_SB)
#define O2_SUPPORTED_INCOMPAT                                                                     \
	(O2_FEATURE_INCOMPAT_LOCAL_MOUNT | O2_FEATURE_INCOMPAT_SPARSE_ALLOC |                     \
	 O2_FEATURE_INCOMPAT_INLINE_DATA | O2_FEATURE_INCOMPAT_USERSPACE_STACK |                  \
	 O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP | O2_FEATURE_INCOMPAT_XATTR |                      \
	 O2_FEATURE_INCOMPAT_INDEXED_DIRS | O2_FEATURE_INCOMPAT_META_ECC |                        \
	 O2_FEATURE_INCOMPAT_REFCOUNT_TREE | O2_FEATURE_INCOMPAT_DISCONTIG_BG |                   \
	 O2_FEATURE_INCOMPAT_CLUSTERINFO | O2_FEATURE_INCOMPAT_APPEND_DIO)
/* ro-compat bits fscore can keep right while writing. */
#define O2_WRITABLE_RO_COMPAT (O2_FEATURE_RO_COMPAT_UNWRITTEN | O2_FEATURE_RO_COMPAT_USRQUOTA | \
			       O2_FEATURE_RO_COMPAT_GRPQUOTA)

struct feature_name {
	enum o2_feature_class cls;
	uint32_t bit;
	const char *name;
};

static const struct feature_name feature_names[] = {
	{ O2_COMPAT, O2_FEATURE_COMPAT_BACKUP_SB, "backup-super" },
	{ O2_COMPAT, O2_FEATURE_COMPAT_JBD2_SB, "strict-journal-super" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_HEARTBEAT_DEV, "heartbeat-device" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_RESIZE_INPROG, "resize-in-progress" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_LOCAL_MOUNT, "local" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_SPARSE_ALLOC, "sparse" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_TUNEFS_INPROG, "tunefs-in-progress" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_INLINE_DATA, "inline-data" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_USERSPACE_STACK, "userspace-stack" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP, "extended-slotmap" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_XATTR, "xattr" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_INDEXED_DIRS, "indexed-dirs" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_META_ECC, "metaecc" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_REFCOUNT_TREE, "refcount" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_DISCONTIG_BG, "discontig-bg" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_CLUSTERINFO, "clusterinfo" },
	{ O2_INCOMPAT, O2_FEATURE_INCOMPAT_APPEND_DIO, "append-dio" },
	{ O2_RO_COMPAT, O2_FEATURE_RO_COMPAT_UNWRITTEN, "unwritten" },
	{ O2_RO_COMPAT, O2_FEATURE_RO_COMPAT_USRQUOTA, "usrquota" },
	{ O2_RO_COMPAT, O2_FEATURE_RO_COMPAT_GRPQUOTA, "grpquota" },
};

const char *o2_feature_name(enum o2_feature_class cls, uint32_t bit)
{
	for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
		if (feature_names[i].cls == cls && feature_names[i].bit == bit)
			return feature_names[i].name;
	return NULL;
}

/* ---- probe and open ---- */

/*
 * Find the superblock: for each block size, block 2 must carry the
 * signature and a blocksize_bits that agrees with the size probed.
 *
 * A candidate that cannot be read ends the probe with that error (as the
 * kernel's probe does): passing over it could find, at a larger size, the
 * superblock a format with another block size left behind, and mount that
 * stale volume over the real one.
 */
static int probe(struct o2_blockdev *dev, uint8_t **ret_buf, uint32_t *ret_bits)
{
	uint8_t *buf = o2_malloc(1u << O2_MAX_BLOCK_BITS);

	if (!buf)
		return -ENOMEM;
	for (uint32_t bits = O2_MIN_BLOCK_BITS; bits <= O2_MAX_BLOCK_BITS; bits++) {
		uint32_t bs = 1u << bits;
		const struct o2_dinode *di = (const struct o2_dinode *)buf;
		int r = o2_blockdev_read(dev, buf, bs, (uint64_t)O2_SUPER_BLKNO * bs);

		if (r == -ENXIO || r == -EINVAL)
			continue; /* device too small, or its sectors larger than this size */
		if (r < 0) {
			free(buf);
			return r;
		}
		if (!o2_sig_ok(di->i_signature, O2_SIG_SUPER))
			continue;
		if (le32(di->id2.i_super.s_blocksize_bits) != bits)
			continue;
		*ret_buf = buf;
		*ret_bits = bits;
		return 0;
	}
	free(buf);
	return -ENODATA;
}

static void copy_str(char *dst, const uint8_t *src, size_t n)
{
	size_t i;

	for (i = 0; i < n && src[i]; i++)
		dst[i] = (char)src[i];
	dst[i] = '\0';
}

static int validate_super(struct o2_fs *fs, char *errbuf, size_t errlen)
{
	const struct o2_dinode *di = (const struct o2_dinode *)fs->sb_block;
	const struct o2_super_block *sb = &di->id2.i_super;
	struct o2_super_info *si = &fs->info;

	/* The feature word lives in the block it protects; trust it only after the check. */
	if (le32(sb->s_feature_incompat) & O2_FEATURE_INCOMPAT_META_ECC) {
		int r = o2_blockcheck_verify(fs->sb_block, fs->bs,
					     fs->sb_block + offsetof(struct o2_dinode, i_check));
		if (r < 0)
			return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
					  "superblock (block 2): metadata checksum mismatch");
	}
	if (le64(di->i_blkno) != O2_SUPER_BLKNO)
		return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
				  "superblock (block 2): records its own block number as %llu",
				  (unsigned long long)le64(di->i_blkno));
	si->cluster_bits = le32(sb->s_clustersize_bits);
	if (si->cluster_bits < O2_MIN_CLUSTER_BITS || si->cluster_bits > O2_MAX_CLUSTER_BITS)
		return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
				  "superblock (block 2): cluster size 2^%u is not in 4K..1M",
				  si->cluster_bits);
	si->max_slots = le16(sb->s_max_slots);
	if (si->max_slots == 0 || si->max_slots > O2_MAX_SLOTS)
		return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
				  "superblock (block 2): %u slots is not in 1..255", si->max_slots);
	si->root_blkno = le64(sb->s_root_blkno);
	si->system_dir_blkno = le64(sb->s_system_dir_blkno);
	si->first_cluster_group = le64(sb->s_first_cluster_group);
	if (si->root_blkno <= O2_SUPER_BLKNO || si->root_blkno >= fs->nblocks ||
	    si->system_dir_blkno <= O2_SUPER_BLKNO || si->system_dir_blkno >= fs->nblocks ||
	    si->first_cluster_group >= fs->nblocks)
		return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
				  "superblock (block 2): root %llu, system dir %llu or first "
				  "cluster group %llu lies outside the device (%llu blocks)",
				  (unsigned long long)si->root_blkno,
				  (unsigned long long)si->system_dir_blkno,
				  (unsigned long long)si->first_cluster_group,
				  (unsigned long long)fs->nblocks);
	if (!(le32(di->i_flags) & O2_FL_SUPER) || !(le32(di->i_flags) & O2_FL_VALID))
		return o2_errbuf_set(errbuf, errlen, -EUCLEAN,
				  "superblock (block 2): flags 0x%x lack Valid/Superblock",
				  le32(di->i_flags));
	return 0;
}

static void fill_info(struct o2_fs *fs)
{
	const struct o2_dinode *di = (const struct o2_dinode *)fs->sb_block;
	const struct o2_super_block *sb = &di->id2.i_super;
	struct o2_super_info *si = &fs->info;

	si->major_rev = le16(sb->s_major_rev_level);
	si->minor_rev = le16(sb->s_minor_rev_level);
	si->mnt_count = le16(sb->s_mnt_count);
	si->max_mnt_count = le16(sb->s_max_mnt_count);
	si->state = le16(sb->s_state);
	si->errors = le16(sb->s_errors);
	si->check_interval = le32(sb->s_checkinterval);
	si->last_check = le64(sb->s_lastcheck);
	si->creator_os = le32(sb->s_creator_os);
	si->feature_compat = le32(sb->s_feature_compat);
	si->feature_incompat = le32(sb->s_feature_incompat);
	si->feature_ro_compat = le32(sb->s_feature_ro_compat);
	si->tunefs_flags = le16(sb->s_tunefs_flag);
	si->block_bits = fs->bits;
	si->block_size = fs->bs;
	si->uuid_hash = le32(sb->s_uuid_hash);
	copy_str(si->label, sb->s_label, O2_LABEL_LEN);
	memcpy(si->uuid, sb->s_uuid, O2_UUID_LEN);
	if (si->feature_incompat &
	    (O2_FEATURE_INCOMPAT_USERSPACE_STACK | O2_FEATURE_INCOMPAT_CLUSTERINFO)) {
		copy_str(si->stack, sb->s_cluster_info.ci_stack, 4);
		copy_str(si->cluster_name, sb->s_cluster_info.ci_cluster, 16);
		si->stack_flags = sb->s_cluster_info.ci_stackflags;
	}
	si->xattr_inline_size = le16(sb->s_xattr_inline_size);
	for (int i = 0; i < 3; i++)
		si->dx_seed[i] = le32(sb->s_dx_seed[i]);
	si->fs_generation = le32(di->i_fs_generation);
	si->device_blocks = fs->nblocks;
	fs->dx_seed[0] = si->dx_seed[0];
	fs->dx_seed[1] = si->dx_seed[1];
	fs->dx_seed[2] = si->dx_seed[2];
	fs->dx_seed[3] = si->uuid_hash;
}

static int check_features(struct o2_fs *fs, char *errbuf, size_t errlen)
{
	const struct o2_super_info *si = &fs->info;
	uint32_t bad;

	bad = si->feature_incompat & ~O2_SUPPORTED_INCOMPAT;
	if (bad) {
		uint32_t bit = bad & -bad;
		const char *name = o2_feature_name(O2_INCOMPAT, bit);

		return o2_errbuf_set(errbuf, errlen, -EOPNOTSUPP,
				  "the volume uses the incompatible feature %s (0x%x), which "
				  "ocfs2d does not implement",
				  name ? name : "unknown", bit);
	}
	bad = si->feature_ro_compat & ~O2_WRITABLE_RO_COMPAT;
	if ((fs->flags & O2_OPEN_RDWR) && bad) {
		uint32_t bit = bad & -bad;
		const char *name = o2_feature_name(O2_RO_COMPAT, bit);

		return o2_errbuf_set(errbuf, errlen, -EOPNOTSUPP,
				  "the volume uses the read-only-compatible feature %s (0x%x), "
				  "which ocfs2d cannot write; open it read-only",
				  name ? name : "unknown", bit);
	}
	if ((fs->flags & O2_OPEN_RDWR) && fs->dev->read_only)
		return o2_errbuf_set(errbuf, errlen, -EROFS, "the device is read-only");
	if ((fs->flags & O2_OPEN_RDWR) &&
	    (si->feature_incompat & (O2_FEATURE_INCOMPAT_RESIZE_INPROG |
				     O2_FEATURE_INCOMPAT_TUNEFS_INPROG | O2_FEATURE_INCOMPAT_HEARTBEAT_DEV)))
		return o2_errbuf_set(errbuf, errlen, -EOPNOTSUPP,
				  "an interrupted tunefs.ocfs2 operation left the volume marked "
				  "in progress; run fsck.ocfs2 first");
	return 0;
}

/* The system directory must be a directory (the root is checked by the walk). */
static int check_top_dirs(struct o2_fs *fs)
{
	uint64_t dirs[1] = { fs->info.system_dir_blkno };

	for (int i = 0; i < 1; i++) {
		struct o2_inode *d;
		int r = o2_inode_get(fs, dirs[i], &d);

		if (r < 0)
			return r;
		bool isdir = S_ISDIR(d->info.mode);

		o2_inode_unref(d);
		if (!isdir)
			return o2_corrupt(fs, dirs[i], "the system directory inode is not a directory");
	}
	return 0;
}

/*
 * The one reader of the global bitmap's counts (open and statfs): the
 * bitmap inode, checked to be a chain allocator.  The caller unrefs *ret.
 */
static int read_global_bitmap(struct o2_fs *fs, struct o2_inode **ret)
{
	struct o2_inode *bm;
	uint64_t blkno;
	int r = o2_sysfile_lookup(fs, O2_SYS_GLOBAL_BITMAP, 0, &blkno);

	if (r < 0)
		return r;
	r = o2_inode_get(fs, blkno, &bm);
	if (r < 0)
		return r;
	if (bm->info.kind != O2_ID2_CHAIN) {
		o2_inode_unref(bm);
		return o2_corrupt(fs, blkno, "global bitmap is not a chain allocator");
	}
	*ret = bm;
	return 0;
}

/* The global bitmap gives the volume's cluster count. */
static int read_cluster_counts(struct o2_fs *fs)
{
	struct o2_inode *bm;
	int r = read_global_bitmap(fs, &bm);

	if (r < 0)
		return r;
	fs->info.total_clusters = bm->info.bitmap_total;
	fs->info.used_clusters = bm->info.bitmap_used;
	o2_inode_unref(bm);
	return 0;
}

int o2_fs_open(struct o2_blockdev *dev, unsigned flags, struct o2_fs **ret_fs, char *errbuf,
	       size_t errlen)
{
	struct o2_open_opts opts = { .flags = flags };

	return o2_fs_open_opts(dev, &opts, ret_fs, errbuf, errlen);
}

static void fs_free(struct o2_fs *fs)
{
	o2_quota_free(fs);
	o2_openrefs_free(fs);
	o2_cache_destroy(fs);
	free(fs->sb_block);
	free(fs->deallocs);
	free(fs);
}

int o2_fs_open_opts(struct o2_blockdev *dev, const struct o2_open_opts *opts,
		    struct o2_fs **ret_fs, char *errbuf, size_t errlen)
{
	struct o2_fs *fs;
	uint32_t bits;
	uint8_t *sb;
	int r;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	r = probe(dev, &sb, &bits);
	if (r == -ENODATA)
		return o2_errbuf_set(errbuf, errlen, r, "no OCFS2 superblock found: not an OCFS2 volume");
	if (r < 0)
		return o2_errbuf_set(errbuf, errlen, r, "reading the superblock failed: %s",
				  strerror(-r));
	fs = o2_calloc(1, sizeof(*fs));
	if (!fs) {
		free(sb);
		return o2_errbuf_set(errbuf, errlen, -ENOMEM, "no memory for the volume handle");
	}
	fs->dev = dev;
	fs->opts = *opts;
	fs->flags = opts->flags;
	fs->sb_block = sb;
	fs->bits = bits;
	fs->bs = 1u << bits;
	fs->nblocks = dev->size >> bits;
	fs->info.feature_incompat =
		le32(((struct o2_dinode *)sb)->id2.i_super.s_feature_incompat);
	r = validate_super(fs, errbuf, errlen);
	if (r < 0)
		goto out_free;
	fill_info(fs);
	fs->cbits = fs->info.cluster_bits;
	fs->cs = 1u << fs->cbits;
	if (fs->cbits < fs->bits) {
		r = o2_errbuf_set(errbuf, errlen, -EUCLEAN,
			       "superblock (block 2): cluster size %u is smaller than block size %u",
			       fs->cs, fs->bs);
		goto out_free;
	}
	fs->bpc_bits = fs->cbits - fs->bits;
	fs->info.cluster_size = fs->cs;
	r = check_features(fs, errbuf, errlen);
	if (r < 0)
		goto out_free;
	r = o2_cache_init(fs, opts->cache_blocks ? opts->cache_blocks : 8192, opts->cache_prefill);
	if (r < 0) {
		o2_errbuf_set(errbuf, errlen, r, "block cache: %s", strerror(-r));
		goto out_free;
	}
	r = check_top_dirs(fs);
	if (r == 0)
		r = read_cluster_counts(fs);
	if (r == 0 && (fs->flags & O2_OPEN_RDWR)) {
		if (opts->slot >= fs->info.max_slots)
			r = o2_fail(fs, -EINVAL, "slot %u does not exist (the volume has %u)",
				    opts->slot, fs->info.max_slots);
		else if (opts->flags & O2_OPEN_CLAIM_SLOT)
			r = o2_slotmap_set(fs, opts->slot, true, opts->node);
		if (r == 0)
			r = o2_journal_open(fs, opts->slot);
		/* what a crash left in this slot: freed clusters, a window, orphans */
		if (r == 0)
			r = o2_sysfiles_load(fs);
		/* before anything frees an inode (orphans below) */
		if (r == 0)
			r = o2_quota_open(fs);
		if (r == 0)
			r = o2_trunclog_flush(fs);
		if (r == 0)
			r = o2_local_alloc_return(fs);
		/* shared: the daemon frees them, each under its lock */
		if (r == 0 && !(opts->flags & O2_OPEN_SHARED))
			r = o2_orphans_process(fs);
		if (r < 0 && fs->journal)
			o2_journal_abandon(fs);
	}
	if (r < 0) {
		o2_errbuf_set(errbuf, errlen, r, "%s", fs->err[0] ? fs->err : strerror(-r));
		goto out_free;
	}
	/* the replay hook is the open's: its argument may not outlive it */
	fs->opts.replay_progress = NULL;
	fs->opts.progress_arg = NULL;
	*ret_fs = fs;
	return 0;

out_free:
	fs_free(fs);
	return r;
}

int o2_fs_close(struct o2_fs *fs)
{
	return o2_fs_close_why(fs, NULL, 0);
}

int o2_fs_close_why(struct o2_fs *fs, char *errbuf, size_t errlen)
{
	return o2_fs_close_progress(fs, NULL, NULL, errbuf, errlen);
}

int o2_fs_close_progress(struct o2_fs *fs, int (*progress)(void *arg, uint64_t done, uint64_t total),
			 void *arg, char *errbuf, size_t errlen)
{
	int r = 0;

	if (!fs)
		return 0;
	fs->close_progress = progress;
	fs->close_arg = arg;
	/* a read-only volume's message says why it is; any other is stale */
	if (!fs->ro_reason)
		fs->err[0] = '\0';
	if (fs->journal && !fs->ro_reason) {
		/* orphans still open: freed now (nothing holds them any more);
		 * on a shared volume the daemon frees them, under their locks,
		 * before it closes */
		r = o2_openrefs_close_all(fs);
		/* frees that wait for locks: the daemon runs them before it
		 * closes; left here, they stay allocated (fsck gives them back) */
		if (r == 0 && o2_fs_deallocs_pending(fs) && o2_fs_run_deallocs(fs) == -O2_ENEEDLOCK)
			fs->ndeallocs = 0;
		if (r == 0)
			r = o2_local_alloc_return(fs);
		if (r == 0)
			r = o2_trunclog_flush(fs);
		if (r == 0)
			r = o2_quota_close(fs);
	}
	if (fs->journal) {
		int e = o2_journal_close(fs);

		if (r == 0)
			r = e;
		/* the slot is free only once its journal is clean */
		if (r == 0 && (fs->flags & O2_OPEN_CLAIM_SLOT))
			r = o2_slotmap_set(fs, fs->opts.slot, false, 0);
	}
	if (r < 0 && errbuf && errlen)
		snprintf(errbuf, errlen, "%s", fs->err[0] ? fs->err : strerror(-r));
	fs_free(fs);
	return r;
}

void o2_fs_abandon(struct o2_fs *fs)
{
	if (!fs)
		return;
	o2_journal_abandon(fs);
	fs_free(fs);
}

int o2_fs_sync(struct o2_fs *fs)
{
	int r;

	if (!fs->journal)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	/* space freed before the sync is free after it (statfs shows it) */
	r = o2_trunclog_pending(fs) ? o2_trunclog_flush(fs) : 0;
	/* quota changes reach the global files (when their locks are held) */
	if (r == 0)
		r = o2_quota_sync(fs, true);
	/* a commit ends with a flush (committed means durable); without one,
	 * data written in place still needs its own */
	if (r == 0) {
		bool commit = o2_journal_unsynced(fs);

		r = o2_journal_commit(fs);
		if (r == 0 && !commit)
			r = o2_blockdev_flush(fs->dev);
	}
	if (r < 0)
		return o2_fs_abort(fs, r, "sync");
	return 0;
}

int o2_fs_quota_sync(struct o2_fs *fs, bool due_only)
{
	int r;

	if (!fs->journal || (due_only && !o2_quota_due(fs)))
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	r = o2_quota_sync(fs, false);
	if (r < 0 && r != -O2_ENEEDLOCK)
		return o2_fs_abort(fs, r, "quota sync");
	return r;
}

int o2_fs_quota_set_limits(struct o2_fs *fs, unsigned type, uint32_t id, const struct o2_dquot *lim)
{
	int r;

	if (fs->ro_reason)
		return -EROFS;
	r = o2_quota_set_limits(fs, type, id, lim);
	if (r < 0 && r != -O2_ENEEDLOCK && r != -EROFS && r != -EOPNOTSUPP && r != -EINVAL)
		return o2_fs_abort(fs, r, "setting quota limits");
	return r;
}

int o2_fs_quota_grace(struct o2_fs *fs, unsigned type, bool set, uint32_t *bgrace,
		      uint32_t *igrace)
{
	if (set && fs->ro_reason)
		return -EROFS;
	return o2_quota_grace(fs, type, set, bgrace, igrace);
}

int o2_fs_writeback(struct o2_fs *fs, enum o2_writeback how)
{
	int r;

	if (!fs->journal)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	/* the truncate log stays: flushing it changes the global bitmap,
	 * which the caller may not hold the lock of */
	switch (how) {
	case O2_WB_HOME:
		r = o2_journal_write_home(fs);
		break;
	case O2_WB_LOG:
		r = o2_journal_forget_home(fs);
		break;
	default:
		r = o2_journal_checkpoint(fs);
		break;
	}
	if (r < 0)
		return o2_fs_abort(fs, r, "write-back");
	return 0;
}

int o2_fs_orphans(struct o2_fs *fs, uint64_t **ret, size_t *n)
{
	*ret = NULL;
	*n = 0;
	if (!fs->journal)
		return 0;
	return o2_orphans_list(fs, ret, n);
}

int o2_fs_free_orphan(struct o2_fs *fs, uint64_t ino, uint32_t gen)
{
	int r;

	if (!fs->journal)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	r = o2_orphan_free(fs, ino, gen);
	return r < 0 ? o2_fs_abort(fs, r, "freeing an orphan") : 0;
}

bool o2_fs_global_work(struct o2_fs *fs)
{
	uint64_t *v;
	size_t n = 0;

	if (!fs->journal || fs->ro_reason)
		return false;
	if (o2_trunclog_pending(fs) || o2_quota_due(fs))
		return true;
	if (o2_orphans_list(fs, &v, &n) < 0)
		return true;
	free(v);
	return n > 0;
}

void o2_fs_drop_cached(struct o2_fs *fs, uint64_t blkno)
{
	/* what was listed of blkno (0: of anything) may be stale too */
	o2_cache_lost(fs, blkno);
	if (blkno)
		o2_cache_forget(fs, blkno);
	else
		o2_cache_drop_clean(fs);
}

void o2_fs_dir_stamp(struct o2_fs *fs, struct o2_dir_stamp *s)
{
	s->changes = fs->dir_changes;
	s->epoch = o2_cache_epoch(fs);
}

bool o2_fs_dir_unchanged(struct o2_fs *fs, uint64_t dir, const struct o2_dir_stamp *s)
{
	return s->changes == fs->dir_changes && !o2_cache_lost_since(fs, dir, s->epoch);
}

void o2_fs_lost(struct o2_fs *fs, uint64_t ino)
{
	o2_cache_lost(fs, ino);
}

void o2_fs_unlocked_reads(struct o2_fs *fs, bool on)
{
	o2_cache_unlocked_reads(fs, on);
}

void o2_fs_stats(const struct o2_fs *fs, struct o2_fs_stats *ret)
{
	struct o2_journal_stats js;

	o2_journal_stats(fs, &js);
	ret->journal_commits = js.commits;
	ret->journal_checkpoints = js.checkpoints;
	ret->journal_log_blocks = js.log_blocks_written;
	ret->journal_times_home = js.times_home;
	ret->device_flushes = fs->dev ? o2_blockdev_flushes(fs->dev) : 0;
	ret->fsyncs = fs->fsyncs;
	ret->fsync_commits = fs->fsync_commits;
	ret->lock_refreshes = fs->refreshes;
	ret->lock_refreshes_kept = fs->refreshes_kept;
}

void o2_fsync_begin(struct o2_fs *fs, uint64_t ino, bool datasync, struct o2_fsync *s)
{
	*s = (struct o2_fsync){ .ino = ino, .datasync = datasync };
	/* the file's data writes are done: whatever flush covers these covers them */
	s->writes = fs->dev->writes;
	if (ino)
		s->commit = o2_journal_inode_pending(fs, ino, datasync, &s->tid);
	else
		s->commit = o2_journal_newest_tid(fs, &s->tid);
	fs->fsyncs++;
	fs->fsync_commits += s->commit;
}

int o2_fsync_step(struct o2_fs *fs, struct o2_fsync *s)
{
	int r;

	if (!fs->journal)
		return 0;
	if (fs->ro_reason)
		return -EROFS;
	if (s->commit) {
		/* a commit's flushes cover the data written before it */
		r = o2_journal_sync_step(fs, s->tid, &s->need);
		if (r != 0)
			return r;
		s->commit = false;
	}
	if (o2_journal_durable_writes(fs) >= s->writes)
		return 0;
	s->need = s->writes;
	return O2_FSYNC_FLUSH;
}

uint64_t o2_fs_device_writes(const struct o2_fs *fs)
{
	return fs->dev->writes;
}

int o2_fs_flushed(struct o2_fs *fs, uint64_t writes, int result)
{
	if (result < 0)
		return o2_fs_abort(fs, result, "flushing the device");
	o2_journal_flushed(fs, writes);
	return 0;
}

int o2_fs_fsync(struct o2_fs *fs, uint64_t ino, bool datasync)
{
	struct o2_fsync s;
	int r;

	o2_fsync_begin(fs, ino, datasync, &s);
	while ((r = o2_fsync_step(fs, &s)) == O2_FSYNC_FLUSH) {
		uint64_t w = o2_fs_device_writes(fs);

		r = o2_fs_flushed(fs, w, o2_blockdev_flush(fs->dev));
		if (r < 0)
			break;
	}
	return r;
}

int o2_fs_tick(struct o2_fs *fs)
{
	struct o2_trans *t;
	int r;

	if (!fs->journal || fs->ro_reason)
		return 0;
	/*
	 * Freed clusters go back to the global bitmap on the commit interval
	 * (as the kernel's truncate log worker does), so that statfs shows
	 * them and new files can use them.
	 */
	if (o2_journal_idle_or_due(fs) && o2_trunclog_pending(fs))
		return o2_trunclog_flush(fs);
	/* quota changes on the sync interval, if their locks are at hand
	 * (else o2_fs_global_work says so, and the caller runs o2_fs_quota_sync) */
	if (!o2_journal_in_handle(fs) && o2_quota_due(fs)) {
		r = o2_quota_sync(fs, true);
		if (r < 0)
			return r;
	}
	/* an empty handle runs the commit-interval check on its way out */
	r = o2_trans_begin(fs, 1, &t);
	if (r < 0)
		return r;
	return o2_trans_end(t);
}

int o2_fs_readonly_reason(const struct o2_fs *fs)
{
	return fs->ro_reason;
}

const struct o2_super_info *o2_fs_super(const struct o2_fs *fs)
{
	return &fs->info;
}

const char *o2_fs_stack_name(const struct o2_fs *fs)
{
	const struct o2_super_info *si = &fs->info;

	if (si->feature_incompat & O2_FEATURE_INCOMPAT_LOCAL_MOUNT)
		return "local";
	if (si->stack[0])
		return si->stack;
	return "o2cb";
}

/* Space and inodes, for statfs(2): the volume-wide counts, as open reads them. */
int o2_statfs(struct o2_fs *fs, struct o2_statfs *ret)
{
	struct o2_inode *bm, *ia;
	uint64_t blkno;
	int r = read_global_bitmap(fs, &bm);

	if (r < 0)
		return r;
	r = o2_sysfile_lookup(fs, O2_SYS_INODE_ALLOC, fs->opts.slot, &blkno);
	if (r == 0)
		r = o2_inode_get(fs, blkno, &ia);
	if (r < 0) {
		o2_inode_unref(bm);
		return r;
	}
	uint64_t free_cl = bm->info.bitmap_total - bm->info.bitmap_used;
	struct o2_inode *la;

	/* the local alloc window's unused clusters are free too (not on a
	 * shared volume: every node counts what the global bitmap says, as
	 * the kernel does, so that they agree) */
	if (fs->sys.local_alloc && !(fs->opts.flags & O2_OPEN_SHARED) &&
	    o2_inode_get(fs, fs->sys.local_alloc, &la) == 0) {
		if (la->info.bitmap_used <= la->info.bitmap_total)
			free_cl += la->info.bitmap_total - la->info.bitmap_used;
		o2_inode_unref(la);
	}
	uint64_t inode_free = ia->info.bitmap_total - ia->info.bitmap_used;

	*ret = (struct o2_statfs){
		.block_size = fs->bs,
		.cluster_size = fs->cs,
		.total_clusters = bm->info.bitmap_total,
		.free_clusters = free_cl,
		/* each free cluster could become inodes */
		.total_inodes = ia->info.bitmap_total + (free_cl << fs->bpc_bits),
		.free_inodes = inode_free + (free_cl << fs->bpc_bits),
		.max_name_len = O2_MAX_NAME_LEN,
	};
	o2_inode_unref(ia);
	o2_inode_unref(bm);
	return 0;
}
