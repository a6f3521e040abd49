// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A volume's FUSE sessions and what passes over their wire.
 *
 * Both ways of serving a volume use this: the classic loops (volume.c) run
 * the mounted session libfuse reads /dev/fuse for; the io_uring loop
 * (uring.c) makes further sessions, its codecs, that only decode requests
 * and encode replies.  Every session is made the same way (session_new)
 * with the operations table fuseops.c fills, and every one is hooked
 * (session_hook) or told by hand (session_saw_request, session_patch_init)
 * about the raw messages, for what libfuse 3.14 does not pass on.
 *
 * That is FUSE_HANDLE_KILLPRIV_V2 (see fuseops.c, kill_privs, for what it
 * asks of us): libfuse knows neither the INIT flag nor the write request's
 * FUSE_WRITE_KILL_SUIDGID.  So the INIT request's offer is noted and its
 * reply gains the flag if the kernel offered it, and each request's write
 * flags are kept for the thread that runs it, where the operation asks for
 * them (session_write_flags).  Nothing here calls back into the rest of
 * the daemon: it only reads and writes the volume's INIT fields.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "ocfs2d.h"

/*
 * The write flags of the request this thread is running.  A thread runs
 * one request at a time, from its peek (session_saw_request) through the
 * operation, so a thread-local value is the request's own.
 */
static __thread uint32_t req_write_flags;

/* FUSE's opcodes by number, as the statistics name them */
static const char *const opcode_names[SESSION_OPCODES] = {
	[FUSE_LOOKUP] = "lookup", [FUSE_FORGET] = "forget", [FUSE_GETATTR] = "getattr",
	[FUSE_SETATTR] = "setattr", [FUSE_READLINK] = "readlink", [FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod", [FUSE_MKDIR] = "mkdir", [FUSE_UNLINK] = "unlink",
	[FUSE_RMDIR] = "rmdir", [FUSE_RENAME] = "rename", [FUSE_LINK] = "link",
	[FUSE_OPEN] = "open", [FUSE_READ] = "read", [FUSE_WRITE] = "write",
	[FUSE_STATFS] = "statfs", [FUSE_RELEASE] = "release", [FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr", [FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr", [FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush", [FUSE_INIT] = "init", [FUSE_OPENDIR] = "opendir",
	[FUSE_READDIR] = "readdir", [FUSE_RELEASEDIR] = "releasedir",
	[FUSE_FSYNCDIR] = "fsyncdir", [FUSE_GETLK] = "getlk", [FUSE_SETLK] = "setlk",
	[FUSE_SETLKW] = "setlkw", [FUSE_ACCESS] = "access", [FUSE_CREATE] = "create",
	[FUSE_INTERRUPT] = "interrupt", [FUSE_BMAP] = "bmap", [FUSE_DESTROY] = "destroy",
	[FUSE_IOCTL] = "ioctl", [FUSE_POLL] = "poll", [FUSE_NOTIFY_REPLY] = "notify_reply",
	[FUSE_BATCH_FORGET] = "batch_forget", [FUSE_FALLOCATE] = "fallocate",
	[FUSE_READDIRPLUS] = "readdirplus", [FUSE_RENAME2] = "rename2", [FUSE_LSEEK] = "lseek",
	[FUSE_COPY_FILE_RANGE] = "copy_file_range",
};

struct fuse_session *session_new(struct volume *v, const struct fuse_lowlevel_ops *ops,
				 GError **err)
{
	g_autofree char *fsname = g_strdup_printf("fsname=%s", v->device);
	g_autoptr(GPtrArray) argv = g_ptr_array_new();
	struct fuse_session *se;

	/* the kernel checks permissions (we keep no credentials of our own),
	 * and mount(8) and df show an ocfs2 filesystem of this device */
	g_ptr_array_add(argv, (char *)"ocfs2d");
	g_ptr_array_add(argv, (char *)"-o");
	g_ptr_array_add(argv, (char *)"default_permissions,subtype=ocfs2");
	g_ptr_array_add(argv, (char *)"-o");
	g_ptr_array_add(argv, fsname);
	if (v->opts.allow_other) {
		g_ptr_array_add(argv, (char *)"-o");
		g_ptr_array_add(argv, (char *)"allow_other");
	}
	if (v->opts.ro) {
		g_ptr_array_add(argv, (char *)"-o");
		g_ptr_array_add(argv, (char *)"ro");
	}
	g_ptr_array_add(argv, (char *)"-o");
	g_ptr_array_add(argv, (char *)(v->opts.nosuid ? "nosuid" : "suid"));
	g_ptr_array_add(argv, (char *)"-o");
	g_ptr_array_add(argv, (char *)(v->opts.nodev ? "nodev" : "dev"));
	g_ptr_array_add(argv, (char *)"-o");
	g_ptr_array_add(argv, (char *)(v->opts.noexec ? "noexec" : "exec"));
	if (v->opts.debug)
		g_ptr_array_add(argv, (char *)"-d");

	struct fuse_args args = FUSE_ARGS_INIT((int)argv->len, (char **)argv->pdata);

	se = fuse_session_new(&args, ops, sizeof(*ops), v);
	/* frees only what libfuse allocated for args; the strings are argv's */
	fuse_opt_free_args(&args);
	if (!se)
		g_set_error(err, G_IO_ERROR, G_IO_ERROR_FAILED,
			    "%s: cannot start a FUSE session (libfuse said why above)", v->device);
	return se;
}

uint32_t session_write_flags(void)
{
	return req_write_flags;
}

void session_saw_request(struct volume *v, const void *req, size_t len)
{
	const struct fuse_in_header *ih = req;
	const uint8_t *arg = (const uint8_t *)req + sizeof(*ih);

	/* a request that is not a write leaves no flags from the last one */
	req_write_flags = 0;
	if (len < sizeof(*ih))
		return;
	if (ih->opcode < SESSION_OPCODES) {
		struct session_req *q = &v->req_slots[ih->unique % SESSION_SLOTS];

		__atomic_add_fetch(&v->req_count[ih->opcode], 1, __ATOMIC_RELAXED);
		/* no lock on the serving path: a slot is reused only once 256
		   requests are in flight, which costs a timing, not a count */
		q->opcode = ih->opcode;
		q->start = g_get_monotonic_time();
		__atomic_store_n(&q->unique, ih->unique, __ATOMIC_RELEASE);
	}
	if (ih->opcode == FUSE_WRITE) {
		if (len >= sizeof(*ih) + sizeof(struct fuse_write_in))
			req_write_flags = ((const struct fuse_write_in *)arg)->write_flags;
		return;
	}
	if (ih->opcode != FUSE_INIT)
		return;
	/* an older kernel sends a shorter fuse_init_in: read only what is there */
	uint32_t lo = 0, hi = 0;

	if (len >= sizeof(*ih) + offsetof(struct fuse_init_in, flags) + sizeof(lo))
		memcpy(&lo, arg + offsetof(struct fuse_init_in, flags), sizeof(lo));
	if ((lo & FUSE_INIT_EXT) &&
	    len >= sizeof(*ih) + offsetof(struct fuse_init_in, flags2) + sizeof(hi))
		memcpy(&hi, arg + offsetof(struct fuse_init_in, flags2), sizeof(hi));
	v->init_unique = ih->unique;
	v->init_offered = lo | (uint64_t)hi << 32;
	v->init_pending = true;
}

bool session_patch_init(struct volume *v, const struct iovec *iov, int count)
{
	const struct fuse_out_header *oh;
	const size_t at = offsetof(struct fuse_init_out, flags);
	uint32_t flags;

	if (!v->init_pending || count < 2 || iov[0].iov_len < sizeof(*oh))
		return false;
	oh = iov[0].iov_base;
	if (oh->unique != v->init_unique)
		return false;
	/* INIT's reply has gone by: later replies are not looked into */
	v->init_pending = false;
	if (oh->error || !(v->init_offered & FUSE_HANDLE_KILLPRIV_V2) ||
	    iov[1].iov_len < at + sizeof(flags))
		return false;
	memcpy(&flags, (const uint8_t *)iov[1].iov_base + at, sizeof(flags));
	flags |= FUSE_HANDLE_KILLPRIV_V2;
	memcpy((uint8_t *)iov[1].iov_base + at, &flags, sizeof(flags));
	v->killpriv = true;
	return true;
}

void session_replied(struct volume *v, uint64_t unique)
{
	struct session_req *q = &v->req_slots[unique % SESSION_SLOTS];

	if (!unique || !__atomic_compare_exchange_n(&q->unique, &unique, 0, false, __ATOMIC_ACQUIRE,
						    __ATOMIC_RELAXED))
		return; /* a notification, or a request whose slot was taken */
	__atomic_add_fetch(&v->req_us[q->opcode % SESSION_OPCODES],
			   (uint64_t)(g_get_monotonic_time() - q->start), __ATOMIC_RELAXED);
}

void session_request_stats(struct volume *v,
			   void (*fn)(const char *name, uint64_t count, uint64_t us, void *arg),
			   void *arg)
{
	for (unsigned op = 0; op < SESSION_OPCODES; op++) {
		uint64_t n = __atomic_load_n(&v->req_count[op], __ATOMIC_RELAXED);
		char other[24];

		if (!n)
			continue;
		snprintf(other, sizeof(other), "opcode%u", op);
		fn(opcode_names[op] ? opcode_names[op] : other, n,
		   __atomic_load_n(&v->req_us[op], __ATOMIC_RELAXED), arg);
	}
}

/* ---- notifications ---- */

/*
 * FUSE_NOTIFY_INC_EPOCH (Linux 6.16, FUSE 7.44): every name the kernel
 * caches was looked up in an older epoch and is asked for again before its
 * next use.  Older kernels answer EINVAL.
 */
#define NOTIFY_INC_EPOCH 8

/* One notification (unique 0, error the code) of body parts iov[1..n-1]. */
static int notify(struct volume *v, int code, struct iovec *iov, int n)
{
	struct fuse_out_header oh = { .error = code };
	size_t len = sizeof(oh);

	for (int i = 1; i < n; i++)
		len += iov[i].iov_len;
	oh.len = (uint32_t)len;
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	ssize_t w = writev(fuse_session_fd(v->se), iov, n);

	return w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
}

int session_notify_inval_inode(struct volume *v, uint64_t node, int64_t off, int64_t len)
{
	struct fuse_notify_inval_inode_out o = { .ino = node, .off = off, .len = len };
	struct iovec iov[2] = { [1] = { &o, sizeof(o) } };

	return notify(v, FUSE_NOTIFY_INVAL_INODE, iov, 2);
}

int session_notify_inval_entry(struct volume *v, uint64_t parent, const char *name)
{
	struct fuse_notify_inval_entry_out o = { .parent = parent, .namelen = (uint32_t)strlen(name) };
	struct iovec iov[3] = { [1] = { &o, sizeof(o) }, [2] = { (void *)name, o.namelen + 1 } };

	return notify(v, FUSE_NOTIFY_INVAL_ENTRY, iov, 3);
}

int session_notify_new_epoch(struct volume *v)
{
	struct iovec iov[1];

	return notify(v, NOTIFY_INC_EPOCH, iov, 1);
}

/* libfuse's reads of a hooked session: each request is peeked at first. */
static ssize_t hooked_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	if (n > 0)
		session_saw_request(userdata, buf, (size_t)n);
	return n;
}

/* libfuse's writes of a hooked session: INIT's reply may be changed first. */
static ssize_t hooked_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	ssize_t n;

	session_patch_init(userdata, iov, count);
	n = writev(fd, iov, count);
	if (count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header))
		session_replied(userdata, ((const struct fuse_out_header *)iov[0].iov_base)->unique);
	return n;
}

int session_hook(struct fuse_session *se)
{
	static const struct fuse_custom_io io = { .read = hooked_read, .writev = hooked_writev };

	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

/*
 * Serving in turns.  One thread at a time, the leader, reads requests and
 * runs each itself, spinning for poll_us after each before it sleeps in
 * poll(): a client issuing requests back to back finds it awake, and no
 * request pays for waking another thread - on virtual machines a
 * cross-CPU wake-up costs most of what a cached request does.  With
 * hand-on (clustered volumes), a request about to wait for another node
 * (session_may_wait) first hands the lead to another thread - an idle
 * one, else a new one up to the bound - so one blocked request never holds
 * up the rest.  Once it is done its thread leads again if nobody does, or
 * waits idle (at most TURNS_IDLE of them stay; more end).
 */
struct turns {
	struct volume *v;
	GMutex mu;
	GCond next; /* an idle thread may lead */
	GCond gone; /* threads fell */
	bool led;   /* a thread leads */
	bool ended; /* the session ended: every thread goes */
	int result; /* how it ended: 0 or -errno */
	unsigned threads, idle, max;
};

#define TURNS_IDLE 4

/* The turns this thread leads while it runs a request, if it may hand on. */
static __thread struct turns *leading;

/*
 * Read and run requests until the session ends (true, *result: 0 or
 * -errno) or the lead passed on while a request ran (false).
 */
static bool lead(struct turns *t, struct fuse_buf *buf, int *result)
{
	struct fuse_session *se = t->v->se;
	int fd = fuse_session_fd(se), r = 0;
	gint64 spin_until = 0;

	while (!fuse_session_exited(se)) {
		r = fuse_session_receive_buf(se, buf);
		if (r == -EAGAIN) {
			if (g_get_monotonic_time() < spin_until)
				continue;
			struct pollfd p = { .fd = fd, .events = POLLIN };

			if (poll(&p, 1, -1) < 0 && errno != EINTR) {
				r = -errno;
				break;
			}
			continue;
		}
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		leading = t->max > 1 ? t : NULL;
		fuse_session_process_buf(se, buf);
		if (t->max > 1 && !leading)
			return false;
		leading = NULL;
		spin_until = g_get_monotonic_time() + t->v->opts.poll_us;
	}
	*result = r < 0 ? r : 0;
	return true;
}

static gpointer turn_main(gpointer p);

/* One thread's part: lead whenever nobody does, until the session ends. */
static void take_turns(struct turns *t)
{
	struct fuse_buf buf = { 0 };
	int r;

	g_mutex_lock(&t->mu);
	for (;;) {
		while (t->led && !t->ended && t->idle < TURNS_IDLE) {
			t->idle++;
			g_cond_wait(&t->next, &t->mu);
			t->idle--;
		}
		if (t->ended || t->led)
			break;
		t->led = true;
		g_mutex_unlock(&t->mu);
		bool ended = lead(t, &buf, &r);

		g_mutex_lock(&t->mu);
		if (ended) {
			t->ended = true;
			t->led = false;
			t->result = r;
			g_cond_broadcast(&t->next);
			break;
		}
	}
	t->threads--;
	g_cond_broadcast(&t->gone);
	g_mutex_unlock(&t->mu);
	free(buf.mem);
}

static gpointer turn_main(gpointer p)
{
	take_turns(p);
	return NULL;
}

void session_may_wait(void)
{
	struct turns *t = leading;
	g_autoptr(GError) err = NULL;

	if (!t)
		return;
	leading = NULL;
	g_mutex_lock(&t->mu);
	t->led = false;
	if (t->idle) {
		g_cond_signal(&t->next);
	} else if (t->threads < t->max && !t->ended) {
		GThread *th = g_thread_try_new("ocfs2d-fuse", turn_main, t, &err);

		if (th) {
			t->threads++;
			g_thread_unref(th);
		} else {
			/* the next thread done with its request leads */
			g_warning("%s: no thread to serve beside a waiting request: %s",
				  t->v->mountpoint, err->message);
		}
	}
	g_mutex_unlock(&t->mu);
}

int session_serve(struct volume *v, bool hand_on)
{
	int fd = fuse_session_fd(v->se), fl = fcntl(fd, F_GETFL);
	struct turns t = { .v = v, .threads = 1, .max = hand_on ? MAX(v->opts.threads, 2u) : 1 };

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	g_mutex_init(&t.mu);
	g_cond_init(&t.next);
	g_cond_init(&t.gone);
	take_turns(&t);
	g_mutex_lock(&t.mu);
	while (t.threads)
		g_cond_wait(&t.gone, &t.mu);
	g_mutex_unlock(&t.mu);
	g_cond_clear(&t.gone);
	g_cond_clear(&t.next);
	g_mutex_clear(&t.mu);
	fuse_session_reset(v->se);
	return t.result;
}
