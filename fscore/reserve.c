/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Reserve, then journal.
 *
 * An operation that allocates first works out the most it can claim -
 * clusters for itself, extent allocator blocks, inodes - and reserves it
 * here before it changes anything; only then does its transaction change
 * blocks, and every allocation inside it is then sure to succeed.  A
 * volume too full for the operation answers -ENOSPC having changed
 * nothing, so it stays writable (a failure after the first change turns
 * the volume read-only: see o2_trans_finish).
 *
 * Reserving is where allocators grow: a suballocator short of free blocks
 * gets a new group now, in a transaction of its own, from one free run of
 * the global bitmap or, with discontig-bg, from several; the local alloc
 * window moves here too, in a handle of its own, when it holds no run the
 * operation's first allocation could take (nothing changes when the
 * global bitmap has no such run either).  fscore serves one operation at a
 * time, so nothing reserved here is taken by another before it is used:
 * a reservation is a check plus the growth it needed, and holds no
 * count of its own.
 *
 * Deletions need blocks too (a punch cutting a record in two, an orphan
 * entry, a refcount split): every other operation leaves
 * O2_RESV_FREEING_META extent blocks free for them, so a full volume can
 * always be emptied.
 */
#include "alloc.h"
#include "dir.h"
#include "error.h"
#include "inode_write.h"
#include "journal.h"
#include "reserve.h"

int o2_resv_orphan(struct o2_fs *fs, uint64_t ino, struct o2_resv *want)
{
	struct o2_buf *ob;
	char name[17];
	int r = o2_inode_buf(fs, fs->sys.orphan_dir, &ob);

	/* orphan names are the inode's number in 16 hex digits */
	o2_orphan_name(ino, name);
	if (r == 0) {
		r = o2_dir_add_need(fs, ob, name, 16, want);
		o2_brelse(fs, ob);
	}
	return r;
}

static int reserve_once(struct o2_fs *fs, const struct o2_resv *want, uint32_t *ret_spare)
{
	struct o2_resv all = *want;
	uint32_t avail;
	bool need_run = want->run > 1, have_run = false;
	int r = 0;

	if (!fs->journal || fs->ro_reason)
		return -EROFS;
	if (!want->freeing) {
		/*
		 * What a deletion needs for itself stays free: an orphan entry
		 * (a directory block when the orphan directory is full), and
		 * extent blocks - unless this operation takes none, and so
		 * leaves the set-aside as it is.
		 */
		r = o2_resv_orphan(fs, 0, &all);
		if (r < 0)
			return r;
		if (want->meta)
			all.meta += O2_RESV_FREEING_META;
	}
	uint32_t meta = all.meta;
	if (all.inodes)
		r = o2_suballoc_reserve(fs, fs->sys.inode_alloc, all.inodes, NULL);
	if (r == 0 && meta)
		r = o2_suballoc_reserve(fs, fs->sys.extent_alloc, meta, NULL);
	if (r == 0)
		r = o2_clusters_avail(fs, &avail);
	if (r == 0 && need_run && avail >= all.clusters)
		r = o2_clusters_have_run(fs, want->run, &have_run);
	if (r < 0)
		return r;
	/*
	 * Clustered, without the global bitmap's lock these counts are the
	 * window's: what it cannot give needs that lock (and may still be
	 * there), so the operation stops and is run again holding it.
	 */
	if (avail < all.clusters || (need_run && !have_run)) {
		r = o2_lock_need(fs, fs->sys.global_bitmap, true);
		return r < 0 ? r : -ENOSPC;
	}
	if (ret_spare)
		*ret_spare = avail - all.clusters;
	/*
	 * The window moves now if the first allocation would move it, so
	 * the operation's transaction only takes bits (clustered, a window
	 * that serves it changes nothing; one that must move asks for the
	 * global bitmap's lock).
	 */
	if (want->clusters && !o2_journal_in_handle(fs))
		r = o2_local_alloc_refill(fs, need_run ? want->run : 1);
	return r;
}

int o2_reserve(struct o2_fs *fs, const struct o2_resv *want, uint32_t *ret_spare)
{
	int r = reserve_once(fs, want, ret_spare);

	/*
	 * Clusters freed by deletions wait in the truncate log until a
	 * commit; short of space, give them back and look again - unless a
	 * handle is open, which nothing may commit under.
	 */
	if (r == -ENOSPC && o2_trunclog_pending(fs) && !o2_journal_in_handle(fs)) {
		r = o2_trunclog_flush(fs);
		if (r == 0)
			r = reserve_once(fs, want, ret_spare);
	}
	return r;
}
