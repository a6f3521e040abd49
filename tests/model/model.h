/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Model-based testing of the fscore write path.
 *
 * The model is an in-memory tree of what /TOP must hold: every inode with
 * its type, permission bits, owner, link count and contents, every
 * directory with its entries.  The driver (test_model.c) applies the same
 * random operation to fscore and to the model; the model says which results
 * are allowed (success, or one of a set of -errno values when several
 * checks fail at once and the order in which a filesystem applies them is
 * not fixed).  After each batch the judges (judge.c) compare the volume
 * with the model through fscore's read API, through fsck.ocfs2 and through
 * debugfs.ocfs2 (rdump and stat).
 */
#ifndef O2_MODEL_H
#define O2_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "o2fs/o2fs.h"

/* ---- randomness: splitmix64, seeded, reproducible ---- */

struct rng {
	uint64_t s;
};

uint64_t rng_next(struct rng *r);
/* Uniform in [0, n); 0 when n == 0. */
uint64_t rng_below(struct rng *r, uint64_t n);
/* Uniform in [lo, hi]. */
uint64_t rng_range(struct rng *r, uint64_t lo, uint64_t hi);
/* True with probability pct/100. */
bool rng_pct(struct rng *r, unsigned pct);
/* Fill buf with the byte stream of seed (the data a write op puts down). */
void rng_fill(uint64_t seed, void *buf, size_t len);

/* ---- the model tree ---- */

enum m_type { M_REG, M_DIR, M_LNK, M_FIFO, M_SOCK, M_CHR };

struct m_inode;

struct m_dirent {
	char *name;
	size_t len;
	struct m_inode *ino;
};

/* An extended attribute: type (O2_XATTR_*), the name after its prefix, value. */
struct m_xattr {
	uint8_t type, name_len;
	char name[O2_XATTR_NAME_MAX];
	uint8_t *value;
	size_t size;
};

struct m_inode {
	uint64_t ino; /* fscore's inode number */
	enum m_type type;
	uint16_t perm; /* 07777 bits */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t rdev;
	unsigned open_refs;
	size_t index; /* in model->all */
	/* expected times in ns since the epoch (the volume's fake clock); -1: not known */
	int64_t atime, mtime, ctime;
	/* M_REG */
	uint8_t *data;
	uint64_t size;
	size_t cap;
	uint64_t alloc_end; /* bytes that may hold clusters (>= size after fallocate KEEP_SIZE) */
	unsigned family;    /* reflinks: files that share a refcount tree (0: none) */
	/* M_LNK */
	char *target;
	/* M_DIR */
	struct m_dirent *ents;
	size_t nents, ents_cap;
	struct m_inode *parent;
	/* any type */
	struct m_xattr *xattrs;
	size_t nxattrs;
};

struct model {
	struct m_inode *top;
	struct m_inode **all; /* every live inode: linked ones and open orphans */
	size_t nall, all_cap;
	uint64_t data_bytes; /* sum of regular files' sizes */
	uint32_t cluster_size, block_size;
	bool check_times; /* judge atime/mtime/ctime too */
	int64_t now;	  /* the clock of the operation being applied */
};

void model_init(struct model *m, uint32_t block_size, uint32_t cluster_size);
void model_free(struct model *m);

/* A new inode (linked nowhere yet, nlink 0). */
struct m_inode *model_new_inode(struct model *m, enum m_type type, uint64_t ino, uint16_t perm);
/* Forget an inode: free its memory and drop it from m->all. */
void model_forget(struct model *m, struct m_inode *in);

struct m_dirent *model_lookup(struct m_inode *dir, const char *name, size_t len);
/* Add an entry (no link counting). */
void model_add_entry(struct m_inode *dir, const char *name, size_t len, struct m_inode *in);
/* Remove an entry (no link counting). */
void model_del_entry(struct m_inode *dir, struct m_dirent *de);
/* Whether d is a or lies below a (both directories). */
bool model_is_descendant(const struct m_inode *d, const struct m_inode *a);
/* Number of subdirectories of dir. */
unsigned model_subdirs(const struct m_inode *dir);

/* Times: mtime and ctime, or ctime alone, become the operation's; or unknown. */
void model_touch_mc(const struct model *m, struct m_inode *in);
void model_touch_c(const struct model *m, struct m_inode *in);
void model_times_unknown(struct m_inode *in, bool mtime, bool ctime);

/* Drop one link; forget the inode when no link and no open reference remain. */
void model_drop_link(struct model *m, struct m_inode *in);

/* Regular file contents. */
void model_write(struct model *m, struct m_inode *in, uint64_t off, const void *buf, size_t len);
void model_truncate(struct model *m, struct m_inode *in, uint64_t size);

/* Extended attributes. */
struct m_xattr *model_xattr_find(struct m_inode *in, unsigned type, const char *name, size_t len);
/* Set (replacing) or remove (value NULL) one attribute. */
void model_xattr_set(struct m_inode *in, unsigned type, const char *name, size_t len,
		     const void *value, size_t size);
/* Bytes the inode's attributes take in OCFS2's stores (entries, names, values or roots), but skip. */
size_t model_xattr_bytes(const struct m_inode *in, const struct m_xattr *skip);
/* Bytes one attribute takes in a store. */
size_t model_xattr_entry_bytes(size_t name_len, size_t size);

/* The path of dir entry name in dir below /TOP ("/TOP/a/b"); malloc'd. */
char *model_path(const struct m_inode *dir, const char *name, size_t len);

/* An upper bound of the clusters the model's contents may take. */
uint64_t model_cluster_estimate(const struct model *m);
/* S_IF* type bits for a model type. */
uint16_t model_type_bits(enum m_type t);
/* The dirent type fscore reports (O2_DT_*). */
uint8_t model_dt(enum m_type t);

/* ---- expected results ---- */

/*
 * The set of results an operation may give: success alone (nerr == 0), or
 * any of errs[] (the model has not applied the operation then).
 */
struct expect {
	int errs[6];
	unsigned nerr;
};

void expect_add(struct expect *e, int err);
bool expect_allows(const struct expect *e, int result);
/* "0" or "-17 EEXIST | -39 ENOTEMPTY" into buf. */
const char *expect_str(const struct expect *e, char *buf, size_t len);
/* "-2 (ENOENT)" */
const char *err_str(int err, char *buf, size_t len);

/* ---- the judges (judge.c) ---- */

/* A difference between a quota file's usage and fsck.ocfs2's count. */
struct qdiff {
	unsigned type;
	uint32_t id;
	int64_t space, inodes;
};
#define QDIFF_MAX 16

struct vol {
	char dir[256];	 /* the temporary directory */
	char image[300]; /* dir/vol.img */
	char mkfs_args[200];
	char fsck_fresh[8192]; /* fsck.ocfs2 -fn output of the fresh volume */
	struct o2_blockdev *dev;
	struct o2_fs *fs;
	uint64_t clock_ns;
	uint64_t top_ino;
	bool acl; /* open with O2_OPEN_ACL */
	struct qdiff qbase[QDIFF_MAX]; /* the fresh volume's (vol_quota_baseline) */
	unsigned nqbase;
};

/* Whether mkfs.ocfs2, fsck.ocfs2 and debugfs.ocfs2 can be run. */
bool judge_have_tools(void);
/* mkfs.ocfs2 -q -M local ARGS on a fresh sparse file; records fsck's verdict. */
void vol_make(struct vol *v, const char *name, uint64_t size, const char *mkfs_args);
/* Open read-write (slot 0) with the volume's fake clock; fails the test on error. */
void vol_open(struct vol *v);
/* o2_fs_close, failing the test on an error. */
void vol_close(struct vol *v);
/* Remove the temporary directory unless O2_MODEL_KEEP is set or keep. */
void vol_cleanup(struct vol *v, bool keep);

/*
 * fsck.ocfs2 -fn must exit 0, say "All passes succeeded." and print
 * exactly what it printed for the fresh volume.  Returns NULL or a
 * malloc'd description of the difference.
 */
char *judge_fsck(struct vol *v);

/*
 * Compare the volume with the model through fscore's read API: every
 * directory's entries (o2_dir_iterate and o2_dir_lookup), every inode's
 * type, mode, owner, links, size, data and symlink target, open orphans.
 * Returns NULL or a malloc'd description of the first difference.
 */
/*
 * The quota usage ocfs2d left in the global quota files (the volume
 * closed) against what fsck.ocfs2 -fy counts on a copy; NULL when they
 * differ only as the fresh volume did, or the volume has no quotas.
 */
char *judge_quota(struct vol *v);
/* Record the fresh volume's differences, which judge_quota expects to stay. */
void vol_quota_baseline(struct vol *v);
char *judge_fscore(struct vol *v, const struct model *m);

/*
 * debugfs.ocfs2 -R "rdump /TOP OUTDIR" and compare OUTDIR/TOP with the
 * model: names, types, contents, sizes, permission bits, owners, symlink
 * targets; mtimes against fscore's (v->fs open).  The volume must be
 * closed or synced.
 */
char *judge_rdump(struct vol *v, const struct model *m);

/*
 * debugfs.ocfs2 "stat" of up to nsample paths chosen by r: inode number,
 * mode, links, size, owner.
 */
char *judge_debugfs_stat(struct vol *v, const struct model *m, struct rng *r, unsigned nsample);

/*
 * debugfs.ocfs2 "xattr -v" of up to nmax paths whose inodes have extended
 * attributes: per inode the same number of entries with the model's types,
 * name lengths and value lengths, and a value in its store exactly when it
 * is at most 80 bytes.  (debugfs prints no names or values.)
 */
char *judge_debugfs_xattr(struct vol *v, const struct model *m, unsigned nmax);

/*
 * debugfs.ocfs2 "ls PATH" of directory dir: the same names naming the same
 * inodes as the model (cheaper than rdump for huge directories).
 */
char *judge_debugfs_ls(struct vol *v, const struct m_inode *dir, const char *path);

/* Run a shell command; its stdout+stderr into *out (malloc'd); returns the wait status. */
int judge_run(const char *cmd, char **out);

#endif
