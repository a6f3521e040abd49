/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2ctl verbs about one inode: ls, stat, cat.
 *
 * Each verb gathers everything first and prints afterwards, so a fault
 * found half-way gives an error line and no half-written document.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ctl.h"
#include "json.h"
#include "print.h"

/* ---- ls ---- */

struct ls_entry {
	struct o2_dirent de;
	/* -l only: */
	uint16_t mode;
	uint32_t links, uid, gid;
	uint64_t size;
	struct o2_timespec mtime;
};

static int ls_collect(const struct o2_dirent *de, void *arg)
{
	struct ctl_vec *entries = arg;
	struct ls_entry e;

	memset(&e, 0, sizeof(e));
	e.de = *de;
	return ctl_vec_push(entries, &e);
}

static void ls_json(struct ctl *c, const char *path, uint64_t dir_blkno, const struct ctl_vec *v)
{
	struct json_writer w;

	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "path", path);
	json_uint(&w, "inode", dir_blkno);
	json_array_begin(&w, "entries");
	for (size_t i = 0; i < v->len; i++) {
		const struct ls_entry *e = CTL_VEC_AT(v, struct ls_entry, i);
		char mode[11];

		json_object_begin(&w, NULL);
		json_uint(&w, "inode", e->de.ino);
		json_string_len(&w, "name", e->de.name, e->de.name_len);
		json_uint(&w, "name_len", e->de.name_len);
		json_uint(&w, "file_type", e->de.type);
		json_string(&w, "type", print_dirent_type_name(e->de.type));
		json_uint(&w, "dirent_block", e->de.dirent_blk);
		if (c->long_list) {
			print_mode_string(e->mode, mode);
			json_uint(&w, "mode", e->mode);
			json_string(&w, "mode_string", mode);
			json_uint(&w, "links", e->links);
			json_uint(&w, "uid", e->uid);
			json_uint(&w, "gid", e->gid);
			json_uint(&w, "size", e->size);
			json_int(&w, "mtime", e->mtime.sec);
			json_uint(&w, "mtime_nsec", e->mtime.nsec);
		}
		json_object_end(&w);
	}
	json_array_end(&w);
	json_object_end(&w);
	json_finish(&w);
}

static void ls_human(struct ctl *c, const struct ctl_vec *v)
{
	for (size_t i = 0; i < v->len; i++) {
		const struct ls_entry *e = CTL_VEC_AT(v, struct ls_entry, i);

		if (c->long_list) {
			char mode[11];
			char when[32];

			print_mode_string(e->mode, mode);
			print_ls_time(e->mtime.sec, when, sizeof(when));
			printf("%-15" PRIu64 " %10s %3u %5u %5u %15" PRIu64 " %s ", e->de.ino, mode,
			       e->links, e->uid, e->gid, e->size, when);
		} else {
			printf("%-15" PRIu64 " %-9s ", e->de.ino, print_dirent_type_name(e->de.type));
		}
		fwrite(e->de.name, 1, e->de.name_len, stdout);
		putchar('\n');
	}
}

int verb_ls(struct ctl *c, int argc, char **argv)
{
	const char *path = argc > 0 ? argv[0] : "/";
	struct o2_inode *dir = NULL;
	struct ctl_vec entries;
	uint64_t dir_blkno;
	int status;
	int ret;

	status = ctl_open(c);
	if (status)
		return status;
	status = ctl_get_inode(c, path, &dir);
	if (status)
		return status;
	dir_blkno = o2_inode_info(dir)->blkno;

	ctl_vec_init(&entries, sizeof(struct ls_entry));
	ret = o2_dir_iterate(c->fs, dir, ls_collect, &entries);
	if (ret < 0) {
		status = ctl_fail(c, "%s: %s", path, ctl_strerror(c, ret));
		goto out_free_entries;
	}

	/* Read the inodes only after the walk, outside the iteration. */
	for (size_t i = 0; c->long_list && i < entries.len; i++) {
		struct ls_entry *e = CTL_VEC_AT(&entries, struct ls_entry, i);
		const struct o2_inode_info *ii;
		struct o2_inode *inode;

		ret = o2_inode_get(c->fs, e->de.ino, &inode);
		if (ret < 0) {
			status = ctl_fail(c, "%s: entry '%.*s' (inode %" PRIu64 "): %s", path,
					  (int)e->de.name_len, e->de.name, e->de.ino,
					  ret == -ERANGE ? "inode number outside the volume" :
							   ctl_strerror(c, ret));
			goto out_free_entries;
		}
		ii = o2_inode_info(inode);
		e->mode = ii->mode;
		e->links = ii->links;
		e->uid = ii->uid;
		e->gid = ii->gid;
		e->size = ii->size;
		e->mtime = ii->mtime;
		o2_inode_unref(inode);
	}

	if (c->json)
		ls_json(c, path, dir_blkno, &entries);
	else
		ls_human(c, &entries);
	status = CTL_EXIT_OK;

out_free_entries:
	ctl_vec_free(&entries);
	o2_inode_unref(dir);
	return status;
}

/* ---- stat ---- */

struct stat_group {
	unsigned chain;
	unsigned index; /* position within its chain */
	struct o2_group_info g;
};

struct stat_extent_visit {
	bool is_block;
	uint64_t eb_blkno;
	struct o2_extent extent;
};

struct stat_data {
	const struct o2_inode_info *ii;
	struct ctl_vec ext_recs;    /* struct o2_extent: the inode's own list */
	struct ctl_vec ext_visits;  /* struct stat_extent_visit: the whole tree */
	struct ctl_vec chain_recs;  /* struct o2_chain_rec_info */
	struct ctl_vec groups;	    /* struct stat_group */
	struct ctl_vec trunc_recs;  /* struct o2_trunc_rec */
	unsigned la_used;
	bool have_link;
	char link[4097];
	bool have_journal;
	char journal_error[256]; /* the JBD2 superblock could not be read */
	unsigned journal_slot;
	struct o2_journal_info journal;
};

static int stat_extent_visit(const struct o2_extent *extent, uint64_t eb_blkno, void *arg)
{
	struct ctl_vec *v = arg;
	struct stat_extent_visit visit;

	memset(&visit, 0, sizeof(visit));
	if (extent) {
		visit.extent = *extent;
	} else {
		visit.is_block = true;
		visit.eb_blkno = eb_blkno;
	}
	return ctl_vec_push(v, &visit);
}

static int stat_group_visit(unsigned chain, const struct o2_group_info *g, void *arg)
{
	struct ctl_vec *v = arg;
	struct stat_group sg = { .chain = chain, .index = 0, .g = *g };

	if (v->len > 0) {
		const struct stat_group *prev = CTL_VEC_AT(v, struct stat_group, v->len - 1);

		if (prev->chain == chain)
			sg.index = prev->index + 1;
	}
	return ctl_vec_push(v, &sg);
}

static const char *id2_kind_name(enum o2_id2_kind kind)
{
	switch (kind) {
	case O2_ID2_NONE:
		return "none";
	case O2_ID2_EXTENTS:
		return "extents";
	case O2_ID2_INLINE:
		return "inline";
	case O2_ID2_FAST_SYMLINK:
		return "fast_symlink";
	case O2_ID2_CHAIN:
		return "chain";
	case O2_ID2_LOCAL_ALLOC:
		return "local_alloc";
	case O2_ID2_TRUNCATE_LOG:
		return "truncate_log";
	case O2_ID2_SUPER:
		return "super";
	}
	return "unknown";
}

/* Gather everything stat prints beyond the inode itself.  Reports failures. */
static int stat_gather(struct ctl *c, struct o2_inode *inode, struct stat_data *d)
{
	const struct o2_inode_info *ii = d->ii;
	int ret = 0;

	switch (ii->kind) {
	case O2_ID2_EXTENTS:
		for (unsigned i = 0; i < ii->list_next_free; i++) {
			struct o2_extent e;

			ret = o2_inode_extent_rec(inode, i, &e);
			if (ret < 0)
				return ctl_fail(c, "extent record %u: %s", i, ctl_strerror(c, ret));
			ret = ctl_vec_push(&d->ext_recs, &e);
			if (ret < 0)
				goto fail_nomem;
		}
		ret = o2_inode_walk_extents(c->fs, inode, stat_extent_visit, &d->ext_visits);
		if (ret < 0)
			return ctl_fail(c, "extent tree of inode %" PRIu64 ": %s", ii->blkno,
					ctl_strerror(c, ret));
		break;
	case O2_ID2_CHAIN:
		for (unsigned i = 0; i < ii->chain_next_free; i++) {
			struct o2_chain_rec_info r;

			ret = o2_inode_chain_rec(inode, i, &r);
			if (ret < 0)
				return ctl_fail(c, "chain record %u: %s", i, ctl_strerror(c, ret));
			ret = ctl_vec_push(&d->chain_recs, &r);
			if (ret < 0)
				goto fail_nomem;
		}
		ret = o2_chain_walk(c->fs, inode, stat_group_visit, &d->groups);
		if (ret < 0)
			return ctl_fail(c, "chains of inode %" PRIu64 ": %s", ii->blkno,
					ctl_strerror(c, ret));
		break;
	case O2_ID2_LOCAL_ALLOC:
		d->la_used = o2_inode_local_alloc_used(inode);
		break;
	case O2_ID2_TRUNCATE_LOG:
		for (unsigned i = 0; i < ii->tl_used; i++) {
			struct o2_trunc_rec r;

			ret = o2_inode_truncate_rec(inode, i, &r);
			if (ret < 0)
				return ctl_fail(c, "truncate log record %u: %s", i,
						ctl_strerror(c, ret));
			ret = ctl_vec_push(&d->trunc_recs, &r);
			if (ret < 0)
				goto fail_nomem;
		}
		break;
	default:
		break;
	}

	if (S_ISLNK(ii->mode)) {
		ret = o2_inode_readlink(c->fs, inode, d->link, sizeof(d->link));
		if (ret < 0)
			return ctl_fail(c, "symlink target of inode %" PRIu64 ": %s", ii->blkno,
					ctl_strerror(c, ret));
		d->have_link = true;
	}

	if (ii->flags & O2_INODE_JOURNAL) {
		/* Which slot's journal is it?  Only then is the JBD2 superblock known. */
		unsigned nslots = o2_fs_super(c->fs)->max_slots;

		for (unsigned slot = 0; slot < nslots; slot++) {
			uint64_t blkno;

			if (o2_sysfile_lookup(c->fs, O2_SYS_JOURNAL, slot, &blkno) < 0 ||
			    blkno != ii->blkno)
				continue;
			/* A damaged JBD2 superblock is shown; the inode is still worth seeing. */
			d->journal_slot = slot;
			ret = o2_journal_info(c->fs, slot, &d->journal);
			if (ret < 0)
				snprintf(d->journal_error, sizeof(d->journal_error), "%s",
					 ctl_strerror(c, ret));
			else
				d->have_journal = true;
			break;
		}
	}
	return CTL_EXIT_OK;

fail_nomem:
	return ctl_fail(c, "%s", strerror(-ret));
}

/* Linux's new_encode_dev() layout, as OCFS2 stores i_rdev. */
static unsigned rdev_major(uint64_t rdev)
{
	return (unsigned)((rdev & 0xfff00) >> 8);
}

static unsigned rdev_minor(uint64_t rdev)
{
	return (unsigned)((rdev & 0xff) | ((rdev >> 12) & 0xfff00));
}

static void stat_extent_json(struct json_writer *w, const struct o2_extent *e)
{
	json_object_begin(w, NULL);
	json_uint(w, "cpos", e->cpos);
	json_uint(w, "clusters", e->clusters);
	json_uint(w, "blkno", e->blkno);
	json_uint(w, "flags", e->flags);
	print_flags_json(w, "flag_names", print_extent_flags, e->flags);
	json_object_end(w);
}

static void stat_json(struct ctl *c, const char *spec, const struct stat_data *d)
{
	const struct o2_inode_info *ii = d->ii;
	struct json_writer w;
	char mode[11];

	print_mode_string(ii->mode, mode);
	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "path", spec);
	json_uint(&w, "inode", ii->blkno);
	json_uint(&w, "generation", ii->generation);
	json_uint(&w, "fs_generation", ii->fs_generation);
	json_uint(&w, "check_crc32", ii->check_crc32);
	json_uint(&w, "check_ecc", ii->check_ecc);
	json_uint(&w, "mode", ii->mode);
	json_uint(&w, "permissions", ii->mode & 07777);
	json_string(&w, "mode_string", mode);
	json_string(&w, "type", print_mode_type_name(ii->mode));
	json_uint(&w, "attr", ii->attr);
	json_uint(&w, "flags", ii->flags);
	print_flags_json(&w, "flag_names", print_inode_flags, ii->flags);
	json_uint(&w, "dyn_features", ii->dyn_features);
	print_flags_json(&w, "dyn_feature_names", print_dyn_features, ii->dyn_features);
	json_uint(&w, "uid", ii->uid);
	json_uint(&w, "gid", ii->gid);
	json_uint(&w, "size", ii->size);
	json_uint(&w, "links", ii->links);
	json_uint(&w, "clusters", ii->clusters);
	json_int(&w, "atime", ii->atime.sec);
	json_uint(&w, "atime_nsec", ii->atime.nsec);
	json_int(&w, "ctime", ii->ctime.sec);
	json_uint(&w, "ctime_nsec", ii->ctime.nsec);
	json_int(&w, "mtime", ii->mtime.sec);
	json_uint(&w, "mtime_nsec", ii->mtime.nsec);
	json_uint(&w, "dtime", ii->dtime);
	json_uint(&w, "last_eb_blk", ii->last_eb_blk);
	json_uint(&w, "xattr_loc", ii->xattr_loc);
	json_uint(&w, "xattr_inline_size", ii->xattr_inline_size);
	json_uint(&w, "dx_root", ii->dx_root);
	json_uint(&w, "refcount_loc", ii->refcount_loc);
	json_uint(&w, "orphaned_slot", ii->orphaned_slot);
	json_uint(&w, "dio_orphaned_slot", ii->dio_orphaned_slot);
	json_uint(&w, "suballoc_slot", ii->suballoc_slot);
	json_bool(&w, "suballoc_global", ii->suballoc_slot == 0xFFFF);
	json_uint(&w, "suballoc_bit", ii->suballoc_bit);
	json_uint(&w, "suballoc_loc", ii->suballoc_loc);
	json_uint(&w, "rdev", ii->rdev);
	if (S_ISCHR(ii->mode) || S_ISBLK(ii->mode)) {
		json_uint(&w, "rdev_major", rdev_major(ii->rdev));
		json_uint(&w, "rdev_minor", rdev_minor(ii->rdev));
	}
	json_uint(&w, "bitmap_used", ii->bitmap_used);
	json_uint(&w, "bitmap_total", ii->bitmap_total);
	json_uint(&w, "journal_flags", ii->journal_flags);
	json_uint(&w, "journal_recovery_generation", ii->journal_recovery_generation);
	json_string(&w, "id2_kind", id2_kind_name(ii->kind));

	if (ii->flags & O2_INODE_BITMAP) {
		json_object_begin(&w, "bitmap");
		json_uint(&w, "total", ii->bitmap_total);
		json_uint(&w, "used", ii->bitmap_used);
		json_int(&w, "free", (int64_t)ii->bitmap_total - (int64_t)ii->bitmap_used);
		json_object_end(&w);
	}
	if (ii->flags & O2_INODE_JOURNAL) {
		json_object_begin(&w, "journal");
		json_uint(&w, "flags", ii->journal_flags);
		print_flags_json(&w, "flag_names", print_journal_flags, ii->journal_flags);
		json_bool(&w, "dirty", ii->journal_flags & 0x1);
		json_uint(&w, "recovery_generation", ii->journal_recovery_generation);
		if (d->have_journal) {
			char uuid[33];

			print_uuid(d->journal.uuid, uuid);
			json_uint(&w, "slot", d->journal_slot);
			json_object_begin(&w, "super");
			json_uint(&w, "block_size", d->journal.block_size);
			json_uint(&w, "maxlen", d->journal.maxlen);
			json_uint(&w, "first", d->journal.first);
			json_uint(&w, "sequence", d->journal.sequence);
			json_uint(&w, "start", d->journal.start);
			json_int(&w, "errno", (int32_t)d->journal.errno_);
			json_uint(&w, "feature_compat", d->journal.feature_compat);
			json_uint(&w, "feature_incompat", d->journal.feature_incompat);
			json_uint(&w, "feature_ro_compat", d->journal.feature_ro_compat);
			json_string(&w, "uuid", uuid);
			json_uint(&w, "nr_users", d->journal.nr_users);
			json_object_end(&w);
		} else if (d->journal_error[0]) {
			json_uint(&w, "slot", d->journal_slot);
			json_string(&w, "super_error", d->journal_error);
		}
		json_object_end(&w);
	}
	if (d->have_link)
		json_string(&w, "symlink_target", d->link);

	switch (ii->kind) {
	case O2_ID2_EXTENTS:
		json_object_begin(&w, "extent_list");
		json_uint(&w, "tree_depth", ii->list_depth);
		json_uint(&w, "count", ii->list_count);
		json_uint(&w, "next_free", ii->list_next_free);
		json_array_begin(&w, "records");
		for (size_t i = 0; i < d->ext_recs.len; i++)
			stat_extent_json(&w, CTL_VEC_AT(&d->ext_recs, struct o2_extent, i));
		json_array_end(&w);
		json_object_end(&w);
		json_object_begin(&w, "extent_tree");
		json_array_begin(&w, "extent_blocks");
		for (size_t i = 0; i < d->ext_visits.len; i++) {
			const struct stat_extent_visit *v =
				CTL_VEC_AT(&d->ext_visits, struct stat_extent_visit, i);

			if (v->is_block)
				json_uint(&w, NULL, v->eb_blkno);
		}
		json_array_end(&w);
		json_array_begin(&w, "extents");
		for (size_t i = 0; i < d->ext_visits.len; i++) {
			const struct stat_extent_visit *v =
				CTL_VEC_AT(&d->ext_visits, struct stat_extent_visit, i);

			if (!v->is_block)
				stat_extent_json(&w, &v->extent);
		}
		json_array_end(&w);
		json_object_end(&w);
		break;
	case O2_ID2_INLINE:
		json_object_begin(&w, "inline_data");
		json_uint(&w, "max", ii->inline_count);
		json_object_end(&w);
		break;
	case O2_ID2_CHAIN:
		json_object_begin(&w, "chain_list");
		json_uint(&w, "clusters_per_group", ii->chain_cpg);
		json_uint(&w, "bits_per_cluster", ii->chain_bpc);
		json_uint(&w, "count", ii->chain_count);
		json_uint(&w, "next_free", ii->chain_next_free);
		json_array_begin(&w, "records");
		for (size_t i = 0; i < d->chain_recs.len; i++) {
			const struct o2_chain_rec_info *r =
				CTL_VEC_AT(&d->chain_recs, struct o2_chain_rec_info, i);

			json_object_begin(&w, NULL);
			json_uint(&w, "chain", i);
			json_uint(&w, "total", r->total);
			json_uint(&w, "free", r->free);
			json_int(&w, "used", (int64_t)r->total - (int64_t)r->free);
			json_uint(&w, "blkno", r->blkno);
			json_object_end(&w);
		}
		json_array_end(&w);
		json_object_end(&w);
		json_array_begin(&w, "groups");
		for (size_t i = 0; i < d->groups.len; i++) {
			const struct stat_group *sg = CTL_VEC_AT(&d->groups, struct stat_group, i);
			const struct o2_group_info *g = &sg->g;

			json_object_begin(&w, NULL);
			json_uint(&w, "chain", sg->chain);
			json_uint(&w, "index", sg->index);
			json_uint(&w, "blkno", g->blkno);
			json_uint(&w, "group_chain", g->chain);
			json_uint(&w, "bits", g->bits);
			json_uint(&w, "free_bits", g->free_bits);
			json_int(&w, "used_bits", (int64_t)g->bits - (int64_t)g->free_bits);
			json_uint(&w, "contig_free", g->contig_free);
			json_uint(&w, "size", g->size);
			json_uint(&w, "generation", g->generation);
			json_uint(&w, "next_group", g->next_group);
			json_uint(&w, "parent", g->parent);
			json_uint(&w, "check_crc32", g->check_crc32);
			json_uint(&w, "check_ecc", g->check_ecc);
			json_bool(&w, "discontig", g->discontig);
			json_object_end(&w);
		}
		json_array_end(&w);
		break;
	case O2_ID2_LOCAL_ALLOC:
		json_object_begin(&w, "local_alloc");
		json_uint(&w, "bm_off", ii->la_bm_off);
		json_uint(&w, "size", ii->la_size);
		json_uint(&w, "used", d->la_used);
		json_object_end(&w);
		break;
	case O2_ID2_TRUNCATE_LOG:
		json_object_begin(&w, "truncate_log");
		json_uint(&w, "count", ii->tl_count);
		json_uint(&w, "used", ii->tl_used);
		json_array_begin(&w, "records");
		for (size_t i = 0; i < d->trunc_recs.len; i++) {
			const struct o2_trunc_rec *r =
				CTL_VEC_AT(&d->trunc_recs, struct o2_trunc_rec, i);

			json_object_begin(&w, NULL);
			json_uint(&w, "start", r->start);
			json_uint(&w, "clusters", r->clusters);
			json_object_end(&w);
		}
		json_array_end(&w);
		json_object_end(&w);
		break;
	default:
		break;
	}
	json_object_end(&w);
	json_finish(&w);
}

static void stat_time_human(const char *name, const struct o2_timespec *t)
{
	char when[64];

	print_ctime(t->sec, when, sizeof(when));
	printf("%s: 0x%" PRIx64 " 0x%x -- %s\n", name, (uint64_t)t->sec, t->nsec, when);
}

static void stat_human(struct ctl *c, const struct stat_data *d)
{
	const struct o2_inode_info *ii = d->ii;
	char when[64];
	char mode[11];

	print_mode_string(ii->mode, mode);
	printf("Inode: %" PRIu64 "   Mode: 0%o (%s)   Type: %s   Generation: %u (0x%x)\n", ii->blkno,
	       ii->mode & 07777, mode, print_mode_type_name(ii->mode), ii->generation,
	       ii->generation);
	printf("FS Generation: %u (0x%x)\n", ii->fs_generation, ii->fs_generation);
	printf("CRC32: %08x   ECC: %04x\n", ii->check_crc32, ii->check_ecc);
	printf("Attr: 0x%x   Flags: (0x%x)", ii->attr, ii->flags);
	print_flags_human(stdout, print_inode_flags, ii->flags);
	printf("\nDynamic Features: (0x%x)", ii->dyn_features);
	print_flags_human(stdout, print_dyn_features, ii->dyn_features);
	printf("\nUser: %u   Group: %u   Size: %" PRIu64 "\n", ii->uid, ii->gid, ii->size);
	printf("Links: %u   Clusters: %u\n", ii->links, ii->clusters);
	stat_time_human("ctime", &ii->ctime);
	stat_time_human("atime", &ii->atime);
	stat_time_human("mtime", &ii->mtime);
	print_ctime((int64_t)ii->dtime, when, sizeof(when));
	printf("dtime: 0x%" PRIx64 " -- %s\n", ii->dtime, when);
	printf("Refcount Block: %" PRIu64 "   Xattr Block: %" PRIu64 "   Xattr Inline Size: %u\n",
	       ii->refcount_loc, ii->xattr_loc, ii->xattr_inline_size);
	printf("Last Extblk: %" PRIu64 "   Orphan Slot: %u   DIO Orphan Slot: %u\n", ii->last_eb_blk,
	       ii->orphaned_slot, ii->dio_orphaned_slot);
	if (ii->suballoc_slot == 0xFFFF)
		printf("Sub Alloc Slot: Global");
	else
		printf("Sub Alloc Slot: %u", ii->suballoc_slot);
	printf("   Sub Alloc Bit: %u   Sub Alloc Group: %" PRIu64 "\n", ii->suballoc_bit,
	       ii->suballoc_loc);
	if (S_ISCHR(ii->mode) || S_ISBLK(ii->mode))
		printf("Device: %u,%u (rdev 0x%" PRIx64 ")\n", rdev_major(ii->rdev),
		       rdev_minor(ii->rdev), ii->rdev);
	if (ii->flags & O2_INODE_BITMAP)
		printf("Bitmap Total: %u   Used: %u   Free: %" PRId64 "\n", ii->bitmap_total,
		       ii->bitmap_used, (int64_t)ii->bitmap_total - (int64_t)ii->bitmap_used);
	if (ii->flags & O2_INODE_JOURNAL) {
		printf("Journal Flags: (0x%x)", ii->journal_flags);
		print_flags_human(stdout, print_journal_flags, ii->journal_flags);
		printf("\nRecovery Generation: %u\n", ii->journal_recovery_generation);
		if (d->have_journal)
			printf("Journal Super: slot %u   Blocksize: %u   Total Blocks: %u   First "
			       "Block: %u   Sequence: %u   Start: %u   Errno: %d   Users: %u\n",
			       d->journal_slot, d->journal.block_size, d->journal.maxlen,
			       d->journal.first, d->journal.sequence, d->journal.start,
			       (int32_t)d->journal.errno_, d->journal.nr_users);
		else if (d->journal_error[0])
			printf("Journal Super: slot %u   unreadable: %s\n", d->journal_slot,
			       d->journal_error);
	}
	if (ii->dyn_features & O2_INODE_DYN_INDEXED_DIR)
		printf("Indexed Tree Root: %" PRIu64 "\n", ii->dx_root);
	if (d->have_link)
		printf("Symlink Target: %s\n", d->link);

	switch (ii->kind) {
	case O2_ID2_EXTENTS:
		printf("Tree Depth: %u   Count: %u   Next Free Rec: %u\n", ii->list_depth,
		       ii->list_count, ii->list_next_free);
		if (d->ext_recs.len)
			printf("## %-11s   %-12s   %-13s   %s\n", "Offset", "Clusters", "Block#",
			       "Flags");
		for (size_t i = 0; i < d->ext_recs.len; i++) {
			const struct o2_extent *e = CTL_VEC_AT(&d->ext_recs, struct o2_extent, i);

			printf("%-2zu %-11u   %-12u   %-13" PRIu64 "   0x%x\n", i, e->cpos,
			       e->clusters, e->blkno, e->flags);
		}
		if (ii->list_depth > 0) {
			printf("Extent tree (leaves in logical order):\n");
			for (size_t i = 0; i < d->ext_visits.len; i++) {
				const struct stat_extent_visit *v =
					CTL_VEC_AT(&d->ext_visits, struct stat_extent_visit, i);

				if (v->is_block)
					printf("  extent block %" PRIu64 "\n", v->eb_blkno);
				else
					printf("  %-11u   %-12u   %-13" PRIu64 "   0x%x\n",
					       v->extent.cpos, v->extent.clusters, v->extent.blkno,
					       v->extent.flags);
			}
		}
		break;
	case O2_ID2_INLINE:
		printf("Inline Data Max: %u\n", ii->inline_count);
		break;
	case O2_ID2_CHAIN:
		printf("Clusters per Group: %u   Bits per Cluster: %u\n", ii->chain_cpg,
		       ii->chain_bpc);
		printf("Count: %u   Next Free Rec: %u\n", ii->chain_count, ii->chain_next_free);
		if (d->chain_recs.len)
			printf("##   %-10s   %-10s   %-10s   %s\n", "Total", "Used", "Free", "Block#");
		for (size_t i = 0; i < d->chain_recs.len; i++) {
			const struct o2_chain_rec_info *r =
				CTL_VEC_AT(&d->chain_recs, struct o2_chain_rec_info, i);

			printf("%-2zu   %-10u   %-10" PRId64 "   %-10u   %" PRIu64 "\n", i, r->total,
			       (int64_t)r->total - (int64_t)r->free, r->free, r->blkno);
		}
		for (size_t i = 0; i < d->groups.len; i++) {
			const struct stat_group *sg = CTL_VEC_AT(&d->groups, struct stat_group, i);
			const struct o2_group_info *g = &sg->g;

			if (sg->index == 0) {
				printf("\nGroup Chain: %u   Parent Inode: %" PRIu64
				       "  Generation: %u\n",
				       sg->chain, g->parent, g->generation);
				printf("##   %-15s   %-6s   %-6s   %-6s   %-6s   %-6s   %s\n", "Block#",
				       "Total", "Used", "Free", "Contig", "Size", "CRC32/ECC");
			}
			printf("%-2u   %-15" PRIu64 "   %-6u   %-6d   %-6u   %-6u   %-6u   "
			       "%08x/%04x%s\n",
			       sg->index, g->blkno, g->bits, (int)g->bits - (int)g->free_bits,
			       g->free_bits, g->contig_free, g->size, g->check_crc32, g->check_ecc,
			       g->discontig ? "   discontig" : "");
		}
		break;
	case O2_ID2_LOCAL_ALLOC:
		printf("Local Bitmap Offset: %u   Size: %u   Used: %u\n", ii->la_bm_off, ii->la_size,
		       d->la_used);
		break;
	case O2_ID2_TRUNCATE_LOG:
		printf("Total Records: %u   Used: %u\n", ii->tl_count, ii->tl_used);
		if (d->trunc_recs.len)
			printf("##   %-13s   %s\n", "Start Cluster", "Num Clusters");
		for (size_t i = 0; i < d->trunc_recs.len; i++) {
			const struct o2_trunc_rec *r =
				CTL_VEC_AT(&d->trunc_recs, struct o2_trunc_rec, i);

			printf("%-2zu   %-13u   %u\n", i, r->start, r->clusters);
		}
		break;
	default:
		break;
	}
}

int verb_stat(struct ctl *c, int argc, char **argv)
{
	struct o2_inode *inode = NULL;
	struct stat_data *d;
	int status;

	status = ctl_open(c);
	if (status)
		return status;
	status = ctl_get_inode(c, argv[0], &inode);
	if (status)
		return status;

	d = calloc(1, sizeof(*d));
	if (!d) {
		status = ctl_fail(c, "%s", strerror(ENOMEM));
		goto out_unref;
	}
	d->ii = o2_inode_info(inode);
	ctl_vec_init(&d->ext_recs, sizeof(struct o2_extent));
	ctl_vec_init(&d->ext_visits, sizeof(struct stat_extent_visit));
	ctl_vec_init(&d->chain_recs, sizeof(struct o2_chain_rec_info));
	ctl_vec_init(&d->groups, sizeof(struct stat_group));
	ctl_vec_init(&d->trunc_recs, sizeof(struct o2_trunc_rec));

	status = stat_gather(c, inode, d);
	if (status)
		goto out_free_data;

	if (c->json)
		stat_json(c, argv[0], d);
	else
		stat_human(c, d);

out_free_data:
	ctl_vec_free(&d->ext_recs);
	ctl_vec_free(&d->ext_visits);
	ctl_vec_free(&d->chain_recs);
	ctl_vec_free(&d->groups);
	ctl_vec_free(&d->trunc_recs);
	free(d);
out_unref:
	o2_inode_unref(inode);
	return status;
}

/* ---- cat ---- */

#define CAT_CHUNK (3 * 256 * 1024) /* a multiple of 3: base64 needs no carry */

int verb_cat(struct ctl *c, int argc, char **argv)
{
	const struct o2_inode_info *ii;
	struct o2_inode *inode = NULL;
	struct json_writer w;
	uint8_t *buf = NULL;
	char *b64 = NULL;
	uint64_t off = 0;
	int status;

	status = ctl_open(c);
	if (status)
		return status;
	status = ctl_get_inode(c, argv[0], &inode);
	if (status)
		return status;
	ii = o2_inode_info(inode);
	if (!S_ISREG(ii->mode)) {
		status = ctl_fail(c, "%s: not a regular file", argv[0]);
		goto out_unref;
	}
	if (ii->size > 0 && ii->kind != O2_ID2_EXTENTS && ii->kind != O2_ID2_INLINE) {
		/* Allocators: i_size counts their space, they hold no file data. */
		status = ctl_fail(c, "%s: has no file data (a %s inode)", argv[0],
				  id2_kind_name(ii->kind));
		goto out_unref;
	}

	buf = malloc(CAT_CHUNK);
	b64 = c->json ? malloc(CAT_CHUNK / 3 * 4 + 1) : NULL;
	if (!buf || (c->json && !b64)) {
		status = ctl_fail(c, "%s", strerror(ENOMEM));
		goto out_free;
	}

	/*
	 * The data streams out as it is read: a failure part-way leaves a
	 * truncated output, and the error line says so.
	 */
	if (c->json) {
		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_string(&w, "path", argv[0]);
		json_uint(&w, "inode", ii->blkno);
		json_uint(&w, "size", ii->size);
		json_string_begin(&w, "data_base64");
	}
	while (off < ii->size) {
		size_t want = ii->size - off < CAT_CHUNK ? (size_t)(ii->size - off) : CAT_CHUNK;
		ssize_t got = o2_inode_read(c->fs, inode, off, buf, want);

		if (got < 0) {
			status = ctl_fail(c, "%s: reading at offset %" PRIu64 ": %s", argv[0], off,
					  ctl_strerror(c, (int)got));
			goto out_free;
		}
		if (got == 0) {
			status = ctl_fail(c, "%s: short read at offset %" PRIu64 " of %" PRIu64,
					  argv[0], off, ii->size);
			goto out_free;
		}
		if (c->json) {
			size_t n = print_base64(buf, (size_t)got, b64);

			json_string_append(&w, b64, n);
		} else if (fwrite(buf, 1, (size_t)got, stdout) != (size_t)got) {
			status = ctl_fail(c, "writing output: %s", strerror(errno));
			goto out_free;
		}
		off += (uint64_t)got;
		if ((size_t)got % 3 && off < ii->size && c->json) {
			/* A short read mid-file would break the base64 stream. */
			status = ctl_fail(c, "%s: unaligned short read at offset %" PRIu64, argv[0],
					  off);
			goto out_free;
		}
	}
	if (c->json) {
		json_string_end(&w);
		json_object_end(&w);
		json_finish(&w);
	}
	status = CTL_EXIT_OK;

out_free:
	free(b64);
	free(buf);
out_unref:
	o2_inode_unref(inode);
	return status;
}
