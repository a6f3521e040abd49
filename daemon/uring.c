// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE over io_uring (Linux 6.14 and later, fuse module enable_uring=Y).
 *
 * Through /dev/fuse every request is a hand-off between CPUs: the caller
 * sleeps on its CPU, our thread runs on another, and waking a CPU that went
 * idle is, on a virtual machine, most of a metadata round trip.  With
 * io_uring the kernel queues each request on a ring of the CPU its caller
 * runs on.  We serve each ring from a thread bound to that CPU, so the
 * caller and the server hand off on one CPU, with no wake-up of another.
 *
 * libfuse 3.14 has no io_uring transport, but it still decodes requests and
 * encodes replies for us: each serving thread has a FUSE session of its own
 * (a "codec") whose device is a memory file.  A request from a ring entry is laid
 * out as /dev/fuse would deliver it, the codec processes it (our fuseops
 * run, as for any session; session.c makes and hooks it), and the reply
 * it writes into its file is moved into the ring entry and committed.  In this mode the /dev/fuse thread
 * goes through a codec too, since it must add FUSE_OVER_IO_URING to the
 * INIT reply; after that /dev/fuse carries only forgets and interrupts.
 *
 * The rings are made (memory, threads, codecs) before the INIT reply says
 * we use them: once it has, the kernel holds every request until each CPU's
 * ring has an entry registered, so a failure after that would hang the
 * mount.  A failure before it leaves the volume served through /dev/fuse.
 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <liburing.h>
#include <linux/fuse.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "ocfs2d.h"

/* The io_uring part of the FUSE protocol (7.42), for headers older than it. */
#ifndef FUSE_URING_IN_OUT_HEADER_SZ
#define FUSE_URING_IN_OUT_HEADER_SZ 128
#define FUSE_URING_OP_IN_OUT_SZ 128

struct fuse_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* echoed in the commit of this request */
	uint32_t payload_sz;	/* bytes of payload, each way */
	uint32_t padding;
	uint64_t reserved;
};

struct fuse_uring_req_header {
	char in_out[FUSE_URING_IN_OUT_HEADER_SZ];	/* fuse_in_header, then fuse_out_header */
	char op_in[FUSE_URING_OP_IN_OUT_SZ];		/* the request's first argument */
	struct fuse_uring_ent_in_out ring_ent_in_out;
};

enum { FUSE_IO_URING_CMD_REGISTER = 1, FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2 };

struct fuse_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};
#endif
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)
#endif

#define ENTRIES_PER_QUEUE 2
/* room before an entry's payload for the request's headers, so that the
 * request is contiguous without copying the payload */
#define HEAD_ROOM 4096u

_Static_assert(sizeof(struct fuse_in_header) + FUSE_URING_OP_IN_OUT_SZ <= HEAD_ROOM,
	       "head room holds the in header and the first argument");
_Static_assert(sizeof(struct fuse_uring_cmd_req) <= 80, "fits the SQE128 command area");

static const char *param_path = "/sys/module/fuse/parameters/enable_uring";

/*
 * A libfuse session whose device is a memory file: it writes a reply where
 * the file's offset is, we read it from the start and rewind.  (A pipe
 * would do, but the biggest reply must fit in it whole, and pipes over
 * 1 MiB need CAP_SYS_RESOURCE.)
 */
struct codec {
	struct volume *v;
	struct fuse_session *se;
	int fd;			/* ours; the session has a duplicate (same offset) */
};

struct uring_ent {
	struct fuse_uring_req_header *hdr;
	char *buf;		/* HEAD_ROOM bytes, then the payload */
	struct iovec iov[2];
	bool live;		/* registered with the kernel, not yet torn down */
};

struct uring_ctx;

struct uring_queue {
	struct uring_ctx *ctx;
	unsigned qid;		/* the CPU */
	struct codec codec;
	struct io_uring ring;
	bool ring_made;
	struct uring_ent ent[ENTRIES_PER_QUEUE];
	GThread *thread;
};

struct uring_ctx {
	struct volume *v;
	int fd;			/* /dev/fuse */
	size_t payload;		/* bytes an entry's payload must hold */
	const void *init_req;	/* the INIT request, for each codec */
	size_t init_len;
	unsigned nq;
	struct uring_queue *q;
	GMutex mu;
	GCond cond;
	unsigned settled, failed;	/* queues set up or failed */
	bool go, quit;
};

/* ---- the codec ---- */

static bool codec_open(struct volume *v, struct codec *c, GError **err)
{
	char dev[32];
	int w;

	c->v = v;
	c->se = NULL;
	c->fd = memfd_create("ocfs2d-replies", MFD_CLOEXEC);
	if (c->fd < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "memfd_create: %s",
			    g_strerror(errno));
		return false;
	}
	w = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
	if (w < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(errno), "dup: %s",
			    g_strerror(errno));
		goto fail;
	}
	struct fuse_lowlevel_ops ops;

	/* the same operations as the mounted session's: a codec is one more
	 * way in to the same volume */
	fuseops_table(v, &ops);
	c->se = session_new(v, &ops, err);
	if (!c->se) {
		close(w);
		goto fail;
	}
	/* libfuse takes /dev/fd/N as an open device, mounting nothing */
	snprintf(dev, sizeof(dev), "/dev/fd/%d", w);
	if (fuse_session_mount(c->se, dev) != 0) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED, "libfuse refused %s", dev);
		close(w);
		goto fail;
	}
	/* the INIT reply it writes must say what the main session's would */
	w = session_hook(c->se);
	if (w < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-w), "hooking a codec: %s",
			    g_strerror(-w));
		goto fail;
	}
	return true;
fail:
	if (c->se)
		fuse_session_destroy(c->se);
	c->se = NULL;
	close(c->fd);
	c->fd = -1;
	return false;
}

static void codec_close(struct codec *c)
{
	if (c->se)
		fuse_session_destroy(c->se); /* closes its duplicate */
	if (c->fd >= 0)
		close(c->fd);
	c->se = NULL;
	c->fd = -1;
}

/*
 * Process one request (len bytes, contiguous, as /dev/fuse delivers them)
 * and read its reply into iov.  Returns the reply's length, 0 if there is
 * none (forget, interrupt), -EMSGSIZE if it did not fit (it is dropped).
 */
static ssize_t codec_run(struct codec *c, void *req, size_t len, const struct iovec *iov, int iovcnt)
{
	struct fuse_buf fb = { .mem = req, .size = len };
	struct iovec part[2];
	size_t want;
	off_t end;
	ssize_t n;
	int k;

	g_assert(iovcnt <= 2);
	session_saw_request(c->v, req, len);
	fuse_session_process_buf(c->se, &fb);
	session_replied(c->v, ((const struct fuse_in_header *)req)->unique);
	end = lseek(c->fd, 0, SEEK_CUR);
	if (end <= 0)
		return end < 0 ? -errno : 0;
	/* read exactly the reply: the file may hold a longer one's tail */
	want = (size_t)end;
	for (k = 0; k < iovcnt && want; k++) {
		part[k] = iov[k];
		part[k].iov_len = MIN(iov[k].iov_len, want);
		want -= part[k].iov_len;
	}
	if (want)
		n = -EMSGSIZE;
	else if ((n = preadv(c->fd, part, k, 0)) < 0)
		n = -errno;
	else if (n != end)
		n = -EIO;
	if (lseek(c->fd, 0, SEEK_SET) < 0)
		return -errno;
	return n;
}

/* ---- the rings ---- */

/* The number of CPUs the kernel makes queues for, if they are 0..n-1. */
static unsigned possible_cpus(void)
{
	g_autofree char *s = NULL;
	unsigned lo, hi;
	char tail;

	if (!g_file_get_contents("/sys/devices/system/cpu/possible", &s, NULL, NULL))
		return 0;
	g_strstrip(s);
	if (sscanf(s, "%u-%u%c", &lo, &hi, &tail) == 2 && lo == 0)
		return hi + 1;
	if (sscanf(s, "%u%c", &lo, &tail) == 1 && lo == 0)
		return 1;
	return 0; /* a gap: qid would not be a CPU's index */
}

static void prep_cmd(struct uring_queue *q, struct uring_ent *e, unsigned op, uint64_t commit)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct fuse_uring_cmd_req *cr;

	/* the ring has an SQE per entry and an entry is submitted once */
	g_assert(sqe);
	memset(sqe, 0, 2 * sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = q->ctx->fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)e->iov;
	sqe->len = 2;
	cr = (struct fuse_uring_cmd_req *)sqe->cmd;
	cr->commit_id = commit;
	cr->qid = (uint16_t)q->qid;
	io_uring_sqe_set_data(sqe, e);
}

/* A request arrived in e: serve it and queue the commit of its reply. */
static void serve_entry(struct uring_queue *q, struct uring_ent *e)
{
	struct fuse_in_header in;
	struct fuse_out_header *out = (struct fuse_out_header *)e->hdr->in_out;
	uint64_t commit = e->hdr->ring_ent_in_out.commit_id;
	size_t psz = e->hdr->ring_ent_in_out.payload_sz, first;
	char *payload = e->buf + HEAD_ROOM;
	ssize_t n = -EPROTO;

	memcpy(&in, e->hdr->in_out, sizeof(in));
	/* in.len counts the header, the first argument (op_in) and the payload */
	if (in.len >= sizeof(in) + psz && psz <= q->ctx->payload &&
	    (first = in.len - sizeof(in) - psz) <= FUSE_URING_OP_IN_OUT_SZ) {
		char *start = payload - first - sizeof(in);
		struct iovec iov[2] = { { out, sizeof(*out) }, { payload, q->ctx->payload } };

		memcpy(start, &in, sizeof(in));
		memcpy(start + sizeof(in), e->hdr->op_in, first);
		n = codec_run(&q->codec, start, in.len, iov, 2);
	}
	if (n < (ssize_t)sizeof(*out) || out->unique != in.unique) {
		/* malformed, unanswered or oversized: the caller gets EIO, not a hang */
		if (n != 0 || in.opcode != FUSE_FORGET)
			g_warning("%s: io_uring request %u (unique %llu): %s", q->ctx->v->mountpoint,
				  in.opcode, (unsigned long long)in.unique,
				  n < 0 ? g_strerror((int)-n) : "no reply");
		*out = (struct fuse_out_header){ .len = sizeof(*out), .error = -EIO,
						 .unique = in.unique };
		n = sizeof(*out);
	}
	e->hdr->ring_ent_in_out.payload_sz = (uint32_t)(n - (ssize_t)sizeof(*out));
	prep_cmd(q, e, FUSE_IO_URING_CMD_COMMIT_AND_FETCH, commit);
}

static void queue_free(struct uring_queue *q)
{
	for (unsigned i = 0; i < ENTRIES_PER_QUEUE; i++) {
		free(q->ent[i].hdr);
		free(q->ent[i].buf);
		q->ent[i].hdr = NULL;
		q->ent[i].buf = NULL;
	}
	if (q->ring_made)
		io_uring_queue_exit(&q->ring);
	q->ring_made = false;
	codec_close(&q->codec);
}

/* Make the queue's ring, entries and codec (on its own thread: the ring
 * takes submissions from this thread only). */
static bool queue_setup(struct uring_queue *q, GError **err)
{
	struct uring_ctx *ctx = q->ctx;
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
						IORING_SETUP_DEFER_TASKRUN };
	cpu_set_t cpus;
	int r;

	CPU_ZERO(&cpus);
	CPU_SET(q->qid, &cpus);
	/* an offline CPU cannot take us; its queue then runs anywhere */
	(void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);

	r = io_uring_queue_init_params(ENTRIES_PER_QUEUE, &q->ring, &p);
	if (r == -EINVAL) {
		/* kernels before 6.1 know no DEFER_TASKRUN (nor FUSE rings, but
		 * leave that to the INIT flags) */
		p = (struct io_uring_params){ .flags = IORING_SETUP_SQE128 };
		r = io_uring_queue_init_params(ENTRIES_PER_QUEUE, &q->ring, &p);
	}
	if (r < 0) {
		g_set_error(err, G_IO_ERROR, g_io_error_from_errno(-r), "io_uring_setup: %s",
			    g_strerror(-r));
		return false;
	}
	q->ring_made = true;
	for (unsigned i = 0; i < ENTRIES_PER_QUEUE; i++) {
		struct uring_ent *e = &q->ent[i];

		e->hdr = aligned_alloc(4096, 4096);
		e->buf = aligned_alloc(4096, HEAD_ROOM + ctx->payload);
		if (!e->hdr || !e->buf) {
			g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED, "out of memory");
			return false;
		}
		memset(e->hdr, 0, sizeof(*e->hdr));
		e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
		e->iov[1] = (struct iovec){ e->buf + HEAD_ROOM, ctx->payload };
	}
	if (!codec_open(ctx->v, &q->codec, err))
		return false;
	/* the codec learns the connection's terms from the kernel's INIT */
	char *init = g_memdup2(ctx->init_req, ctx->init_len);
	char reply[256];
	struct iovec iov = { reply, sizeof(reply) };
	ssize_t n = codec_run(&q->codec, init, ctx->init_len, &iov, 1);

	g_free(init);
	if (n < (ssize_t)sizeof(struct fuse_out_header) ||
	    ((struct fuse_out_header *)reply)->error) {
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED, "the codec refused INIT");
		return false;
	}
	return true;
}

static void queue_run(struct uring_queue *q)
{
	const char *mnt = q->ctx->v->mountpoint;
	unsigned live = 0;
	int r;

	for (unsigned i = 0; i < ENTRIES_PER_QUEUE; i++) {
		prep_cmd(q, &q->ent[i], FUSE_IO_URING_CMD_REGISTER, 0);
		q->ent[i].live = true;
		live++;
	}
	while (live) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		r = io_uring_submit_and_wait(&q->ring, 1);
		if (r < 0 && r != -EINTR && r != -EBUSY) {
			g_warning("%s: io_uring queue %u: %s", mnt, q->qid, g_strerror(-r));
			break;
		}
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			struct uring_ent *e = io_uring_cqe_get_data(cqe);

			seen++;
			if (cqe->res < 0) {
				/* ENOTCONN: the connection is gone (unmount, abort) */
				if (cqe->res != -ENOTCONN && cqe->res != -ECONNABORTED &&
				    cqe->res != -ECANCELED)
					g_warning("%s: io_uring queue %u lost an entry: %s", mnt,
						  q->qid, g_strerror(-cqe->res));
				if (e->live) {
					e->live = false;
					live--;
				}
				continue;
			}
			serve_entry(q, e);
		}
		io_uring_cq_advance(&q->ring, seen);
	}
}

static gpointer queue_main(gpointer arg)
{
	struct uring_queue *q = arg;
	struct uring_ctx *ctx = q->ctx;
	g_autoptr(GError) err = NULL;
	bool ok = queue_setup(q, &err);

	g_mutex_lock(&ctx->mu);
	ctx->settled++;
	if (!ok) {
		ctx->failed++;
		g_warning("%s: io_uring queue for CPU %u: %s", ctx->v->mountpoint, q->qid,
			  err->message);
	}
	g_cond_broadcast(&ctx->cond);
	while (!ctx->go && !ctx->quit)
		g_cond_wait(&ctx->cond, &ctx->mu);
	bool go = ok && ctx->go;

	g_mutex_unlock(&ctx->mu);
	if (go)
		queue_run(q);
	queue_free(q);
	return NULL;
}

/* Start a queue per CPU; true once every one is ready to register. */
static bool start_queues(struct uring_ctx *ctx)
{
	ctx->nq = possible_cpus();
	if (!ctx->nq) {
		g_warning("%s: the possible CPUs are not 0..n-1: serving through /dev/fuse",
			  ctx->v->mountpoint);
		return false;
	}
	ctx->q = g_new0(struct uring_queue, ctx->nq);
	for (unsigned i = 0; i < ctx->nq; i++) {
		char name[32];

		ctx->q[i].ctx = ctx;
		ctx->q[i].qid = i;
		ctx->q[i].codec.fd = -1;
		snprintf(name, sizeof(name), "ocfs2d-ring%u", i);
		ctx->q[i].thread = g_thread_new(name, queue_main, &ctx->q[i]);
	}
	g_mutex_lock(&ctx->mu);
	while (ctx->settled < ctx->nq)
		g_cond_wait(&ctx->cond, &ctx->mu);
	bool ok = !ctx->failed;

	g_mutex_unlock(&ctx->mu);
	return ok;
}

static void release_queues(struct uring_ctx *ctx, bool go)
{
	g_mutex_lock(&ctx->mu);
	if (go)
		ctx->go = true;
	else
		ctx->quit = true;
	g_cond_broadcast(&ctx->cond);
	g_mutex_unlock(&ctx->mu);
}

static void stop_queues(struct uring_ctx *ctx)
{
	if (!ctx->q)
		return;
	release_queues(ctx, false);
	for (unsigned i = 0; i < ctx->nq; i++)
		g_thread_join(ctx->q[i].thread);
	g_free(ctx->q);
	ctx->q = NULL;
}

/* ---- INIT ---- */

/*
 * The INIT request (req) has been answered by a codec (reply): if the
 * kernel offers FUSE over io_uring, make the rings and, once they are
 * ready, say in the reply that we use them.  true if the reply now says so.
 */
static bool offer_rings(struct uring_ctx *ctx, const char *req, size_t req_len, char *reply,
			size_t reply_len)
{
	const struct fuse_in_header *ih = (const void *)req;
	const struct fuse_init_in *ii = (const void *)(req + sizeof(*ih));
	struct fuse_out_header *oh = (void *)reply;
	struct fuse_init_out *io = (void *)(reply + sizeof(*oh));
	uint64_t offered;

	if (req_len < sizeof(*ih) + sizeof(*ii) || reply_len < sizeof(*oh) + sizeof(*io) ||
	    oh->error)
		return false;
	offered = ii->flags;
	if (ii->flags & FUSE_INIT_EXT)
		offered |= (uint64_t)ii->flags2 << 32;
	if (!(offered & FUSE_OVER_IO_URING)) {
		g_message("%s: the kernel offers no FUSE over io_uring (Linux 6.14+, and %s "
			  "must be Y when mounting): serving through /dev/fuse",
			  ctx->v->mountpoint, param_path);
		return false;
	}
	/* the kernel's payload minimum: max(8 KiB, max_write, max_pages pages) */
	size_t pages = (io->flags & FUSE_MAX_PAGES) ? io->max_pages : 32;

	ctx->payload = MAX(MAX(8192u, io->max_write), pages * 4096);
	ctx->init_req = req;
	ctx->init_len = req_len;
	if (!start_queues(ctx)) {
		stop_queues(ctx);
		g_warning("%s: io_uring queues could not be made: serving through /dev/fuse",
			  ctx->v->mountpoint);
		return false;
	}
	io->flags |= FUSE_INIT_EXT;
	io->flags2 |= (uint32_t)(FUSE_OVER_IO_URING >> 32);
	return true;
}

/* ---- serving ---- */

bool uring_wanted(struct volume *v)
{
	g_autofree char *s = NULL;

	if (!v->opts.uring)
		return false;
	if (!g_file_get_contents(param_path, &s, NULL, NULL)) {
		g_warning("%s: uring: this kernel's FUSE has no io_uring transport (no %s): "
			  "serving through /dev/fuse", v->mountpoint, param_path);
		return false;
	}
	if (s[0] == 'Y')
		return true;
	/* the switch only lets FUSE servers that ask for rings use them */
	FILE *f = fopen(param_path, "we");
	bool ok = f && fputs("Y", f) >= 0;

	if (f && fclose(f) != 0)
		ok = false;
	if (!ok) {
		g_warning("%s: uring: cannot set %s (%s): serving through /dev/fuse",
			  v->mountpoint, param_path, g_strerror(errno));
		return false;
	}
	g_message("%s: uring: set %s to Y", v->mountpoint, param_path);
	return true;
}

int uring_serve(struct volume *v)
{
	struct uring_ctx ctx = { .v = v, .fd = fuse_session_fd(v->se) };
	struct codec c0;
	g_autoptr(GError) err = NULL;
	struct fuse_buf buf = { 0 };
	size_t cap = 2u * OCFS2D_MAX_WRITE;
	char *reply = g_malloc(cap);
	bool inited = false;
	int r = 0;

	g_mutex_init(&ctx.mu);
	g_cond_init(&ctx.cond);
	if (!codec_open(v, &c0, &err)) {
		g_warning("%s: uring: %s", v->mountpoint, err->message);
		g_free(reply);
		return -EIO;
	}
	while (!fuse_session_exited(v->se)) {
		r = fuse_session_receive_buf(v->se, &buf);
		if (r == -EINTR || r == -EAGAIN)
			continue;
		if (r <= 0)
			break;
		const struct fuse_in_header *ih = buf.mem;
		struct iovec iov = { reply, cap };
		ssize_t n = codec_run(&c0, buf.mem, (size_t)r, &iov, 1);
		bool rings = false;

		if (n < 0) {
			g_warning("%s: request %u: %s", v->mountpoint, ih->opcode, g_strerror((int)-n));
			continue;
		}
		if (!inited && ih->opcode == FUSE_INIT) {
			inited = true;
			rings = offer_rings(&ctx, buf.mem, (size_t)r, reply, (size_t)n);
		}
		if (n > 0 && write(ctx.fd, reply, (size_t)n) < 0 && errno != ENOENT)
			g_warning("%s: replying to request %u: %s", v->mountpoint, ih->opcode,
				  g_strerror(errno));
		if (rings) {
			release_queues(&ctx, true);
			g_message("%s: serving through io_uring, a queue on each of %u CPUs",
				  v->mountpoint, ctx.nq);
		}
	}
	stop_queues(&ctx);
	codec_close(&c0);
	free(buf.mem);
	g_free(reply);
	g_mutex_clear(&ctx.mu);
	g_cond_clear(&ctx.cond);
	fuse_session_reset(v->se);
	return r < 0 ? r : 0;
}
