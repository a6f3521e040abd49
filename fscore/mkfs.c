/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mkfs: make a new OCFS2 volume, the structures mkfs.ocfs2 1.8.7 makes.
 *
 * How it works.  mkfs.ocfs2 works in two phases and its layout follows
 * from their allocation orders, so we replay both, in memory first:
 *
 *  1. The raw phase lays out the global bitmap (cluster groups of
 *     8 * (blocksize - 64) bits; the first descriptor in the first cluster
 *     after the superblock, every other one in the first block of its group,
 *     group i on chain i mod 243 for 4 KiB blocks) and allocates, first fit
 *     within the first group that has room: the global inode allocator's
 *     single group (enough blocks for 32 slots), the root and system
 *     directories (inline when inline-data is on and they fit), the system
 *     inodes in a fixed order, the heartbeat area (256 blocks) and the
 *     orphan directories.
 *  2. The library phase then makes, first fit from cluster 0, one range
 *     after another: the backup superblocks (their clusters marked used),
 *     each slot's journal, each slot's extent allocator groups, the slot
 *     map, the quota files, directory indexes (indexed-dirs without
 *     inline-data) and lost+found (from inode_alloc:0000, which gets its
 *     first group then).
 *
 * Nothing is written until the whole layout is known, so every error
 * (bad option, device too small) comes before the first write.  The
 * writing pass runs twice: once counting bytes (for the progress total),
 * once for real.  Zeroing comes first (the ends of the device, journals,
 * heartbeat), the superblock last.
 *
 * Where the result differs from mkfs.ocfs2's, on purpose:
 *  - a block-based system directory on an indexed-dirs volume (512 and 1K
 *    blocks, many slots, no inline-data) gets an index, made last;
 *    mkfs.ocfs2 leaves it without one and fsck.ocfs2 reports that;
 *  - the quota usage of uid/gid 0 counts lost+found too;
 *  - a block-based lost+found's i_size is the block size (libocfs2 writes
 *    the block size less the trailer), and the dx free-space hints are the
 *    true values after lost+found is linked;
 *  - bytes mkfs.ocfs2 copies from uninitialised memory (entry padding in
 *    lost+found, the cluster name's tail, the global quota header) are zero;
 *  - volumes over 2^32 blocks get 64-bit journal block numbers unless
 *    block32 is asked for, instead of a refusal.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "blockcheck.h"
#include "error.h"
#include "internal.h"

#define MK_CLEAR_CHUNK (1u << 20)
#define MK_MIN_JOURNAL (4u << 20)
#define MK_HB_BLOCKS 256u /* O2NM_MAX_NODES + 1 */
#define MK_SYSNAME_MAX 40u
#define MK_EXTALLOC_MAX_PERCENT 5.0
#define MK_CLUSTERS_MAX (UINT32_MAX - 1u)
#define MK_INVALID_SLOT 0xFFFFu
#define MK_MAX_MNT_COUNT 20
#define MK_MINOR_REV 90
#define MK_XATTR_INLINE_SIZE 256
#define MK_DIR_MIN_REC_LEN 16u
#define MK_TRAILER_SIZE ((unsigned)sizeof(struct o2_dir_trailer))
#define MK_LOCAL_QF_BLOCKS 2u
#define MK_GLOBAL_QF_BLOCKS 2u
#define MK_QBLK_RESERVED 8u
#define MK_QUOTA_GRACE 604800u /* one week */
#define MK_QUOTA_SYNC_MS 10000u
#define MK_UNIT_SHIFT 16 /* progress is counted in 64 KiB units */

static const uint32_t mk_global_qmagic[2] = { 0x0cf52470, 0x0cf52471 };
static const uint32_t mk_local_qmagic[2] = { 0x0cf524c0, 0x0cf524c1 };

/* ---------------------------------------------------------------- features */

struct mk_feature {
	const char *name;
	struct o2_features own;	 /* the feature's own bits */
	struct o2_features with; /* its own bits and those it needs */
};

#define FC(x) { (x), 0, 0 }
#define FI(x) { 0, (x), 0 }
#define FR(x) { 0, 0, (x) }

/* The features mkfs.ocfs2 --fs-features knows, in its order. */
static const struct mk_feature mk_features[] = {
	{ "local", FI(O2_FEATURE_INCOMPAT_LOCAL_MOUNT), FI(O2_FEATURE_INCOMPAT_LOCAL_MOUNT) },
	{ "sparse", FI(O2_FEATURE_INCOMPAT_SPARSE_ALLOC), FI(O2_FEATURE_INCOMPAT_SPARSE_ALLOC) },
	{ "backup-super", FC(O2_FEATURE_COMPAT_BACKUP_SB), FC(O2_FEATURE_COMPAT_BACKUP_SB) },
	{ "unwritten", FR(O2_FEATURE_RO_COMPAT_UNWRITTEN),
	  { 0, O2_FEATURE_INCOMPAT_SPARSE_ALLOC, O2_FEATURE_RO_COMPAT_UNWRITTEN } },
	{ "extended-slotmap", FI(O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP),
	  FI(O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP) },
	{ "inline-data", FI(O2_FEATURE_INCOMPAT_INLINE_DATA), FI(O2_FEATURE_INCOMPAT_INLINE_DATA) },
	{ "metaecc", FI(O2_FEATURE_INCOMPAT_META_ECC), FI(O2_FEATURE_INCOMPAT_META_ECC) },
	{ "xattr", FI(O2_FEATURE_INCOMPAT_XATTR), FI(O2_FEATURE_INCOMPAT_XATTR) },
	{ "indexed-dirs", FI(O2_FEATURE_INCOMPAT_INDEXED_DIRS), FI(O2_FEATURE_INCOMPAT_INDEXED_DIRS) },
	{ "usrquota", FR(O2_FEATURE_RO_COMPAT_USRQUOTA), FR(O2_FEATURE_RO_COMPAT_USRQUOTA) },
	{ "grpquota", FR(O2_FEATURE_RO_COMPAT_GRPQUOTA), FR(O2_FEATURE_RO_COMPAT_GRPQUOTA) },
	{ "refcount", FI(O2_FEATURE_INCOMPAT_REFCOUNT_TREE), FI(O2_FEATURE_INCOMPAT_REFCOUNT_TREE) },
	{ "discontig-bg", FI(O2_FEATURE_INCOMPAT_DISCONTIG_BG), FI(O2_FEATURE_INCOMPAT_DISCONTIG_BG) },
	{ "clusterinfo", FI(O2_FEATURE_INCOMPAT_CLUSTERINFO), FI(O2_FEATURE_INCOMPAT_CLUSTERINFO) },
	{ "append-dio", FI(O2_FEATURE_INCOMPAT_APPEND_DIO), FI(O2_FEATURE_INCOMPAT_APPEND_DIO) },
};

#define MK_DEFAULT_INCOMPAT                                                                    \
	(O2_FEATURE_INCOMPAT_SPARSE_ALLOC | O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP |            \
	 O2_FEATURE_INCOMPAT_INLINE_DATA | O2_FEATURE_INCOMPAT_XATTR |                          \
	 O2_FEATURE_INCOMPAT_REFCOUNT_TREE | O2_FEATURE_INCOMPAT_INDEXED_DIRS |                 \
	 O2_FEATURE_INCOMPAT_DISCONTIG_BG | O2_FEATURE_INCOMPAT_APPEND_DIO)
#define MK_COMPAT (O2_FEATURE_COMPAT_BACKUP_SB | O2_FEATURE_COMPAT_JBD2_SB)

/* Every file type (-T) gets the same features at the default level. */
static const struct o2_features mk_levels[] = {
	[O2_MKFS_LEVEL_DEFAULT] = { MK_COMPAT, MK_DEFAULT_INCOMPAT, O2_FEATURE_RO_COMPAT_UNWRITTEN },
	[O2_MKFS_LEVEL_MAX_COMPAT] = { MK_COMPAT, 0, 0 },
	[O2_MKFS_LEVEL_MAX_FEATURES] = { MK_COMPAT, MK_DEFAULT_INCOMPAT | O2_FEATURE_INCOMPAT_META_ECC,
					 O2_FEATURE_RO_COMPAT_UNWRITTEN |
						 O2_FEATURE_RO_COMPAT_USRQUOTA |
						 O2_FEATURE_RO_COMPAT_GRPQUOTA },
};

static void feat_or(struct o2_features *a, const struct o2_features *b)
{
	a->compat |= b->compat;
	a->incompat |= b->incompat;
	a->ro_compat |= b->ro_compat;
}

static bool feat_meet(const struct o2_features *a, const struct o2_features *b)
{
	return (a->compat & b->compat) || (a->incompat & b->incompat) ||
	       (a->ro_compat & b->ro_compat);
}

/* Turning a feature off also turns off the features that need it. */
static void feat_close_off(struct o2_features *off)
{
	for (size_t i = 0; i < sizeof(mk_features) / sizeof(mk_features[0]); i++)
		if (feat_meet(off, &mk_features[i].with))
			feat_or(off, &mk_features[i].own);
}

static const char *feat_first_name(const struct o2_features *set)
{
	for (size_t i = 0; i < sizeof(mk_features) / sizeof(mk_features[0]); i++)
		if (feat_meet(set, &mk_features[i].own))
			return mk_features[i].name;
	return "?";
}

int o2_mkfs_parse_features(const char *list, struct o2_features *on, struct o2_features *off,
			   char *errbuf, size_t errlen)
{
	const char *p = list;

	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *name = p;
		bool neg = false;
		size_t i;

		p = end ? end + 1 : NULL;
		if (len == 0)
			continue;
		if (len > 2 && name[0] == 'n' && name[1] == 'o') {
			neg = true;
			name += 2;
			len -= 2;
		}
		for (i = 0; i < sizeof(mk_features) / sizeof(mk_features[0]); i++)
			if (strlen(mk_features[i].name) == len && !memcmp(mk_features[i].name, name, len))
				break;
		if (i == sizeof(mk_features) / sizeof(mk_features[0]))
			return o2_errbuf_set(errbuf, errlen, -EINVAL, "unknown feature '%.*s%.*s'",
				       neg ? 2 : 0, "no", (int)len, name);
		if (neg)
			feat_or(off, &mk_features[i].own);
		else
			feat_or(on, &mk_features[i].with);
	}
	feat_close_off(off);
	if (feat_meet(on, off)) {
		struct o2_features both = { on->compat & off->compat, on->incompat & off->incompat,
					    on->ro_compat & off->ro_compat };

		return o2_errbuf_set(errbuf, errlen, -EINVAL,
			       "feature '%s' is both asked for and turned off",
			       feat_first_name(&both));
	}
	return 0;
}

int o2_mkfs_parse_type(const char *name, enum o2_mkfs_type *ret)
{
	static const char *const names[] = { [O2_MKFS_TYPE_DATAFILES] = "datafiles",
					     [O2_MKFS_TYPE_MAIL] = "mail",
					     [O2_MKFS_TYPE_VMSTORE] = "vmstore" };

	for (unsigned i = O2_MKFS_TYPE_DATAFILES; i <= O2_MKFS_TYPE_VMSTORE; i++)
		if (!strcmp(name, names[i])) {
			*ret = (enum o2_mkfs_type)i;
			return 0;
		}
	return -EINVAL;
}

int o2_mkfs_parse_level(const char *name, enum o2_mkfs_level *ret)
{
	if (!strcmp(name, "default"))
		*ret = O2_MKFS_LEVEL_DEFAULT;
	else if (!strcmp(name, "max-compat"))
		*ret = O2_MKFS_LEVEL_MAX_COMPAT;
	else if (!strcmp(name, "max-features"))
		*ret = O2_MKFS_LEVEL_MAX_FEATURES;
	else
		return -EINVAL;
	return 0;
}

/* ---------------------------------------------------------------- the model */

struct mk_ext {
	uint32_t cpos, clusters;
	uint64_t blkno;
};

/* A group of a suballocator (the global inode allocator, extent_alloc, inode_alloc). */
struct mk_sgroup {
	uint64_t blkno, next;
	uint16_t bits, free, chain, size;
	uint8_t map[]; /* the bitmap: allocated with a block's worth of room */
};

/* The chain list of an allocator inode other than the global bitmap. */
struct mk_chain {
	uint16_t cpg, bpc, count, next_free;
	struct mk_sgroup **groups; /* in creation order */
	unsigned ngroups;
};

enum mk_kind { MK_EXTENTS, MK_INLINE, MK_CHAIN, MK_GLOBAL_BITMAP, MK_LOCAL_ALLOC, MK_TRUNCATE };

struct mk_dir;

struct mk_inode {
	uint64_t blkno, loc, dx_root;
	uint16_t slot, bit, mode, links, dyn;
	uint32_t flags, clusters;
	uint64_t size;
	int64_t atime, ctime, mtime;
	enum mk_kind kind;
	struct mk_ext *ext;
	unsigned next, cap;
	struct mk_chain chain; /* MK_CHAIN */
	uint32_t bm_used, bm_total;
	struct mk_dir *dir;
	uint8_t *data; /* file contents written over the extents (slot map, quota) */
	size_t data_len;
};

struct mk_dxent {
	uint32_t major, minor;
	uint64_t blk;
	unsigned idx; /* insertion order, to sort stably */
};

/* A cluster of dx leaves: the entries [first, first + count) of the sorted list. */
struct mk_dxcluster {
	uint32_t cpos; /* lowest major hash it holds */
	uint64_t blkno;
	unsigned first, count;
};

struct mk_dir {
	struct mk_inode *ino;
	bool inl;	    /* inline data */
	unsigned cap;	    /* inline: id_count */
	uint8_t *buf;	    /* inline: cap bytes; blocks: maxblocks * bs */
	unsigned nblocks, maxblocks;
	bool trailer;
	bool indexed;
	uint64_t dx_blkno, dx_loc;
	uint16_t dx_bit;
	struct mk_dxent *dx;
	unsigned ndx, dx_cap;
	struct mk_dxcluster *dxc; /* NULL: the entries fit in the dx root (inline) */
	unsigned ndxc;
};

/* A global bitmap group; its descriptor is written from this. */
struct mk_ggroup {
	uint32_t bits, free;
	uint8_t *map; /* NULL while only bit 0 is set */
};

struct mk_quota {
	uint8_t *blocks; /* the global file's blocks */
	unsigned nblocks;
	uint32_t free_entry;
};

struct mk {
	const struct o2_mkfs_opts *o;
	struct o2_mkfs_info *info;
	char *err;
	size_t errlen;

	unsigned bs, bits, cs, cbits, bpc, slots;
	uint64_t blocks;
	uint32_t clusters;
	struct o2_features f;
	bool inline_data, dx, metaecc, trailers, discontig, extended_slotmap;
	bool quota[2];
	uint32_t gen;
	int64_t now;
	uint64_t journal_bytes;
	uint32_t extalloc_clusters;
	unsigned sb_cpg; /* suballocator clusters per group */

	/* global bitmap */
	struct mk_ggroup *gg;
	uint32_t ngroups, gcpg, tail_bits, fcg;
	uint64_t fcg_blkno;
	unsigned grecs, gchains;
	uint32_t gused;

	/* the global inode allocator's one group */
	struct mk_sgroup *sysg;

	struct mk_inode root, sysdir, lf;
	struct mk_inode *sys[O2_SYS_COUNT]; /* [type][slot] */
	struct mk_dir rootd, sysd, lfd;
	struct mk_dir *orphand;
	struct mk_quota q[2];
	uint64_t backup[6];
	unsigned nbackups;
	struct o2_fs hashfs; /* only its dx_seed, for o2_dx_hash() */

	/* writing */
	struct o2_blockdev *dev;
	bool dry;
	uint64_t planned, written;
	unsigned last_unit;
	o2_mkfs_progress_fn progress;
	void *progress_arg;
	uint8_t *zero; /* MK_CLEAR_CHUNK zero bytes */
	uint8_t *blk;  /* one block */
};

static int fail(struct mk *m, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct mk *m, int err, const char *fmt, ...)
{
	va_list ap;

	if (m->err && m->errlen) {
		va_start(ap, fmt);
		vsnprintf(m->err, m->errlen, fmt, ap);
		va_end(ap);
	}
	return err;
}

static inline uint64_t c2b(const struct mk *m, uint64_t c)
{
	return c << (m->cbits - m->bits);
}

static inline bool bit_test(const uint8_t *map, uint32_t i)
{
	return (map[i >> 3] >> (i & 7)) & 1;
}

static inline void bit_set(uint8_t *map, uint32_t i)
{
	map[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* First run of at least min clear bits in map[0, bits); its start and full length. */
static bool map_find_run(const uint8_t *map, uint32_t bits, uint32_t min, uint32_t *ret_start,
			 uint32_t *ret_len)
{
	uint32_t i = 0;

	while (i < bits) {
		uint32_t s;

		while (i < bits && bit_test(map, i))
			i++;
		s = i;
		while (i < bits && !bit_test(map, i))
			i++;
		if (i > s && i - s >= min) {
			*ret_start = s;
			*ret_len = i - s;
			return true;
		}
	}
	return false;
}

/* ---------------------------------------------------------------- global bitmap */

static unsigned gbitmap_bytes(const struct mk *m)
{
	return m->bs - (unsigned)offsetof(struct o2_group_desc, bg_bitmap);
}

static uint64_t gg_blkno(const struct mk *m, uint32_t g)
{
	return g == 0 ? m->fcg_blkno : c2b(m, (uint64_t)g * m->gcpg);
}

static uint8_t *gg_map(struct mk *m, uint32_t g)
{
	struct mk_ggroup *gr = &m->gg[g];

	if (!gr->map) {
		gr->map = o2_calloc(1, gbitmap_bytes(m));
		if (!gr->map)
			return NULL;
		bit_set(gr->map, 0);
	}
	return gr->map;
}

static int gg_init(struct mk *m)
{
	unsigned cbb = m->cbits - m->bits;

	m->gg = o2_calloc(m->ngroups, sizeof(*m->gg));
	if (!m->gg)
		return fail(m, -ENOMEM, "out of memory");
	m->fcg = (O2_SUPER_BLKNO + 1 + (1u << cbb) - 1) >> cbb;
	m->fcg_blkno = (uint64_t)m->fcg << cbb;
	for (uint32_t g = 0; g < m->ngroups; g++) {
		m->gg[g].bits = (g == m->ngroups - 1 && g > 0) ? m->tail_bits : m->gcpg;
		m->gg[g].free = m->gg[g].bits - 1;
	}
	m->gused = m->ngroups;
	if (!gg_map(m, 0))
		return fail(m, -ENOMEM, "out of memory");
	/* the clusters of the superblock area and of the first descriptor */
	for (uint32_t i = 1; i <= m->fcg; i++) {
		bit_set(m->gg[0].map, i);
		m->gg[0].free--;
		m->gused++;
	}
	m->grecs = o2_chain_recs_per_inode(m->bs);
	m->gchains = m->ngroups > m->grecs ? m->grecs : m->ngroups;
	return 0;
}

static int gg_take(struct mk *m, uint32_t g, uint32_t start, uint32_t n)
{
	uint8_t *map = gg_map(m, g);

	if (!map)
		return fail(m, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < n; i++)
		bit_set(map, start + i);
	m->gg[g].free -= n;
	m->gused += n;
	return 0;
}

/* First clear run of at least min bits in group g. */
static bool gg_find(struct mk *m, uint32_t g, uint32_t min, uint32_t *start, uint32_t *len)
{
	struct mk_ggroup *gr = &m->gg[g];

	if (gr->free < min)
		return false;
	if (!gr->map) {
		*start = 1;
		*len = gr->bits - 1;
		return *len >= min;
	}
	return map_find_run(gr->map, gr->bits, min, start, len);
}

/*
 * The raw phase: chains in order, each chain's groups in order; the first
 * group with enough free bits gives its first run of n (mkfs.ocfs2 gives
 * up if that group is fragmented; we look further).
 */
static int gg_raw_alloc(struct mk *m, uint32_t n, uint32_t *ret_cluster)
{
	for (unsigned c = 0; c < m->gchains; c++)
		for (uint32_t g = c; g < m->ngroups; g += m->grecs) {
			uint32_t s, len;

			if (!gg_find(m, g, n, &s, &len))
				continue;
			*ret_cluster = g * m->gcpg + s;
			return gg_take(m, g, s, n);
		}
	return fail(m, -ENOSPC, "no room for %u more contiguous clusters", n);
}

/*
 * The library phase, group by group in cluster order: in the first group
 * that has one, the first free run of max clusters, or else that group's
 * longest run if it reaches min; up to max of it is taken.  (A short hole
 * in the middle of a group is passed over when a later run there is long
 * enough; the tail of a group is used when nothing in it is.)
 */
static int gg_alloc_range(struct mk *m, uint32_t min, uint32_t max, uint32_t *ret_start,
			  uint32_t *ret_got)
{
	for (uint32_t g = 0; g < m->ngroups; g++) {
		struct mk_ggroup *gr = &m->gg[g];
		uint32_t best = 0, best_len = 0, i = 0;

		if (gr->free < min)
			continue;
		if (!gr->map) {
			best = 1;
			best_len = gr->bits - 1;
		} else {
			while (i < gr->bits && best_len < max) {
				uint32_t s;

				while (i < gr->bits && bit_test(gr->map, i))
					i++;
				s = i;
				while (i < gr->bits && !bit_test(gr->map, i))
					i++;
				if (i - s > best_len) {
					best = s;
					best_len = i - s;
				}
			}
		}
		if (best_len < min || !best_len)
			continue;
		if (best_len > max)
			best_len = max;
		*ret_start = g * m->gcpg + best;
		*ret_got = best_len;
		return gg_take(m, g, best, best_len);
	}
	return fail(m, -ENOSPC, "no room for %u more clusters", min);
}

static int gg_mark(struct mk *m, uint32_t cluster)
{
	uint32_t g = cluster / m->gcpg, b = cluster % m->gcpg;
	uint8_t *map = gg_map(m, g);

	if (!map)
		return fail(m, -ENOMEM, "out of memory");
	if (bit_test(map, b))
		return fail(m, -EEXIST, "cluster %u is already in use", cluster);
	return gg_take(m, g, b, 1);
}

/* ---------------------------------------------------------------- inodes and extents */

static int ino_add_ext(struct mk *m, struct mk_inode *in, uint64_t blkno, uint32_t clusters)
{
	struct mk_ext *last = in->next ? &in->ext[in->next - 1] : NULL;

	if (last && last->blkno + c2b(m, last->clusters) == blkno &&
	    last->clusters + clusters <= UINT16_MAX) {
		last->clusters += clusters;
	} else {
		if (in->next == o2_extent_recs_per_inode(m->bs))
			return fail(m, -ENOSPC, "inode %llu: more than %u extents",
				    (unsigned long long)in->blkno, in->next);
		if (in->next == in->cap) {
			unsigned ncap = in->cap ? in->cap * 2 : 4;
			struct mk_ext *n = o2_realloc(in->ext, ncap * sizeof(*n));

			if (!n)
				return fail(m, -ENOMEM, "out of memory");
			in->ext = n;
			in->cap = ncap;
		}
		in->ext[in->next].cpos = in->clusters;
		in->ext[in->next].clusters = clusters;
		in->ext[in->next].blkno = blkno;
		in->next++;
	}
	in->clusters += clusters;
	return 0;
}

/* The library's extend: first-fit ranges until n clusters are added. */
static int ino_extend(struct mk *m, struct mk_inode *in, uint32_t n)
{
	while (n) {
		uint32_t start, got;
		int r = gg_alloc_range(m, 1, n, &start, &got);

		if (r < 0)
			return r;
		r = ino_add_ext(m, in, c2b(m, start), got);
		if (r < 0)
			return r;
		n -= got;
	}
	return 0;
}

/* Physical block of logical block lblk of a file, 0 past its extents. */
static uint64_t ino_pblk(const struct mk *m, const struct mk_inode *in, uint64_t lblk)
{
	for (unsigned i = 0; i < in->next; i++) {
		uint64_t first = c2b(m, in->ext[i].cpos), n = c2b(m, in->ext[i].clusters);

		if (lblk >= first && lblk < first + n)
			return in->ext[i].blkno + (lblk - first);
	}
	return 0;
}

static void ino_init(struct mk *m, struct mk_inode *in, uint16_t mode, uint32_t flags)
{
	memset(in, 0, sizeof(*in));
	in->slot = MK_INVALID_SLOT;
	in->mode = mode;
	in->links = ((mode & 0170000) == 0040000) ? 0 : 1;
	in->flags = O2_FL_VALID | flags;
	in->atime = in->ctime = in->mtime = m->now;
	in->kind = MK_EXTENTS;
}

static void ino_free(struct mk_inode *in)
{
	free(in->ext);
	for (unsigned i = 0; i < in->chain.ngroups; i++)
		free(in->chain.groups[i]);
	free(in->chain.groups);
	free(in->data);
}

/* ---------------------------------------------------------------- suballocators */

static unsigned sg_map_bytes(const struct mk *m, bool suballoc)
{
	if (suballoc && m->discontig)
		return O2_MAX_BG_BITMAP_SIZE;
	return gbitmap_bytes(m);
}

static struct mk_sgroup *sg_new(struct mk *m, uint64_t blkno, uint16_t bits, uint16_t chain,
				uint16_t size)
{
	/* the bitmap is at most blocksize - 64 bytes */
	struct mk_sgroup *g = o2_calloc(1, sizeof(*g) + m->bs);

	if (!g)
		return NULL;
	g->blkno = blkno;
	g->bits = bits;
	g->free = bits - 1;
	g->chain = chain;
	g->size = size;
	bit_set(g->map, 0);
	return g;
}

static int chain_push(struct mk *m, struct mk_chain *ch, struct mk_sgroup *g)
{
	struct mk_sgroup **n = o2_realloc(ch->groups, (ch->ngroups + 1) * sizeof(*n));

	if (!n) {
		free(g);
		return fail(m, -ENOMEM, "out of memory");
	}
	ch->groups = n;
	ch->groups[ch->ngroups++] = g;
	return 0;
}

/* Head (most recent group) of chain c, 0 if empty. */
static uint64_t chain_head(const struct mk_chain *ch, unsigned c)
{
	for (unsigned i = ch->ngroups; i-- > 0;)
		if (ch->groups[i]->chain == c)
			return ch->groups[i]->blkno;
	return 0;
}

/* The library's chain_add_group: cpg contiguous clusters, on the next chain. */
static int sub_add_group(struct mk *m, struct mk_inode *in)
{
	struct mk_chain *ch = &in->chain;
	uint32_t start, got;
	uint16_t c;
	struct mk_sgroup *g;
	int r = gg_alloc_range(m, ch->cpg, ch->cpg, &start, &got);

	if (r < 0)
		return r;
	if (ch->next_free < ch->count)
		c = ch->next_free;
	else
		c = (uint16_t)((in->clusters / ch->cpg) % ch->count);
	g = sg_new(m, c2b(m, start), (uint16_t)(ch->cpg * ch->bpc), c,
		   (uint16_t)sg_map_bytes(m, true));
	if (!g)
		return fail(m, -ENOMEM, "out of memory");
	g->next = chain_head(ch, c);
	r = chain_push(m, ch, g);
	if (r < 0)
		return r;
	in->clusters += ch->cpg;
	in->size = (uint64_t)in->clusters << m->cbits;
	in->bm_total += g->bits;
	in->bm_used += 1;
	if (ch->next_free == c)
		ch->next_free = c + 1;
	return 0;
}

/* The library's chain_alloc: the lowest free block of the allocator, growing it if full. */
static int sub_alloc(struct mk *m, struct mk_inode *in, uint64_t *ret_blkno,
		     struct mk_sgroup **ret_group)
{
	for (int pass = 0; pass < 2; pass++) {
		struct mk_sgroup *best = NULL;
		uint32_t best_bit = 0;

		for (unsigned i = 0; i < in->chain.ngroups; i++) {
			struct mk_sgroup *g = in->chain.groups[i];
			uint32_t s, len;

			if (!g->free || (best && g->blkno > best->blkno))
				continue;
			if (map_find_run(g->map, g->bits, 1, &s, &len)) {
				best = g;
				best_bit = s;
			}
		}
		if (best) {
			bit_set(best->map, best_bit);
			best->free--;
			in->bm_used++;
			*ret_blkno = best->blkno + best_bit;
			*ret_group = best;
			return 0;
		}
		if (pass == 0) {
			int r = sub_add_group(m, in);

			if (r < 0)
				return r;
		}
	}
	return fail(m, -ENOSPC, "allocator %llu is full", (unsigned long long)in->blkno);
}

/* An inode from the global inode allocator's group (the raw phase). */
static int sys_alloc_inode(struct mk *m, struct mk_inode *in)
{
	struct mk_sgroup *g = m->sysg;
	uint32_t s, len;

	if (!map_find_run(g->map, g->bits, 1, &s, &len))
		return fail(m, -ENOSPC, "the system inode group is full");
	bit_set(g->map, s);
	g->free--;
	m->sys[O2_SYS_GLOBAL_INODE_ALLOC][0].bm_used++;
	in->blkno = g->blkno + s;
	in->bit = (uint16_t)s;
	return 0;
}

/* ---------------------------------------------------------------- directories */

static unsigned dir_limit(const struct mk *m, const struct mk_dir *d)
{
	if (d->inl)
		return d->cap;
	return d->trailer ? m->bs - MK_TRAILER_SIZE : m->bs;
}

static struct o2_dir_entry *de_at(uint8_t *p)
{
	return (struct o2_dir_entry *)p;
}

static void dir_trailer_init(const struct mk *m, struct mk_dir *d, uint8_t *blk, uint64_t pblk)
{
	struct o2_dir_trailer *t = (struct o2_dir_trailer *)(blk + m->bs - MK_TRAILER_SIZE);

	memset(t, 0, sizeof(*t));
	memcpy(t->db_signature, O2_SIG_DIRTRL, strlen(O2_SIG_DIRTRL));
	t->db_compat_rec_len = cpu_le16(MK_TRAILER_SIZE);
	t->db_blkno = cpu_le64(pblk);
	t->db_parent_dinode = cpu_le64(d->ino->blkno);
}

/* A new, empty directory block at the end of a block-based directory. */
static int dir_new_block(struct mk *m, struct mk_dir *d)
{
	uint8_t *blk;
	uint64_t pblk = ino_pblk(m, d->ino, d->nblocks);

	if (d->nblocks == d->maxblocks || !pblk)
		return fail(m, -ENOSPC, "directory %llu is full", (unsigned long long)d->ino->blkno);
	blk = d->buf + (size_t)d->nblocks * m->bs;
	memset(blk, 0, m->bs);
	de_at(blk)->rec_len = cpu_le16((uint16_t)dir_limit(m, d));
	if (d->trailer)
		dir_trailer_init(m, d, blk, pblk);
	d->nblocks++;
	d->ino->size = (uint64_t)d->nblocks * m->bs;
	return 0;
}

/*
 * Set a directory up.  Inline: cap bytes in the inode.  Otherwise
 * maxblocks blocks over the inode's extents, the first one made now.
 */
static int dir_init(struct mk *m, struct mk_dir *d, struct mk_inode *in, bool inl,
		    unsigned maxblocks)
{
	memset(d, 0, sizeof(*d));
	d->ino = in;
	d->inl = inl;
	in->dir = d;
	if (inl) {
		d->cap = o2_inline_max(m->bs);
		d->buf = o2_calloc(1, d->cap);
		if (!d->buf)
			return fail(m, -ENOMEM, "out of memory");
		de_at(d->buf)->rec_len = cpu_le16((uint16_t)d->cap);
		in->kind = MK_INLINE;
		in->dyn |= O2_DYN_INLINE_DATA;
		in->size = d->cap;
		return 0;
	}
	d->trailer = m->trailers;
	d->maxblocks = maxblocks;
	d->buf = o2_calloc(maxblocks, m->bs);
	if (!d->buf)
		return fail(m, -ENOMEM, "out of memory");
	return dir_new_block(m, d);
}

static int dx_note(struct mk *m, struct mk_dir *d, const char *name, size_t len, uint64_t pblk)
{
	struct mk_dxent *e;

	if (d->ndx == d->dx_cap) {
		unsigned ncap = d->dx_cap ? d->dx_cap * 2 : 16;
		struct mk_dxent *n = o2_realloc(d->dx, ncap * sizeof(*n));

		if (!n)
			return fail(m, -ENOMEM, "out of memory");
		d->dx = n;
		d->dx_cap = ncap;
	}
	e = &d->dx[d->ndx];
	o2_dx_hash(&m->hashfs, name, len, &e->major, &e->minor);
	e->blk = pblk;
	e->idx = d->ndx++;
	return 0;
}

/*
 * Add an entry.  libocfs2 (grow false) puts it after the first entry with
 * room enough; mkfs.ocfs2's raw phase (grow true) only tries the last entry
 * of the last block and otherwise starts a new block.
 */
static int dir_add(struct mk *m, struct mk_dir *d, const char *name, uint64_t ino, uint8_t type,
		   bool grow)
{
	size_t len = strlen(name);
	unsigned need = O2_DIR_REC_LEN(len), limit = dir_limit(m, d);
	unsigned nareas = d->inl ? 1 : d->nblocks;

	for (unsigned a = grow && nareas ? nareas - 1 : 0;; a++) {
		if (a == nareas) {
			int r;

			if (d->inl || !grow)
				return fail(m, -ENOSPC, "no room for '%s' in directory %llu", name,
					    (unsigned long long)d->ino->blkno);
			r = dir_new_block(m, d);
			if (r < 0)
				return r;
			nareas++;
		}
		uint8_t *base = d->buf + (size_t)a * m->bs;

		for (unsigned off = 0; off < limit;) {
			struct o2_dir_entry *de = de_at(base + off);
			unsigned rec = le16(de->rec_len), real = O2_DIR_REC_LEN(de->name_len);

			if (rec < O2_DIR_MEMBER_LEN || off + rec > limit)
				return fail(m, -EIO, "internal error: bad entry in directory %llu",
					    (unsigned long long)d->ino->blkno);
			if (grow && off + rec != limit) {
				off += rec; /* mkfs.ocfs2 looks at the last entry only */
				continue;
			}
			if ((!de->inode && rec >= need) || (de->inode && rec >= real + need)) {
				if (de->inode) {
					struct o2_dir_entry *n = de_at(base + off + real);

					memset(n, 0, need);
					n->rec_len = cpu_le16((uint16_t)(rec - real));
					de->rec_len = cpu_le16((uint16_t)real);
					de = n;
				}
				de->inode = cpu_le64(ino);
				de->name_len = (uint8_t)len;
				de->file_type = type;
				memcpy(de->name, name, len);
				if (d->indexed)
					return dx_note(m, d, name, len, ino_pblk(m, d->ino, a));
				return 0;
			}
			off += rec;
		}
	}
}

/* Largest free hole of a directory block, as the dx free list counts it. */
static unsigned dir_block_hole(const struct mk *m, const struct mk_dir *d, const uint8_t *blk)
{
	unsigned best = 0, limit = dir_limit(m, d);

	for (unsigned off = 0; off < limit;) {
		const struct o2_dir_entry *de = (const struct o2_dir_entry *)(blk + off);
		unsigned rec = le16(de->rec_len);
		unsigned hole = de->inode ? rec - O2_DIR_REC_LEN(de->name_len) : rec;

		if (hole > best)
			best = hole;
		if (!rec)
			break;
		off += rec;
	}
	return best >= MK_DIR_MIN_REC_LEN ? best : 0;
}

/*
 * Index a block-based directory: every entry, "." and ".." included (they
 * hash to 0/0), goes into a dx root from extent_alloc:0000.  dx_finish()
 * lays the index out once the directory is complete.
 */
static int dir_index(struct mk *m, struct mk_dir *d)
{
	struct mk_inode *ea = &m->sys[O2_SYS_EXTENT_ALLOC][0];
	struct mk_sgroup *g;
	uint64_t blkno;
	int r = sub_alloc(m, ea, &blkno, &g);

	if (r < 0)
		return r;
	d->indexed = true;
	d->dx_blkno = blkno;
	d->dx_bit = (uint16_t)(blkno - g->blkno);
	d->dx_loc = g->blkno;
	d->ino->dyn |= O2_DYN_INDEXED_DIR;
	d->ino->dx_root = blkno;
	for (unsigned b = 0; b < d->nblocks; b++) {
		uint8_t *base = d->buf + (size_t)b * m->bs;

		for (unsigned off = 0; off < dir_limit(m, d);) {
			struct o2_dir_entry *de = de_at(base + off);

			if (de->inode) {
				r = dx_note(m, d, de->name, de->name_len, ino_pblk(m, d->ino, b));
				if (r < 0)
					return r;
			}
			off += le16(de->rec_len);
		}
	}
	return 0;
}

static int dxent_cmp(const void *a, const void *b)
{
	const struct mk_dxent *x = a, *y = b;

	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Lay out an index too big for its root, as the kernel's lookup finds
 * entries: sorted by hash, cut into clusters of leaf blocks, each cluster
 * one extent record whose cpos is the lowest major hash it holds (so all
 * entries of one major hash share a cluster); in a cluster an entry's leaf
 * is its minor hash modulo the blocks per cluster.
 */
static int dx_finish(struct mk *m, struct mk_dir *d)
{
	unsigned cap = o2_dx_entries_per_leaf(m->bs), maxrec = o2_extent_recs_per_dx_root(m->bs);
	unsigned *fill, start = 0;

	if (!d->indexed || d->ndx <= o2_dx_entries_per_root(m->bs))
		return 0;
	qsort(d->dx, d->ndx, sizeof(*d->dx), dxent_cmp);
	fill = o2_calloc(m->bpc, sizeof(*fill));
	d->dxc = o2_calloc(maxrec, sizeof(*d->dxc));
	if (!fill || !d->dxc) {
		free(fill);
		return fail(m, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i <= d->ndx; i++) {
		bool full = false;

		if (i < d->ndx)
			full = fill[d->dx[i].minor & (m->bpc - 1)] == cap;
		if (i == d->ndx || full) {
			unsigned end = i;
			struct mk_dxcluster *c;
			uint32_t got, cl;
			int r;

			/* entries of one major hash stay together */
			while (full && end > start && d->dx[end - 1].major == d->dx[i].major)
				end--;
			if (end == start || d->ndxc == maxrec) {
				free(fill);
				return fail(m, -ENOSPC, "directory %llu: too many entries for its index",
					    (unsigned long long)d->ino->blkno);
			}
			r = gg_alloc_range(m, 1, 1, &cl, &got);
			if (r < 0) {
				free(fill);
				return r;
			}
			c = &d->dxc[d->ndxc++];
			c->cpos = d->ndxc == 1 ? 0 : d->dx[start].major;
			c->blkno = c2b(m, cl);
			c->first = start;
			c->count = end - start;
			if (i == d->ndx)
				break;
			start = end;
			memset(fill, 0, m->bpc * sizeof(*fill));
			for (unsigned j = start; j < i; j++)
				fill[d->dx[j].minor & (m->bpc - 1)]++;
		}
		if (++fill[d->dx[i].minor & (m->bpc - 1)] > cap) {
			free(fill);
			return fail(m, -ENOSPC, "directory %llu: too many entries with one hash",
				    (unsigned long long)d->ino->blkno);
		}
	}
	free(fill);
	return 0;
}

/* ---------------------------------------------------------------- geometry */

static unsigned log2u(uint64_t v)
{
	unsigned b = 0;

	while ((1ull << b) < v)
		b++;
	return b;
}

static bool pow2_in(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

static unsigned slots_for_volume(uint64_t bytes)
{
	uint64_t gib = bytes >> 30;

	if (gib < 2)
		return 2;
	if (gib < 10)
		return 4;
	if (gib < 1024)
		return 8;
	return 16;
}

/* Clusters per group of the extent and inode allocators. */
static unsigned sub_cpg(unsigned bs, unsigned cbits)
{
	unsigned mb = bs >= 2048 ? 4 : bs == 1024 ? 2 : 1;

	return (mb << 20) >> cbits;
}

/* Inodes the global inode allocator's group must hold for n slots. */
static unsigned sys_inodes_needed(unsigned n)
{
	return 7 + 8 * n; /* 7 global and 8 per-slot system files */
}

static uint64_t journal_default_blocks(const struct mk *m)
{
	uint64_t b = m->blocks;

	switch (m->o->type) {
	case O2_MKFS_TYPE_DATAFILES:
		return 8192;
	case O2_MKFS_TYPE_MAIL:
		return b < 262144 ? 16384 : b < 524288 ? 32768 : 65536;
	case O2_MKFS_TYPE_VMSTORE:
		return b < 262144 ? 8192 : b < 524288 ? 16384 : 32768;
	default:
		if (b < 32768)
			return MK_MIN_JOURNAL / m->bs;
		if (b < 262144)
			return 4096;
		b /= 160;
		return b < 16384 ? 16384 : b > 65536 ? 65536 : b;
	}
}

static uint64_t align_cluster(const struct mk *m, uint64_t bytes)
{
	return (bytes + m->cs - 1) >> m->cbits << m->cbits;
}

static bool journal_fits(const struct mk *m, uint64_t jblocks)
{
	return jblocks * m->slots + 1024 <= m->blocks;
}

static uint32_t extalloc_clusters(const struct mk *m)
{
	double target = (m->o->type == O2_MKFS_TYPE_DATAFILES || m->o->type == O2_MKFS_TYPE_VMSTORE)
				? 0.3
				: 0.1;
	uint64_t unit = (uint64_t)m->sb_cpg * m->cs * m->slots, total = unit;
	double pct;
	unsigned n;

	for (n = 1;; n++) {
		pct = (double)total * 100 / (double)((uint64_t)m->clusters << m->cbits);
		if (pct >= target)
			break;
		total += unit;
	}
	if (pct > MK_EXTALLOC_MAX_PERCENT)
		n--;
	return m->sb_cpg * n;
}

static bool name_ok(const char *s, bool alnum_only)
{
	size_t n = strlen(s);

	if (n == 0 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (alnum_only ? !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
				   (c >= 'A' && c <= 'Z'))
			       : (c < 0x20 || c == 0x7f))
			return false;
	}
	return true;
}

/* Options, features and geometry; no allocation yet. */
static int resolve(struct mk *m, uint64_t dev_bytes)
{
	const struct o2_mkfs_opts *o = m->o;
	struct o2_mkfs_info *info = m->info;
	struct o2_features on = o->features_on, off = o->features_off;
	uint64_t bytes, jbytes;
	bool local;

	if (o->block_size && !pow2_in(o->block_size, 512, 4096))
		return fail(m, -EINVAL, "block size %u: must be 512, 1024, 2048 or 4096",
			    o->block_size);
	if (o->cluster_size && !pow2_in(o->cluster_size, 4096, 1u << 20))
		return fail(m, -EINVAL, "cluster size %u: must be a power of two from 4K to 1M",
			    o->cluster_size);
	if (o->slots > O2_MAX_SLOTS)
		return fail(m, -EINVAL, "%u slots: at most %u", o->slots, O2_MAX_SLOTS);
	if (o->label && strlen(o->label) >= O2_LABEL_LEN)
		return fail(m, -EINVAL, "label of %zu bytes: at most %u", strlen(o->label),
			    O2_LABEL_LEN - 1);
	if ((unsigned)o->type > O2_MKFS_TYPE_VMSTORE || (unsigned)o->level > O2_MKFS_LEVEL_MAX_FEATURES)
		return fail(m, -EINVAL, "unknown filesystem type or feature level");

	/* features: the level's set, plus what was asked for, minus what was refused */
	feat_close_off(&off);
	if (feat_meet(&on, &off)) {
		struct o2_features both = { on.compat & off.compat, on.incompat & off.incompat,
					    on.ro_compat & off.ro_compat };

		return fail(m, -EINVAL, "feature '%s' is both asked for and turned off",
			    feat_first_name(&both));
	}
	m->f = mk_levels[o->level];
	feat_or(&m->f, &on);
	m->f.compat &= ~off.compat;
	m->f.incompat &= ~off.incompat;
	m->f.ro_compat &= ~off.ro_compat;

	if (o->mount == O2_MKFS_MOUNT_LOCAL)
		local = true;
	else if (o->mount == O2_MKFS_MOUNT_CLUSTER)
		local = false;
	else
		local = m->f.incompat & O2_FEATURE_INCOMPAT_LOCAL_MOUNT;
	if (local)
		m->f.incompat |= O2_FEATURE_INCOMPAT_LOCAL_MOUNT;
	else
		m->f.incompat &= ~O2_FEATURE_INCOMPAT_LOCAL_MOUNT;
	info->local = local;

	if (o->cluster_stack || o->cluster_name) {
		const char *st = o->cluster_stack;
		bool o2cb;

		if (local)
			return fail(m, -EINVAL,
				    "a local volume (-M local) takes no cluster stack or cluster name");
		if (!st || !*st)
			return fail(m, -EINVAL, "--cluster-name needs --cluster-stack");
		if (strcmp(st, "o2cb") && strcmp(st, "pcmk") && strcmp(st, "cman"))
			return fail(m, -EINVAL, "unknown cluster stack '%s' (o2cb, pcmk or cman)", st);
		if (!o->cluster_name)
			return fail(m, -EINVAL, "--cluster-stack needs --cluster-name");
		o2cb = !strcmp(st, "o2cb");
		if (!name_ok(o->cluster_name, o2cb))
			return fail(m, -EINVAL, "cluster name '%s': 1 to 16 %scharacters",
				    o->cluster_name, o2cb ? "alphanumeric " : "printable ");
		m->f.incompat |= O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP;
		if (!(m->f.incompat & O2_FEATURE_INCOMPAT_CLUSTERINFO))
			m->f.incompat |= o2cb ? O2_FEATURE_INCOMPAT_CLUSTERINFO
					      : O2_FEATURE_INCOMPAT_USERSPACE_STACK;
		snprintf(info->stack, sizeof(info->stack), "%s", st);
		snprintf(info->cluster_name, sizeof(info->cluster_name), "%s", o->cluster_name);
	} else if (m->f.incompat & O2_FEATURE_INCOMPAT_CLUSTERINFO) {
		return fail(m, -EINVAL, "feature 'clusterinfo' needs --cluster-stack and --cluster-name");
	}
	m->inline_data = m->f.incompat & O2_FEATURE_INCOMPAT_INLINE_DATA;
	m->dx = m->f.incompat & O2_FEATURE_INCOMPAT_INDEXED_DIRS;
	m->metaecc = m->f.incompat & O2_FEATURE_INCOMPAT_META_ECC;
	m->trailers = m->metaecc || m->dx;
	m->discontig = m->f.incompat & O2_FEATURE_INCOMPAT_DISCONTIG_BG;
	m->extended_slotmap = m->f.incompat & O2_FEATURE_INCOMPAT_EXTENDED_SLOT_MAP;
	m->quota[0] = m->f.ro_compat & O2_FEATURE_RO_COMPAT_USRQUOTA;
	m->quota[1] = m->f.ro_compat & O2_FEATURE_RO_COMPAT_GRPQUOTA;

	/* sizes */
	bytes = dev_bytes;
	if (o->volume_size) {
		if (o->volume_size > dev_bytes)
			return fail(m, -EINVAL, "volume size %llu is larger than the device (%llu bytes)",
				    (unsigned long long)o->volume_size, (unsigned long long)dev_bytes);
		bytes = o->volume_size;
	}
	m->bs = o->block_size;
	if (!m->bs) {
		if (bytes <= 3u << 20) {
			m->bs = 512;
		} else {
			unsigned shift = 30;

			for (m->bs = 4096; m->bs > 1024 && bytes < (1ull << shift); shift--)
				m->bs >>= 1;
		}
	}
	m->bits = log2u(m->bs);
	m->cs = o->cluster_size;
	if (!m->cs) {
		if (o->type == O2_MKFS_TYPE_DATAFILES || o->type == O2_MKFS_TYPE_VMSTORE) {
			uint64_t gib = bytes >> 30;

			if (gib < 2)
				return fail(m, -ENOSPC, "filesystem type '%s' needs a device of at "
					    "least 2 GiB", o->type == O2_MKFS_TYPE_VMSTORE ? "vmstore"
											   : "datafiles");
			m->cs = (gib < 64 ? 128 : gib < 96 ? 256 : gib < 128 ? 512 : 1024) * 1024;
		} else {
			for (m->cs = 4096; m->cs < (1u << 20); m->cs <<= 1)
				if ((bytes >> log2u(m->cs)) <= MK_CLUSTERS_MAX)
					break;
		}
	}
	m->cbits = log2u(m->cs);
	m->bpc = m->cs / m->bs;
	if ((bytes >> m->cbits) > MK_CLUSTERS_MAX)
		return fail(m, -EINVAL, "the volume has more than 2^32 clusters: use a larger "
			    "cluster size");
	m->clusters = (uint32_t)(bytes >> m->cbits);
	m->blocks = (uint64_t)m->clusters << (m->cbits - m->bits);
	if (m->blocks < 2048)
		return fail(m, -ENOSPC, "the device is too small: %llu bytes make %llu blocks of "
			    "%u bytes, at least 2048 are needed",
			    (unsigned long long)bytes, (unsigned long long)m->blocks, m->bs);

	m->slots = o->slots ? o->slots : local ? 1 : slots_for_volume((uint64_t)m->clusters << m->cbits);

	/* journal */
	jbytes = (uint64_t)m->cs * 9; /* mkfs.ocfs2's floor: 8 clusters of credits and one more */
	if (o->journal_size) {
		if (o->journal_size < MK_MIN_JOURNAL)
			return fail(m, -EINVAL, "journal size %llu: at least 4M",
				    (unsigned long long)o->journal_size);
		if (!journal_fits(m, o->journal_size >> m->bits))
			return fail(m, -ENOSPC, "journal size %llu is too big for the volume "
				    "(%u slots of it must fit with room to spare)",
				    (unsigned long long)o->journal_size, m->slots);
		m->journal_bytes = align_cluster(m, o->journal_size);
		if (m->journal_bytes < jbytes)
			return fail(m, -EINVAL, "journal size %llu is too small for %u-byte clusters: "
				    "at least %llu (nine clusters)",
				    (unsigned long long)o->journal_size, m->cs,
				    (unsigned long long)jbytes);
	} else {
		m->journal_bytes = align_cluster(m, journal_default_blocks(m) << m->bits);
		if (m->journal_bytes < jbytes) {
			m->journal_bytes = jbytes;
			if (!journal_fits(m, jbytes >> m->bits))
				return fail(m, -ENOSPC, "the device is too small for %u-byte clusters: "
					    "use a larger device or a smaller cluster size", m->cs);
		}
	}
	if (m->blocks > UINT32_MAX && o->journal64 == O2_MKFS_J64_OFF)
		return fail(m, -EINVAL, "%llu blocks need 64-bit journal block numbers "
			    "(-J block64), not block32", (unsigned long long)m->blocks);
	info->journal64 = o->journal64 == O2_MKFS_J64_ON || m->blocks > UINT32_MAX;

	/* the cluster groups of the global bitmap */
	m->gcpg = 8 * gbitmap_bytes(m);
	if (m->gcpg > m->clusters)
		m->gcpg = m->clusters;
	m->ngroups = (m->clusters + m->gcpg - 1) / m->gcpg;
	m->tail_bits = m->clusters % m->gcpg;
	if (!m->tail_bits)
		m->tail_bits = m->gcpg;

	m->sb_cpg = sub_cpg(m->bs, m->cbits);
	m->extalloc_clusters = extalloc_clusters(m);

	info->block_size = m->bs;
	info->cluster_size = m->cs;
	info->slots = m->slots;
	info->volume_bytes = (uint64_t)m->clusters << m->cbits;
	info->blocks = m->blocks;
	info->clusters = m->clusters;
	info->cluster_groups = m->ngroups;
	info->clusters_per_group = m->gcpg;
	info->tail_group_clusters = m->tail_bits;
	info->journal_bytes = m->journal_bytes;
	info->extent_alloc_clusters = m->extalloc_clusters;
	info->extent_alloc_groups = m->extalloc_clusters / m->sb_cpg;
	info->features = m->f;
	info->type = o->type;
	snprintf(info->label, sizeof(info->label), "%s", o->label ? o->label : "");
	return 0;
}

/* ---------------------------------------------------------------- building the layout */

static uint16_t sys_mode(enum o2_sysfile t)
{
	return t == O2_SYS_ORPHAN_DIR ? 040755 : 0100644;
}

static uint32_t sys_flags(enum o2_sysfile t)
{
	switch (t) {
	case O2_SYS_GLOBAL_INODE_ALLOC:
	case O2_SYS_EXTENT_ALLOC:
	case O2_SYS_INODE_ALLOC:
	case O2_SYS_GLOBAL_BITMAP:
		return O2_FL_SYSTEM | O2_FL_BITMAP | O2_FL_CHAIN;
	case O2_SYS_HEARTBEAT:
		return O2_FL_SYSTEM | O2_FL_HEARTBEAT;
	case O2_SYS_JOURNAL:
		return O2_FL_SYSTEM | O2_FL_JOURNAL;
	case O2_SYS_LOCAL_ALLOC:
		return O2_FL_SYSTEM | O2_FL_BITMAP | O2_FL_LOCAL_ALLOC;
	case O2_SYS_TRUNCATE_LOG:
		return O2_FL_SYSTEM | O2_FL_DEALLOC;
	case O2_SYS_USER_QUOTA:
	case O2_SYS_GROUP_QUOTA:
	case O2_SYS_LOCAL_USER_QUOTA:
	case O2_SYS_LOCAL_GROUP_QUOTA:
		return O2_FL_SYSTEM | O2_FL_QUOTA;
	default:
		return O2_FL_SYSTEM;
	}
}

static bool sys_skip(const struct mk *m, enum o2_sysfile t)
{
	if (t == O2_SYS_USER_QUOTA || t == O2_SYS_LOCAL_USER_QUOTA)
		return !m->quota[0];
	if (t == O2_SYS_GROUP_QUOTA || t == O2_SYS_LOCAL_GROUP_QUOTA)
		return !m->quota[1];
	return false;
}

static unsigned sys_count(const struct mk *m, enum o2_sysfile t)
{
	return o2_sysfile_is_per_slot(t) ? m->slots : 1;
}

/* An entry made by the raw phase: directories count their subdirectories as they go. */
static int raw_add(struct mk *m, struct mk_dir *d, const char *name, uint64_t ino, uint8_t type)
{
	int r = dir_add(m, d, name, ino, type, true);

	if (r == 0 && type == O2_FT_DIR)
		d->ino->links++;
	return r;
}

static uint32_t bytes_to_clusters(const struct mk *m, uint64_t bytes)
{
	return (uint32_t)((bytes + m->cs - 1) >> m->cbits);
}

static int raw_extent(struct mk *m, struct mk_inode *in, uint32_t clusters)
{
	uint32_t c;
	int r = gg_raw_alloc(m, clusters, &c);

	if (r < 0)
		return r;
	return ino_add_ext(m, in, c2b(m, c), clusters);
}

static int build_raw(struct mk *m)
{
	struct mk_inode *gia;
	unsigned need, nclus, bits, sysdir_blocks = 0;
	bool sysdir_inline;
	int r;

	r = gg_init(m);
	if (r < 0)
		return r;
	for (unsigned t = 0; t < O2_SYS_COUNT; t++) {
		unsigned n = sys_count(m, (enum o2_sysfile)t);

		m->sys[t] = o2_calloc(n, sizeof(struct mk_inode));
		if (!m->sys[t])
			return fail(m, -ENOMEM, "out of memory");
		for (unsigned j = 0; j < n; j++) {
			struct mk_inode *in = &m->sys[t][j];

			ino_init(m, in, sys_mode((enum o2_sysfile)t), sys_flags((enum o2_sysfile)t));
			switch (t) {
			case O2_SYS_EXTENT_ALLOC:
			case O2_SYS_INODE_ALLOC:
				in->kind = MK_CHAIN;
				in->chain.cpg = (uint16_t)m->sb_cpg;
				in->chain.bpc = (uint16_t)m->bpc;
				in->chain.count = (uint16_t)o2_chain_recs_per_inode(m->bs);
				break;
			case O2_SYS_GLOBAL_BITMAP:
				in->kind = MK_GLOBAL_BITMAP;
				in->clusters = m->clusters;
				in->size = (uint64_t)m->clusters << m->cbits;
				break;
			case O2_SYS_LOCAL_ALLOC:
				in->kind = MK_LOCAL_ALLOC;
				break;
			case O2_SYS_TRUNCATE_LOG:
				in->kind = MK_TRUNCATE;
				break;
			default:
				break;
			}
		}
	}
	m->orphand = o2_calloc(m->slots, sizeof(*m->orphand));
	if (!m->orphand)
		return fail(m, -ENOMEM, "out of memory");

	/* the global inode allocator: one group, room for 32 slots' worth of system inodes */
	need = 6 + sys_inodes_needed(m->slots > 32 ? m->slots : 32);
	nclus = bytes_to_clusters(m, (uint64_t)need << m->bits);
	bits = nclus * m->bpc;
	if (bits > 8 * gbitmap_bytes(m))
		return fail(m, -EINVAL, "%u slots need %u system inodes, more than one group of "
			    "%u-byte blocks with %u-byte clusters can hold: use fewer slots or "
			    "smaller clusters", m->slots, need, m->bs, m->cs);
	{
		uint32_t c;

		r = gg_raw_alloc(m, nclus, &c);
		if (r < 0)
			return r;
		m->sysg = sg_new(m, c2b(m, c), (uint16_t)bits, 0, (uint16_t)gbitmap_bytes(m));
		if (!m->sysg)
			return fail(m, -ENOMEM, "out of memory");
	}
	gia = &m->sys[O2_SYS_GLOBAL_INODE_ALLOC][0];
	gia->kind = MK_CHAIN;
	gia->chain.cpg = (uint16_t)nclus;
	gia->chain.bpc = (uint16_t)m->bpc;
	gia->chain.count = (uint16_t)o2_chain_recs_per_inode(m->bs);
	gia->chain.next_free = 1;
	r = chain_push(m, &gia->chain, m->sysg);
	if (r < 0) {
		m->sysg = NULL;
		return r;
	}
	gia->bm_total = bits;
	gia->bm_used = 1;
	gia->clusters = nclus;
	gia->size = (uint64_t)nclus << m->cbits;

	/* the root directory */
	ino_init(m, &m->root, 040755, O2_FL_SYSTEM);
	if (!m->inline_data) {
		r = raw_extent(m, &m->root, 1);
		if (r < 0)
			return r;
	}
	r = sys_alloc_inode(m, &m->root);
	if (r < 0)
		return r;
	r = dir_init(m, &m->rootd, &m->root, m->inline_data, m->bpc);
	if (r < 0)
		return r;
	r = raw_add(m, &m->rootd, ".", m->root.blkno, O2_FT_DIR);
	if (r == 0)
		r = raw_add(m, &m->rootd, "..", m->root.blkno, O2_FT_DIR);
	if (r < 0)
		return r;

	/* the system directory: sized by mkfs.ocfs2's estimate of 52 bytes an entry */
	ino_init(m, &m->sysdir, 040755, O2_FL_SYSTEM);
	sysdir_inline = m->inline_data &&
			O2_DIR_REC_LEN(MK_SYSNAME_MAX) * sys_inodes_needed(m->slots) <=
				o2_inline_max(m->bs);
	if (!sysdir_inline) {
		unsigned per_block = m->bs / O2_DIR_REC_LEN(MK_SYSNAME_MAX);

		sysdir_blocks = (sys_inodes_needed(m->slots) + per_block - 1) / per_block;
		r = raw_extent(m, &m->sysdir, bytes_to_clusters(m, (uint64_t)sysdir_blocks << m->bits));
		if (r < 0)
			return r;
	}
	r = sys_alloc_inode(m, &m->sysdir);
	if (r < 0)
		return r;
	r = dir_init(m, &m->sysd, &m->sysdir, sysdir_inline,
		     sysdir_inline ? 0 : m->sysdir.clusters * m->bpc);
	if (r < 0)
		return r;
	r = raw_add(m, &m->sysd, ".", m->sysdir.blkno, O2_FT_DIR);
	if (r == 0)
		r = raw_add(m, &m->sysd, "..", m->sysdir.blkno, O2_FT_DIR);
	if (r < 0)
		return r;

	/* the system files, in mkfs.ocfs2's order */
	for (unsigned t = 0; t < O2_SYS_COUNT; t++) {
		if (sys_skip(m, (enum o2_sysfile)t))
			continue;
		for (unsigned j = 0; j < sys_count(m, (enum o2_sysfile)t); j++) {
			struct mk_inode *in = &m->sys[t][j];
			char name[MK_SYSNAME_MAX];

			r = sys_alloc_inode(m, in);
			if (r < 0)
				return r;
			o2_sysfile_name((enum o2_sysfile)t, j, name, sizeof(name));
			r = raw_add(m, &m->sysd, name, in->blkno,
				    t == O2_SYS_ORPHAN_DIR ? O2_FT_DIR : O2_FT_REG);
			if (r < 0)
				return r;
		}
	}

	/* the heartbeat area */
	{
		struct mk_inode *hb = &m->sys[O2_SYS_HEARTBEAT][0];

		r = raw_extent(m, hb, bytes_to_clusters(m, (uint64_t)MK_HB_BLOCKS << m->bits));
		if (r < 0)
			return r;
		hb->size = (uint64_t)MK_HB_BLOCKS << m->bits;
	}

	/* the orphan directories */
	for (unsigned s = 0; s < m->slots; s++) {
		struct mk_inode *in = &m->sys[O2_SYS_ORPHAN_DIR][s];

		if (!m->inline_data) {
			r = raw_extent(m, in, 1);
			if (r < 0)
				return r;
		}
		r = dir_init(m, &m->orphand[s], in, m->inline_data, m->bpc);
		if (r == 0)
			r = raw_add(m, &m->orphand[s], ".", in->blkno, O2_FT_DIR);
		if (r == 0)
			r = raw_add(m, &m->orphand[s], "..", m->sysdir.blkno, O2_FT_DIR);
		if (r < 0)
			return r;
	}
	return 0;
}

static uint32_t clusters_in_blocks(const struct mk *m, uint32_t blocks)
{
	return (blocks + m->bpc - 1) / m->bpc;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = cpu_le32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = cpu_le64(v);
	memcpy(p, &v, 8);
}

static int qglobal_grow(struct mk *m, struct mk_quota *q, struct mk_inode *gi, uint32_t *ret_blk)
{
	uint8_t *n;

	if (c2b(m, gi->clusters) == q->nblocks) {
		int r = ino_extend(m, gi, 1);

		if (r < 0)
			return r;
	}
	n = o2_realloc(q->blocks, (size_t)(q->nblocks + 1) * m->bs);
	if (!n)
		return fail(m, -ENOMEM, "out of memory");
	q->blocks = n;
	memset(q->blocks + (size_t)q->nblocks * m->bs, 0, m->bs);
	*ret_blk = q->nblocks++;
	gi->size = (uint64_t)q->nblocks << m->bits;
	return 0;
}

/*
 * Quota files, as libocfs2 formats them: each global file gets a header
 * block and an empty tree root, each slot a local file of a header and an
 * empty chunk; then the usage found (only the root directory exists yet)
 * goes into the global files' trees, one new block per level.
 */
static int build_quota(struct mk *m)
{
	unsigned epb = (m->bs - MK_QBLK_RESERVED) / 4, depth = 1;
	uint64_t entries = epb;
	int r;

	for (unsigned t = 0; t < 2; t++) {
		struct mk_inode *gi = &m->sys[O2_SYS_USER_QUOTA + t][0];
		struct mk_quota *q = &m->q[t];
		uint8_t *b;

		if (!m->quota[t])
			continue;
		r = ino_extend(m, gi, clusters_in_blocks(m, MK_GLOBAL_QF_BLOCKS));
		if (r < 0)
			return r;
		gi->size = (uint64_t)MK_GLOBAL_QF_BLOCKS << m->bits;
		q->blocks = o2_calloc(MK_GLOBAL_QF_BLOCKS, m->bs);
		if (!q->blocks)
			return fail(m, -ENOMEM, "out of memory");
		q->nblocks = MK_GLOBAL_QF_BLOCKS;
		for (unsigned s = 0; s < m->slots; s++) {
			struct mk_inode *li = &m->sys[O2_SYS_LOCAL_USER_QUOTA + t][s];

			r = ino_extend(m, li, clusters_in_blocks(m, MK_LOCAL_QF_BLOCKS));
			if (r < 0)
				return r;
			li->size = (uint64_t)MK_LOCAL_QF_BLOCKS << m->bits;
			li->data = o2_calloc(MK_LOCAL_QF_BLOCKS, m->bs);
			if (!li->data)
				return fail(m, -ENOMEM, "out of memory");
			li->data_len = (size_t)MK_LOCAL_QF_BLOCKS * m->bs;
			b = li->data;
			put32(b + 0, mk_local_qmagic[t]);
			put32(b + 4, 0);     /* version */
			put32(b + 8, 1);     /* dqi_flags: OLQF_CLEAN */
			put32(b + 12, 1);    /* dqi_chunks */
			put32(b + 16, MK_LOCAL_QF_BLOCKS);
		}
	}

	while (entries < (1ull << 32)) {
		entries *= epb;
		depth++;
	}
	for (unsigned t = 0; t < 2; t++) {
		struct mk_inode *gi = &m->sys[O2_SYS_USER_QUOTA + t][0];
		struct mk_quota *q = &m->q[t];
		uint32_t parent = 1, blk = 0;
		uint8_t *leaf;

		if (!m->quota[t])
			continue;
		/* id 0 takes slot 0 at every level of the tree */
		for (unsigned level = 1; level <= depth; level++) {
			r = qglobal_grow(m, q, gi, &blk);
			if (r < 0)
				return r;
			put32(q->blocks + (size_t)parent * m->bs, blk);
			parent = blk;
		}
		leaf = q->blocks + (size_t)blk * m->bs;
		leaf[8] = 1; /* dqdh_entries; the usage of id 0 comes in quota_usage() */
		q->free_entry = blk;

		/* the header block: magic, version, then struct ocfs2_global_disk_dqinfo */
		put32(q->blocks + 0, mk_global_qmagic[t]);
		put32(q->blocks + 4, 0);
		put32(q->blocks + 8, MK_QUOTA_GRACE);	 /* dqi_bgrace */
		put32(q->blocks + 12, MK_QUOTA_GRACE); /* dqi_igrace */
		put32(q->blocks + 16, MK_QUOTA_SYNC_MS);
		put32(q->blocks + 20, q->nblocks);	 /* dqi_blocks */
		put32(q->blocks + 24, 0);		 /* dqi_free_blk */
		put32(q->blocks + 28, q->free_entry);	 /* dqi_free_entry */
		gi->data = q->blocks;
		gi->data_len = (size_t)q->nblocks * m->bs;
		q->blocks = NULL;
	}
	return 0;
}

/*
 * The usage of uid 0 and gid 0, who own the root directory and lost+found
 * (mkfs.ocfs2 counts the root only: it makes lost+found after the quota
 * files and does not account for it).
 */
static void quota_usage(struct mk *m)
{
	uint64_t space = (uint64_t)(m->root.clusters + m->lf.clusters) << m->cbits;

	for (unsigned t = 0; t < 2; t++) {
		struct mk_inode *gi = &m->sys[O2_SYS_USER_QUOTA + t][0];
		uint8_t *dq;

		if (!m->quota[t])
			continue;
		/* struct ocfs2_global_disk_dqblk after the 16-byte leaf header */
		dq = gi->data + (size_t)m->q[t].free_entry * m->bs + 16;
		put64(dq + 0x18, 2);	 /* dqb_curinodes */
		put64(dq + 0x30, space); /* dqb_curspace */
	}
}

static int build_lost_found(struct mk *m)
{
	struct mk_inode *ia = &m->sys[O2_SYS_INODE_ALLOC][0], *lf = &m->lf;
	struct mk_sgroup *g;
	uint64_t blkno;
	int r = sub_alloc(m, ia, &blkno, &g);

	if (r < 0)
		return r;
	ino_init(m, lf, 040755, 0);
	lf->blkno = blkno;
	lf->slot = 0;
	lf->bit = (uint16_t)(blkno - g->blkno);
	lf->loc = g->blkno;
	lf->links = 2;
	if (!m->inline_data) {
		r = ino_extend(m, lf, 1);
		if (r < 0)
			return r;
	}
	r = dir_init(m, &m->lfd, lf, m->inline_data, m->bpc);
	if (r == 0)
		r = dir_add(m, &m->lfd, ".", lf->blkno, O2_FT_DIR, false);
	if (r == 0)
		r = dir_add(m, &m->lfd, "..", m->root.blkno, O2_FT_DIR, false);
	if (r == 0 && m->dx && !m->inline_data)
		r = dir_index(m, &m->lfd);
	if (r < 0)
		return r;
	m->root.links++;
	return dir_add(m, &m->rootd, "lost+found", lf->blkno, O2_FT_DIR, false);
}

static int build_lib(struct mk *m)
{
	int r;

	if (m->f.compat & O2_FEATURE_COMPAT_BACKUP_SB) {
		for (unsigned i = 0; i < 6; i++) {
			uint64_t blkno = ((1ull << 30) << (2 * i)) >> m->bits;

			if (blkno >= m->blocks)
				break;
			r = gg_mark(m, (uint32_t)(blkno >> (m->cbits - m->bits)));
			if (r < 0)
				return r;
			m->backup[m->nbackups++] = blkno;
		}
	}
	for (unsigned s = 0; s < m->slots; s++) {
		struct mk_inode *j = &m->sys[O2_SYS_JOURNAL][s];

		r = ino_extend(m, j, (uint32_t)(m->journal_bytes >> m->cbits));
		if (r < 0)
			return r;
		j->size = (uint64_t)j->clusters << m->cbits;
	}
	for (unsigned s = 0; s < m->slots; s++)
		for (uint32_t n = 0; n < m->extalloc_clusters; n += m->sb_cpg) {
			r = sub_add_group(m, &m->sys[O2_SYS_EXTENT_ALLOC][s]);
			if (r < 0)
				return r;
		}
	{
		struct mk_inode *sm = &m->sys[O2_SYS_SLOT_MAP][0];
		uint32_t bytes = m->slots * (m->extended_slotmap ? 8u : 2u);

		r = ino_extend(m, sm, bytes_to_clusters(m, bytes));
		if (r < 0)
			return r;
		sm->size = (uint64_t)sm->clusters << m->cbits;
		sm->data_len = sm->size;
		sm->data = o2_malloc(sm->data_len);
		if (!sm->data)
			return fail(m, -ENOMEM, "out of memory");
		/* an empty map over the whole allocation: legacy slots say 0xFFFF */
		memset(sm->data, m->extended_slotmap ? 0 : 0xFF, sm->data_len);
	}
	if (m->quota[0] || m->quota[1]) {
		r = build_quota(m);
		if (r < 0)
			return r;
	}
	if (m->dx && !m->inline_data) {
		r = dir_index(m, &m->rootd);
		for (unsigned s = 0; r == 0 && s < m->slots; s++)
			r = dir_index(m, &m->orphand[s]);
		if (r < 0)
			return r;
	}
	r = build_lost_found(m);
	if (r < 0)
		return r;
	/*
	 * mkfs.ocfs2 leaves a block-based system directory unindexed, which
	 * fsck.ocfs2 reports (DX_TREE_MISSING): index it, last.
	 */
	if (m->dx && !m->sysd.inl) {
		r = dir_index(m, &m->sysd);
		if (r < 0)
			return r;
	}
	r = dx_finish(m, &m->rootd);
	if (r == 0)
		r = dx_finish(m, &m->sysd);
	for (unsigned s = 0; r == 0 && s < m->slots; s++)
		r = dx_finish(m, &m->orphand[s]);
	if (r == 0)
		r = dx_finish(m, &m->lfd);
	if (r < 0)
		return r;
	quota_usage(m);
	return 0;
}

/* ---------------------------------------------------------------- writing */

static void mk_progress(struct mk *m)
{
	unsigned total, done;

	if (!m->progress || m->dry)
		return;
	total = (unsigned)(m->planned >> MK_UNIT_SHIFT) + 1;
	done = (unsigned)(m->written >> MK_UNIT_SHIFT);
	if (done > total)
		done = total;
	if (done != m->last_unit || done == total) {
		m->last_unit = done;
		m->progress(m->progress_arg, done, total);
	}
}

static int wr_bytes(struct mk *m, uint64_t off, const void *buf, size_t len)
{
	int r;

	if (m->dry) {
		m->planned += len;
		return 0;
	}
	r = o2_blockdev_write(m->dev, buf, len, off);
	if (r < 0)
		return fail(m, r, "writing %zu bytes at offset %llu: %s", len,
			    (unsigned long long)off, strerror(-r));
	m->written += len;
	mk_progress(m);
	return 0;
}

static int wr_zero(struct mk *m, uint64_t off, uint64_t len)
{
	while (len) {
		size_t n = len > MK_CLEAR_CHUNK ? MK_CLEAR_CHUNK : (size_t)len;
		int r = wr_bytes(m, off, m->zero, n);

		if (r < 0)
			return r;
		off += n;
		len -= n;
	}
	return 0;
}

/* One metadata block: with a block check at check_off on metaecc volumes. */
static int wr_meta(struct mk *m, uint64_t blkno, uint8_t *b, size_t check_off)
{
	if (m->metaecc && check_off != SIZE_MAX)
		o2_blockcheck_compute(b, m->bs, b + check_off);
	return wr_bytes(m, blkno << m->bits, b, m->bs);
}

static int wr_extents_zero(struct mk *m, const struct mk_inode *in)
{
	for (unsigned i = 0; i < in->next; i++) {
		int r = wr_zero(m, in->ext[i].blkno << m->bits,
				(uint64_t)in->ext[i].clusters << m->cbits);

		if (r < 0)
			return r;
	}
	return 0;
}

static void fill_chain(const struct mk_inode *in, struct o2_chain_list *cl)
{
	const struct mk_chain *ch = &in->chain;

	cl->cl_cpg = cpu_le16(ch->cpg);
	cl->cl_bpc = cpu_le16(ch->bpc);
	cl->cl_count = cpu_le16(ch->count);
	cl->cl_next_free_rec = cpu_le16(ch->next_free);
	for (unsigned c = 0; c < ch->next_free; c++) {
		uint32_t free = 0, total = 0;

		for (unsigned i = 0; i < ch->ngroups; i++)
			if (ch->groups[i]->chain == c) {
				free += ch->groups[i]->free;
				total += ch->groups[i]->bits;
			}
		cl->cl_recs[c].c_free = cpu_le32(free);
		cl->cl_recs[c].c_total = cpu_le32(total);
		cl->cl_recs[c].c_blkno = cpu_le64(chain_head(ch, c));
	}
}

static void fill_global_chain(struct mk *m, struct o2_chain_list *cl)
{
	cl->cl_cpg = cpu_le16((uint16_t)(8 * gbitmap_bytes(m)));
	cl->cl_bpc = cpu_le16(1);
	cl->cl_count = cpu_le16((uint16_t)m->grecs);
	cl->cl_next_free_rec = cpu_le16((uint16_t)m->gchains);
	for (unsigned c = 0; c < m->gchains; c++) {
		uint32_t free = 0, total = 0;

		for (uint32_t g = c; g < m->ngroups; g += m->grecs) {
			free += m->gg[g].free;
			total += m->gg[g].bits;
		}
		cl->cl_recs[c].c_free = cpu_le32(free);
		cl->cl_recs[c].c_total = cpu_le32(total);
		cl->cl_recs[c].c_blkno = cpu_le64(gg_blkno(m, c));
	}
}

static void build_inode(struct mk *m, const struct mk_inode *in, uint8_t *b)
{
	struct o2_dinode *di = (struct o2_dinode *)b;

	memset(b, 0, m->bs);
	memcpy(di->i_signature, O2_SIG_INODE, sizeof(O2_SIG_INODE));
	di->i_generation = cpu_le32(m->gen);
	di->i_fs_generation = cpu_le32(m->gen);
	di->i_suballoc_slot = cpu_le16(in->slot);
	di->i_suballoc_bit = cpu_le16(in->bit);
	di->i_suballoc_loc = cpu_le64(in->loc);
	di->i_clusters = cpu_le32(in->clusters);
	di->i_size = cpu_le64(in->size);
	di->i_mode = cpu_le16(in->mode);
	di->i_links_count = cpu_le16(in->links);
	di->i_flags = cpu_le32(in->flags);
	di->i_atime = cpu_le64((uint64_t)in->atime);
	di->i_ctime = cpu_le64((uint64_t)in->ctime);
	di->i_mtime = cpu_le64((uint64_t)in->mtime);
	di->i_blkno = cpu_le64(in->blkno);
	di->i_dyn_features = cpu_le16(in->dyn);
	di->i_dx_root = cpu_le64(in->dx_root);
	if (in->flags & O2_FL_BITMAP) {
		di->id1.bitmap1.i_used = cpu_le32(in->kind == MK_GLOBAL_BITMAP ? m->gused : in->bm_used);
		di->id1.bitmap1.i_total = cpu_le32(in->kind == MK_GLOBAL_BITMAP ? m->clusters
										 : in->bm_total);
	}
	switch (in->kind) {
	case MK_EXTENTS:
		di->id2.i_list.count = cpu_le16((uint16_t)o2_extent_recs_per_inode(m->bs));
		di->id2.i_list.next_free_rec = cpu_le16((uint16_t)in->next);
		for (unsigned i = 0; i < in->next; i++) {
			struct o2_extent_rec *er = &di->id2.i_list.recs[i];

			er->cpos = cpu_le32(in->ext[i].cpos);
			er->leaf_clusters = cpu_le16((uint16_t)in->ext[i].clusters);
			er->blkno = cpu_le64(in->ext[i].blkno);
		}
		break;
	case MK_INLINE:
		di->id2.i_data.id_count = cpu_le16((uint16_t)in->dir->cap);
		memcpy(di->id2.i_data.id_data, in->dir->buf, in->dir->cap);
		break;
	case MK_CHAIN:
		fill_chain(in, &di->id2.i_chain);
		break;
	case MK_GLOBAL_BITMAP:
		fill_global_chain(m, &di->id2.i_chain);
		break;
	case MK_LOCAL_ALLOC:
		di->id2.i_lab.la_size = cpu_le16((uint16_t)o2_local_alloc_max(m->bs));
		break;
	case MK_TRUNCATE:
		di->id2.i_dealloc.tl_count = cpu_le16((uint16_t)o2_truncate_recs_per_inode(m->bs));
		break;
	}
}

static int wr_inode(struct mk *m, const struct mk_inode *in)
{
	build_inode(m, in, m->blk);
	return wr_meta(m, in->blkno, m->blk, offsetof(struct o2_dinode, i_check));
}

static void build_group(struct mk *m, uint8_t *b, uint64_t blkno, uint16_t size, uint32_t bits,
			uint32_t free, uint16_t chain, uint64_t next, uint64_t parent,
			const uint8_t *map)
{
	struct o2_group_desc *gd = (struct o2_group_desc *)b;

	memset(b, 0, m->bs);
	memcpy(gd->bg_signature, O2_SIG_GROUP, sizeof(O2_SIG_GROUP));
	gd->bg_size = cpu_le16(size);
	gd->bg_bits = cpu_le16((uint16_t)bits);
	gd->bg_free_bits_count = cpu_le16((uint16_t)free);
	gd->bg_chain = cpu_le16(chain);
	gd->bg_generation = cpu_le32(m->gen);
	gd->bg_next_group = cpu_le64(next);
	gd->bg_parent_dinode = cpu_le64(parent);
	gd->bg_blkno = cpu_le64(blkno);
	if (map)
		memcpy(gd->bg_bitmap, map, (bits + 7) / 8);
	else
		gd->bg_bitmap[0] = 1;
}

static int wr_sub_groups(struct mk *m, const struct mk_inode *in)
{
	for (unsigned i = 0; i < in->chain.ngroups; i++) {
		const struct mk_sgroup *g = in->chain.groups[i];
		int r;

		build_group(m, m->blk, g->blkno, g->size, g->bits, g->free, g->chain, g->next,
			    in->blkno, g->map);
		r = wr_meta(m, g->blkno, m->blk, offsetof(struct o2_group_desc, bg_check));
		if (r < 0)
			return r;
	}
	return 0;
}

static int wr_global_groups(struct mk *m)
{
	uint64_t parent = m->sys[O2_SYS_GLOBAL_BITMAP][0].blkno;

	for (uint32_t g = 0; g < m->ngroups; g++) {
		uint64_t next = g + m->grecs < m->ngroups ? gg_blkno(m, g + m->grecs) : 0;
		int r;

		build_group(m, m->blk, gg_blkno(m, g), (uint16_t)gbitmap_bytes(m), m->gg[g].bits,
			    m->gg[g].free, (uint16_t)(g % m->grecs), next, parent, m->gg[g].map);
		r = wr_meta(m, gg_blkno(m, g), m->blk, offsetof(struct o2_group_desc, bg_check));
		if (r < 0)
			return r;
	}
	return 0;
}

/* The dx root and, for an index too big for it, the leaves. */
static int wr_dx(struct mk *m, const struct mk_dir *d, uint64_t free_head)
{
	struct o2_dx_root_block *dr = (struct o2_dx_root_block *)m->blk;
	int r;

	memset(m->blk, 0, m->bs);
	memcpy(dr->dr_signature, O2_SIG_DXROOT, sizeof(O2_SIG_DXROOT));
	dr->dr_suballoc_slot = cpu_le16(0);
	dr->dr_suballoc_bit = cpu_le16(d->dx_bit);
	dr->dr_fs_generation = cpu_le32(m->gen);
	dr->dr_blkno = cpu_le64(d->dx_blkno);
	dr->dr_dir_blkno = cpu_le64(d->ino->blkno);
	dr->dr_num_entries = cpu_le32(d->ndx);
	dr->dr_free_blk = cpu_le64(free_head);
	dr->dr_suballoc_loc = cpu_le64(d->dx_loc);
	if (!d->dxc) {
		dr->dr_flags = O2_DX_INLINE;
		dr->dr_entries.de_count = cpu_le16((uint16_t)o2_dx_entries_per_root(m->bs));
		dr->dr_entries.de_num_used = cpu_le16((uint16_t)d->ndx);
		for (unsigned i = 0; i < d->ndx; i++) {
			dr->dr_entries.de_entries[i].dx_major_hash = cpu_le32(d->dx[i].major);
			dr->dr_entries.de_entries[i].dx_minor_hash = cpu_le32(d->dx[i].minor);
			dr->dr_entries.de_entries[i].dx_dirent_blk = cpu_le64(d->dx[i].blk);
		}
		return wr_meta(m, d->dx_blkno, m->blk, offsetof(struct o2_dx_root_block, dr_check));
	}
	dr->dr_clusters = cpu_le32(d->ndxc);
	dr->dr_list.count = cpu_le16((uint16_t)o2_extent_recs_per_dx_root(m->bs));
	dr->dr_list.next_free_rec = cpu_le16((uint16_t)d->ndxc);
	for (unsigned c = 0; c < d->ndxc; c++) {
		dr->dr_list.recs[c].cpos = cpu_le32(d->dxc[c].cpos);
		dr->dr_list.recs[c].leaf_clusters = cpu_le16(1);
		dr->dr_list.recs[c].blkno = cpu_le64(d->dxc[c].blkno);
	}
	r = wr_meta(m, d->dx_blkno, m->blk, offsetof(struct o2_dx_root_block, dr_check));
	for (unsigned c = 0; r == 0 && c < d->ndxc; c++) {
		const struct mk_dxcluster *cl = &d->dxc[c];

		for (unsigned b = 0; r == 0 && b < m->bpc; b++) {
			struct o2_dx_leaf *lf = (struct o2_dx_leaf *)m->blk;
			unsigned n = 0;

			memset(m->blk, 0, m->bs);
			memcpy(lf->dl_signature, O2_SIG_DXLEAF, sizeof(O2_SIG_DXLEAF));
			lf->dl_blkno = cpu_le64(cl->blkno + b);
			lf->dl_fs_generation = cpu_le32(m->gen);
			lf->dl_list.de_count = cpu_le16((uint16_t)o2_dx_entries_per_leaf(m->bs));
			for (unsigned i = cl->first; i < cl->first + cl->count; i++) {
				const struct mk_dxent *e = &d->dx[i];

				if ((e->minor & (m->bpc - 1)) != b)
					continue;
				lf->dl_list.de_entries[n].dx_major_hash = cpu_le32(e->major);
				lf->dl_list.de_entries[n].dx_minor_hash = cpu_le32(e->minor);
				lf->dl_list.de_entries[n].dx_dirent_blk = cpu_le64(e->blk);
				n++;
			}
			lf->dl_list.de_num_used = cpu_le16((uint16_t)n);
			r = wr_meta(m, cl->blkno + b, m->blk, offsetof(struct o2_dx_leaf, dl_check));
		}
	}
	return r;
}

static int wr_dir(struct mk *m, struct mk_dir *d)
{
	uint64_t free_head = 0;
	uint64_t total;
	int r;

	if (d->inl)
		return 0;
	for (unsigned b = 0; b < d->nblocks; b++) {
		uint64_t pblk = ino_pblk(m, d->ino, b);

		memcpy(m->blk, d->buf + (size_t)b * m->bs, m->bs);
		if (d->trailer) {
			struct o2_dir_trailer *t =
				(struct o2_dir_trailer *)(m->blk + m->bs - MK_TRAILER_SIZE);

			if (d->indexed) {
				unsigned hole = dir_block_hole(m, d, m->blk);

				t->db_free_rec_len = cpu_le16((uint16_t)hole);
				if (hole) {
					t->db_free_next = cpu_le64(free_head);
					free_head = pblk;
				}
			}
			r = wr_meta(m, pblk, m->blk, m->bs - MK_TRAILER_SIZE +
						     offsetof(struct o2_dir_trailer, db_check));
		} else {
			r = wr_bytes(m, pblk << m->bits, m->blk, m->bs);
		}
		if (r < 0)
			return r;
	}
	/* the rest of the directory's clusters, past i_size */
	total = c2b(m, d->ino->clusters);
	for (uint64_t b = d->nblocks; b < total; b++) {
		r = wr_zero(m, ino_pblk(m, d->ino, b) << m->bits, m->bs);
		if (r < 0)
			return r;
	}
	if (d->indexed)
		return wr_dx(m, d, free_head);
	return 0;
}

/* File contents kept in memory (slot map, quota files) over the file's extents. */
static int wr_data(struct mk *m, const struct mk_inode *in)
{
	bool quota = in->flags & O2_FL_QUOTA;

	for (size_t off = 0; off < in->data_len; off += m->bs) {
		uint64_t pblk = ino_pblk(m, in, off >> m->bits);
		int r;

		if (!pblk)
			return fail(m, -EIO, "internal error: inode %llu has no block %zu",
				    (unsigned long long)in->blkno, off >> m->bits);
		memcpy(m->blk, in->data + off, m->bs);
		r = wr_meta(m, pblk, m->blk, quota ? m->bs - MK_QBLK_RESERVED : SIZE_MAX);
		if (r < 0)
			return r;
	}
	return 0;
}

static int wr_journal(struct mk *m, const struct mk_inode *j)
{
	struct jbd2_superblock *sb = (struct jbd2_superblock *)m->blk;
	int r = wr_extents_zero(m, j);

	if (r < 0)
		return r;
	memset(m->blk, 0, m->bs);
	sb->s_header.h_magic = cpu_be32(JBD2_MAGIC);
	sb->s_header.h_blocktype = cpu_be32(JBD2_SUPERBLOCK_V2);
	sb->s_blocksize = cpu_be32(m->bs);
	sb->s_maxlen = cpu_be32((uint32_t)c2b(m, j->clusters));
	/* the JBD2 superblock is 1024 bytes: two blocks of 512 */
	sb->s_first = cpu_be32(m->bs == 512 ? 2 : 1);
	sb->s_start = cpu_be32(1);
	sb->s_sequence = cpu_be32(1);
	sb->s_nr_users = cpu_be32(1);
	if (m->info->journal64)
		sb->s_feature_incompat = cpu_be32(JBD2_INCOMPAT_64BIT);
	memcpy(sb->s_uuid, m->info->uuid, 16);
	return wr_bytes(m, j->ext[0].blkno << m->bits, m->blk, m->bs);
}

static void build_super(struct mk *m, uint8_t *b, uint64_t blkno)
{
	struct o2_dinode *di = (struct o2_dinode *)b;
	struct o2_super_block *sb = &di->id2.i_super;
	const struct o2_mkfs_info *info = m->info;

	memset(b, 0, m->bs);
	memcpy(di->i_signature, O2_SIG_SUPER, sizeof(O2_SIG_SUPER));
	di->i_generation = cpu_le32(m->gen);
	di->i_fs_generation = cpu_le32(m->gen);
	di->i_suballoc_slot = cpu_le16(MK_INVALID_SLOT);
	di->i_suballoc_bit = cpu_le16(0xFFFF);
	di->i_clusters = cpu_le32(m->clusters);
	di->i_flags = cpu_le32(O2_FL_VALID | O2_FL_SYSTEM | O2_FL_SUPER);
	di->i_ctime = cpu_le64((uint64_t)m->now);
	di->i_mtime = cpu_le64((uint64_t)m->now);
	di->i_blkno = cpu_le64(blkno);
	sb->s_major_rev_level = cpu_le16(0);
	sb->s_minor_rev_level = cpu_le16(MK_MINOR_REV);
	sb->s_max_mnt_count = cpu_le16(MK_MAX_MNT_COUNT);
	sb->s_lastcheck = cpu_le64((uint64_t)m->now);
	sb->s_feature_compat = cpu_le32(m->f.compat);
	sb->s_feature_incompat = cpu_le32(m->f.incompat);
	sb->s_feature_ro_compat = cpu_le32(m->f.ro_compat);
	sb->s_root_blkno = cpu_le64(m->root.blkno);
	sb->s_system_dir_blkno = cpu_le64(m->sysdir.blkno);
	sb->s_blocksize_bits = cpu_le32(m->bits);
	sb->s_clustersize_bits = cpu_le32(m->cbits);
	sb->s_max_slots = cpu_le16((uint16_t)m->slots);
	sb->s_first_cluster_group = cpu_le64(m->fcg_blkno);
	memcpy(sb->s_label, info->label, strlen(info->label));
	memcpy(sb->s_uuid, info->uuid, 16);
	if (info->stack[0]) {
		memcpy(sb->s_cluster_info.ci_stack, info->stack, 4);
		memcpy(sb->s_cluster_info.ci_cluster, info->cluster_name, strlen(info->cluster_name));
	}
	if (m->f.incompat & O2_FEATURE_INCOMPAT_XATTR)
		sb->s_xattr_inline_size = cpu_le16(MK_XATTR_INLINE_SIZE);
	sb->s_uuid_hash = cpu_le32(info->uuid_hash);
	for (unsigned i = 0; i < 3; i++)
		sb->s_dx_seed[i] = cpu_le32(info->dx_seed[i]);
}

/* Sectors 0-1 of the first two blocks: what OCFS1 tools read. */
static int wr_decoy(struct mk *m)
{
	size_t len = (size_t)2 << m->bits;
	uint8_t *b = o2_malloc(len);
	static const char msg[] = "this is an ocfs2 volume";
	int r;

	if (!b)
		return fail(m, -ENOMEM, "out of memory");
	memset(b, 2, len);
	memcpy(b + 0x08, msg, sizeof(msg));	/* ocfs1_vol_disk_hdr.signature */
	memcpy(b + 0x88, msg, sizeof(msg));	/* .mount_point */
	memcpy(b + 512 + 0x30, msg, sizeof(msg)); /* ocfs1_vol_label.label */
	memcpy(b + 512 + 0x84, msg, sizeof(msg)); /* .cluster_name */
	r = wr_bytes(m, 0, b, len);
	free(b);
	return r;
}

static int wr_flush(struct mk *m)
{
	int r;

	if (m->dry)
		return 0;
	r = o2_blockdev_flush(m->dev);
	if (r < 0)
		return fail(m, r, "flushing the device: %s", strerror(-r));
	return 0;
}

static int write_all(struct mk *m)
{
	uint64_t vol = (uint64_t)m->clusters << m->cbits;
	uint64_t clear = vol < MK_CLEAR_CHUNK ? vol : MK_CLEAR_CHUNK;
	int r;

#define TRY(x)                    \
	do {                      \
		r = (x);          \
		if (r < 0)        \
			return r; \
	} while (0)

	/* wipe old signatures at both ends first, then everything else */
	TRY(wr_zero(m, 0, clear));
	TRY(wr_zero(m, vol - clear, clear));
	TRY(wr_zero(m, m->sysg->blkno << m->bits, (uint64_t)m->sysg->bits << m->bits));
	TRY(wr_extents_zero(m, &m->sys[O2_SYS_HEARTBEAT][0]));
	for (unsigned i = 0; i < m->nbackups; i++) {
		uint64_t c = m->backup[i] >> (m->cbits - m->bits);

		TRY(wr_zero(m, c << m->cbits, m->cs));
	}
	for (unsigned s = 0; s < m->slots; s++)
		TRY(wr_journal(m, &m->sys[O2_SYS_JOURNAL][s]));

	TRY(wr_global_groups(m));
	for (unsigned t = 0; t < O2_SYS_COUNT; t++) {
		if (sys_skip(m, (enum o2_sysfile)t))
			continue;
		for (unsigned j = 0; j < sys_count(m, (enum o2_sysfile)t); j++) {
			struct mk_inode *in = &m->sys[t][j];

			if (in->kind == MK_CHAIN)
				TRY(wr_sub_groups(m, in));
			TRY(wr_inode(m, in));
			if (in->data)
				TRY(wr_data(m, in));
		}
	}
	TRY(wr_inode(m, &m->root));
	TRY(wr_inode(m, &m->sysdir));
	TRY(wr_inode(m, &m->lf));
	TRY(wr_dir(m, &m->rootd));
	TRY(wr_dir(m, &m->sysd));
	for (unsigned s = 0; s < m->slots; s++)
		TRY(wr_dir(m, &m->orphand[s]));
	TRY(wr_dir(m, &m->lfd));
	TRY(wr_flush(m));

	/* the superblock last: until it is there, this is no volume */
	for (unsigned i = 0; i < m->nbackups; i++) {
		build_super(m, m->blk, m->backup[i]);
		TRY(wr_meta(m, m->backup[i], m->blk, offsetof(struct o2_dinode, i_check)));
	}
	TRY(wr_decoy(m));
	build_super(m, m->blk, O2_SUPER_BLKNO);
	TRY(wr_meta(m, O2_SUPER_BLKNO, m->blk, offsetof(struct o2_dinode, i_check)));
	TRY(wr_flush(m));
#undef TRY
	return 0;
}

/* ---------------------------------------------------------------- entry points */

static int get_random(struct mk *m, void *buf, size_t len)
{
	uint8_t *p = buf;

	if (m->o->random) {
		int r = m->o->random(m->o->random_arg, buf, len);

		if (r < 0)
			return fail(m, r, "getting random bytes: %s", strerror(-r));
		return 0;
	}
	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(m, -errno, "getrandom: %s", strerror(errno));
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int64_t get_time(const struct mk *m)
{
	struct timespec ts;

	if (m->o->now_ns)
		return (int64_t)(m->o->now_ns(m->o->clock_arg) / 1000000000ull);
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

static uint32_t uuid_hash(const uint8_t *u)
{
	uint32_t h = 0;

	for (unsigned i = 0; i < 16; i++)
		h = (h << 5) ^ (h >> 27) ^ u[i];
	return h;
}

/* The volume's identity: explicit values or random ones. */
static int identity(struct mk *m, bool draw)
{
	const struct o2_mkfs_opts *o = m->o;
	struct o2_mkfs_info *info = m->info;
	int r;

	if (o->have_uuid) {
		memcpy(info->uuid, o->uuid, 16);
	} else if (draw) {
		r = get_random(m, info->uuid, 16);
		if (r < 0)
			return r;
		info->uuid[6] = (uint8_t)((info->uuid[6] & 0x0F) | 0x40);
		info->uuid[8] = (uint8_t)((info->uuid[8] & 0x3F) | 0x80);
	}
	if (o->have_generation) {
		info->generation = o->generation;
	} else if (draw) {
		r = get_random(m, &info->generation, sizeof(info->generation));
		if (r < 0)
			return r;
	}
	if (m->dx) {
		if (o->have_dx_seed) {
			memcpy(info->dx_seed, o->dx_seed, sizeof(info->dx_seed));
		} else if (draw) {
			r = get_random(m, info->dx_seed, sizeof(info->dx_seed));
			if (r < 0)
				return r;
		}
	}
	if (m->dx || (m->f.incompat & O2_FEATURE_INCOMPAT_XATTR))
		info->uuid_hash = uuid_hash(info->uuid);
	m->gen = info->generation;
	m->now = get_time(m);
	info->format_time = m->now;
	m->hashfs.dx_seed[0] = info->dx_seed[0];
	m->hashfs.dx_seed[1] = info->dx_seed[1];
	m->hashfs.dx_seed[2] = info->dx_seed[2];
	m->hashfs.dx_seed[3] = info->uuid_hash;
	return 0;
}

static void dir_free(struct mk_dir *d)
{
	free(d->buf);
	free(d->dx);
	free(d->dxc);
}

static void mk_free(struct mk *m)
{
	for (unsigned t = 0; t < O2_SYS_COUNT; t++) {
		if (!m->sys[t])
			continue;
		for (unsigned j = 0; j < sys_count(m, (enum o2_sysfile)t); j++)
			ino_free(&m->sys[t][j]);
		free(m->sys[t]);
	}
	ino_free(&m->root);
	ino_free(&m->sysdir);
	ino_free(&m->lf);
	dir_free(&m->rootd);
	dir_free(&m->sysd);
	dir_free(&m->lfd);
	if (m->orphand) {
		for (unsigned s = 0; s < m->slots; s++)
			dir_free(&m->orphand[s]);
		free(m->orphand);
	}
	for (unsigned t = 0; t < 2; t++)
		free(m->q[t].blocks);
	if (m->gg) {
		for (uint32_t g = 0; g < m->ngroups; g++)
			free(m->gg[g].map);
		free(m->gg);
	}
	free(m->zero);
	free(m->blk);
}

static void fill_info(struct mk *m)
{
	struct o2_mkfs_info *info = m->info;

	info->root_blkno = m->root.blkno;
	info->system_dir_blkno = m->sysdir.blkno;
	info->first_cluster_group = m->fcg_blkno;
	info->backup_supers = m->nbackups;
	memcpy(info->backup_super_blkno, m->backup, sizeof(m->backup));
	info->used_clusters = m->gused;
}

static int mk_run(struct mk *m, struct o2_blockdev *dev, uint64_t dev_bytes)
{
	int r = resolve(m, dev_bytes);

	if (r < 0)
		return r;
	if (dev && m->bs < dev->sector_size)
		return fail(m, -EINVAL, "block size %u is smaller than the device's sector size %u",
			    m->bs, dev->sector_size);
	r = identity(m, dev != NULL);
	if (r < 0)
		return r;
	r = build_raw(m);
	if (r == 0)
		r = build_lib(m);
	if (r == -ENOSPC) {
		char why[160];

		snprintf(why, sizeof(why), "%s", m->err ? m->err : "");
		return fail(m, r, "the device is too small: %llu bytes cannot hold %u slots with "
			    "%llu-byte journals and %u-byte clusters (%s)",
			    (unsigned long long)((uint64_t)m->clusters << m->cbits), m->slots,
			    (unsigned long long)m->journal_bytes, m->cs, why);
	}
	if (r < 0)
		return r;
	fill_info(m);
	if (!dev)
		return 0;

	m->dev = dev;
	m->zero = o2_calloc(1, MK_CLEAR_CHUNK);
	m->blk = o2_malloc(m->bs);
	if (!m->zero || !m->blk)
		return fail(m, -ENOMEM, "out of memory");
	m->dry = true;
	r = write_all(m);
	if (r < 0)
		return r;
	/* the last moment a caller may change its mind: nothing is written yet */
	if (m->o->begin_writing && m->o->begin_writing(m->o->begin_arg))
		return fail(m, -ECANCELED, "cancelled before anything was written");
	m->dry = false;
	if (m->progress)
		m->progress(m->progress_arg, 0, (unsigned)(m->planned >> MK_UNIT_SHIFT) + 1);
	r = write_all(m);
	if (r == 0 && m->progress) {
		unsigned total = (unsigned)(m->planned >> MK_UNIT_SHIFT) + 1;

		m->progress(m->progress_arg, total, total);
	}
	return r;
}

int o2_mkfs_plan(uint64_t dev_bytes, const struct o2_mkfs_opts *opts, struct o2_mkfs_info *ret,
		 char *errbuf, size_t errlen)
{
	struct o2_mkfs_info info = { 0 };
	struct mk m = { .o = opts, .info = &info, .err = errbuf, .errlen = errlen };
	int r;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	r = mk_run(&m, NULL, dev_bytes);
	mk_free(&m);
	if (r == 0 && ret)
		*ret = info;
	return r;
}

int o2_mkfs(struct o2_blockdev *dev, const struct o2_mkfs_opts *opts, o2_mkfs_progress_fn progress,
	    void *progress_arg, struct o2_mkfs_info *ret_info, char *errbuf, size_t errlen)
{
	struct o2_mkfs_info info = { 0 };
	struct mk m = { .o = opts,
			.info = &info,
			.err = errbuf,
			.errlen = errlen,
			.progress = progress,
			.progress_arg = progress_arg };
	int r;

	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (dev->read_only)
		return o2_errbuf_set(errbuf, errlen, -EROFS, "the device is read-only");
	r = mk_run(&m, dev, dev->size);
	mk_free(&m);
	if (r == 0 && ret_info)
		*ret_info = info;
	return r;
}
