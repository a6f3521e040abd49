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
 * window moves when the operation's own allocations find it empty, which
 * changes nothing when no run is left.  fscore serves one operation at a
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
#include "error.h"
#include "reserve.h"

/* A directory block, and the index leaves a rebuild takes on indexed-dirs volumes. */
#define NAME_CLUSTERS 1
#define DX_REBUILD_CLUSTERS 14
/* A directory's tree growth, its index root and index tree, an ACL's xattr block. */
#define NAME_META (O2_RESV_TREE_META(5) + 1 + O2_RESV_TREE_META(5) + 1)

void o2_resv_name(struct o2_fs *fs, struct o2_resv *want)
{
	want->clusters += NAME_CLUSTERS;
	if (o2_has_incompat(fs, O2_FEATURE_INCOMPAT_INDEXED_DIRS))
		want->clusters += DX_REBUILD_CLUSTERS;
	want->meta += NAME_META;
}

int o2_reserve(struct o2_fs *fs, const struct o2_resv *want, uint32_t *ret_spare)
{
	uint32_t avail, longest = 0, meta = want->meta;
	bool need_run = want->run > 1;
	int r = 0;

	if (!fs->journal)
		return -EROFS;
	if (fs->ro_reason)
		return -EROFS;
	/* an operation that takes no extent block leaves the set-aside as it is */
	if (!want->freeing && meta)
		meta += O2_RESV_FREEING_META;
	if (want->inodes)
		r = o2_suballoc_reserve(fs, fs->sys.inode_alloc, want->inodes, NULL);
	if (r == 0 && meta)
		r = o2_suballoc_reserve(fs, fs->sys.extent_alloc, meta, NULL);
	if (r == 0)
		r = o2_clusters_avail(fs, &avail, need_run ? &longest : NULL);
	if (r < 0)
		return r;
	if (avail < want->clusters || (need_run && longest < want->run))
		return -ENOSPC;
	if (ret_spare)
		*ret_spare = avail - want->clusters;
	return 0;
}
