/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Shared by the crash and fault tests: volumes made with mkfs.ocfs2, a
 * seeded transaction workload, and the model that judges what a volume may
 * hold after a crash.
 *
 * The workload changes "targets": the root inode (its mtime, a real
 * O2_META_INODE change) and a pool of blocks that are free space in the
 * fresh volume, each written whole as O2_META_PLAIN with a pattern of
 * (handle, block).  Some blocks are revoked and then either reused as
 * metadata or, once the revoke is committed, rewritten directly as file data
 * (a "data step", which the model counts as a handle of its own).
 *
 * The model keeps every version of every target with the handle that made
 * it, the device op index at which each handle began, and the durability
 * points: (ops recorded, last handle) after every commit and every
 * completed o2_fs_sync, each ending with a flush.  After a crash before op
 * p, the volume must hold the state after some handle h with
 * durable(p) <= h <= begun(p).
 */
#ifndef CRASH_COMMON_H
#define CRASH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "meta.h"

#define SKIP_CODE 77

/* ---- volumes ---- */

struct vol_image {
	char name[32];
	uint8_t *data;
	size_t size;
};

/* Whether mkfs.ocfs2 can be run. */
bool have_mkfs(void);
/* mkfs.ocfs2 -q -M local args on a fresh sparse file of size bytes; exits 1 on failure. */
void vol_image_make(struct vol_image *v, const char *name, uint64_t size, const char *args);
void vol_image_free(struct vol_image *v);
/* A memory device holding a copy of the image. */
struct o2_blockdev *vol_image_dev(const struct vol_image *v);

struct fake_clock {
	uint64_t ns;
};

/* o2_fs_open_opts read-write on slot 0 with the fake clock; -errno, message in err. */
int open_rw(struct o2_blockdev *dev, struct fake_clock *clk, struct o2_fs **ret, char *err,
	    size_t errlen);

/* ---- the workload ---- */

struct wl_params {
	uint64_t seed;
	unsigned handles;    /* regular handles */
	unsigned pool;	     /* target blocks besides the root inode */
	unsigned kmax;	     /* blocks per ordinary handle: 1..kmax */
	unsigned big_pct;    /* % of handles that are big (many blocks, several descriptors) */
	unsigned big_max;    /* blocks in a big handle: up to this (capped by credits) */
	unsigned revoke_pct; /* % of handles that revoke a block */
	unsigned sync_pct;   /* % chance of an o2_fs_sync after a handle */
};

/* ST_HOME: o2_journal_write_home (a lock going to PR); ST_FORGET:
   o2_journal_forget_home (a lock leaving the node) */
enum step_kind { ST_HANDLE, ST_SYNC, ST_COMMIT, ST_CHECKPOINT, ST_TICK, ST_DATA, ST_HOME,
		 ST_FORGET };

struct wl_ref {
	unsigned target;
	bool bnew;  /* get it with o2_bnew (a reallocated block) */
	bool magic; /* begins with the JBD2 magic: the log copy must be escaped */
};

struct wl_step {
	enum step_kind kind;
	uint32_t clock_ms; /* advance the clock first */
	unsigned first, n; /* ST_HANDLE: refs[first..first+n) changed */
	unsigned rfirst, nrev; /* ST_HANDLE: refs revoked at the end */
	unsigned target;   /* ST_DATA */
};

struct workload {
	struct wl_params p;
	struct wl_step *steps;
	size_t nsteps, scap;
	struct wl_ref *refs;
	size_t nrefs, rcap;
	unsigned ntargets; /* 1 + pool; target 0 is the root inode */
};

/* Make the step script for p (deterministic in p.seed). */
void wl_generate(struct workload *w, const struct wl_params *p);
void wl_free(struct workload *w);

/* ---- the model ---- */

struct version {
	uint32_t h;
	bool wild; /* freed: any content */
	uint64_t hash;
};

struct target {
	uint64_t blkno;
	uint8_t kind;
	struct version *v;
	size_t nv, cap;
};

struct durable {
	size_t nops;
	uint32_t h;
};

struct model {
	uint32_t bs;
	struct target *t;
	unsigned nt;
	uint32_t nh;	   /* handles so far (handle numbers 1..nh; 0 = initial state) */
	uint32_t h_ended;  /* last handle that ended */
	size_t *begin_op;  /* [h] ops recorded when handle h began */
	size_t bcap;
	struct durable *dur;
	size_t ndur, dcap;
};

/*
 * Targets of a fresh volume: the root inode and the last `pool` blocks,
 * which must be free in the global bitmap (checked).  Records the initial
 * content as handle 0.
 */
void model_init(struct model *m, struct o2_fs *fs, unsigned pool);
void model_free(struct model *m);

/* Block hash; an inode's block check is left out (the journal fills it at commit). */
uint64_t block_hash(const uint8_t *buf, uint32_t bs, uint8_t kind);

/* The durable handle and the last begun handle at crash point p. */
uint32_t model_durable(const struct model *m, size_t p);
uint32_t model_begun(const struct model *m, size_t p);

/*
 * Judge the volume on dev (already replayed) at crash point p: read every
 * target and find the handles h whose state it matches.  Returns true and
 * sets *ret_h to the newest match, or false with a report in msg.
 */
bool model_judge(const struct model *m, struct o2_blockdev *dev, size_t p, uint32_t *ret_h,
		 char *msg, size_t msglen);
/* The target hashes on dev, into hashes[nt]. */
void model_read(const struct model *m, struct o2_blockdev *dev, uint64_t *hashes);

/* ---- running ---- */

struct wl_run {
	struct o2_fs *fs;
	struct o2_blockdev *crash;    /* ops are counted here */
	struct o2_blockdev *datadev;  /* data steps write here */
	struct o2_blockdev *fault;    /* NULL, or a fault device to watch */
	bool alloc_faults;	      /* an allocation plan is set (o2_alloc_fail_plan) */
	struct fake_clock *clk;
	struct model *m;
	/* results */
	size_t step;	      /* steps done (the failing one when failed) */
	int err;	      /* the first error an fs call returned, 0 if none */
	const char *failed_call;
	unsigned read_errors; /* o2_bread failures the workload went on after */
};

/*
 * Run the workload from step 0.  Stops at the first error that turned the
 * volume read-only, after checking that the failing call said so and that
 * later calls give -EROFS.  A failed block read (no abort) skips that block.
 * Any fault the fault device reports must show as an error of the call
 * during which it happened.  With alloc_faults, a failed allocation must
 * likewise show as an error of its call, which must be -ENOMEM or (the
 * volume turned read-only) -EROFS; the run stops there, and only a volume
 * that turned read-only is checked to stay so.  Returns run->err.
 */
int wl_execute(struct wl_run *run, const struct workload *w);

/* Record a durability point: everything up to handle m->h_ended, ops so far. */
void model_durable_now(struct model *m, struct o2_blockdev *crash);

/* ---- the namespace workload ---- */

struct ns_run;
/*
 * Judges one call of the script: r its result, ok whether that is success.
 * Returns false to stop the script (at its first error).
 */
typedef bool ns_judge_fn(struct ns_run *run, const char *call, long r, bool ok);

struct ns_run {
	struct o2_fs *fs;
	ns_judge_fn *judge;
	void *arg;		/* the judge's */
	uint64_t failed_before; /* the judge's: failures seen before the current call */
	const char *failed_call;
	long err;
};

/*
 * One of every write-path call ocfs2d makes, on a fresh 4K-block volume
 * with default features: directories grown over several blocks (and their
 * index), files with holes, unwritten extents and a truncated tail, a slow
 * symlink, hard links, renames, extended attributes (in the inode, in an
 * xattr block, values in clusters, replaced and removed), a file unlinked
 * with its xattrs, an orphan freed at its last close, rmdir.  Stops at the
 * first call the judge stops it at.
 */
void ns_script(struct ns_run *run);
/*
 * On a fresh 1K-block volume of 16 MiB (a refcount root holds 55 records): a file
 * of 64 clusters reflinked, the copy written in every other cluster until
 * the tree outgrows its root and a leaf splits, then both deleted (leaves
 * drop out, the root takes the records back, the tree is freed).
 */
void ns_reflink_script(struct ns_run *run);

/* ---- judging what a run left behind ---- */

/* The targets of a fresh volume v, for a model. */
void model_for(const struct vol_image *v, struct model *m, unsigned pool);

/* A crash seed made from x (never 0, which means no crash). */
uint64_t crash_seed(uint64_t x);

struct judge_opts {
	unsigned crashes; /* besides the disk as it is, this many crashes at its end */
	bool walk;	  /* also o2_fs_walk the replayed volume */
	bool fsck;	  /* also fsck.ocfs2 -fn the disk as it is, once closed */
};

/*
 * Replay the crash device's disk, as it is and as crashes at its end could
 * leave it, and judge each: it must open read-write (replaying the
 * journal), hold a committed prefix that includes every durability point,
 * and close.  Adds the disks judged to *points.
 */
void judge_end(const char *what, struct o2_blockdev *crash, const struct model *m, uint64_t salt,
	       const struct judge_opts *o, size_t *points);

/* Whether fsck.ocfs2 can be run. */
bool have_fsck(void);

/*
 * Which Ns of a "fail the Nth ..." loop over total to run: every one unless
 * O2_FAULT_STRIDE=S (S > 1; the sanitizer builds set 4), then N = 1, 1+S,
 * 1+2S, ... and always the last three.  A stride is a sample, meant for the
 * builds several times slower; the plain build covers every N.
 */
bool fault_n_selected(uint64_t n, uint64_t total);
/* fsck.ocfs2 -fn on a copy of dev's content must find nothing to fix. */
void judge_fsck(const char *what, struct o2_blockdev *dev);

#endif
