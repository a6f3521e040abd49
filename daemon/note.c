// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What a volume's failures tell the operator.
 *
 * Every part of the daemon that calls fscore on a mounted volume (the FUSE
 * operations, reflinks, the ticker) reports failures here, so this sits
 * below all of them and calls none of them: the one way up is the
 * volume's turned_ro hook, which its owner set.
 */

#include <errno.h>

#include "ocfs2d.h"

int volume_note_locked(struct volume *v, const char *op, int r)
{
	if (r >= 0 || !v->fs)
		return r;
	if (o2_fs_readonly_reason(v->fs)) {
		/* the turn to read-only is said once, whatever errno came with it */
		if (!v->ro_reported) {
			v->ro_reported = true;
			g_warning("%s: %s: %s", v->device, op, o2_fs_error(v->fs));
			/* its journal cannot go home now: whatever lock needs that,
			 * another node waits for until this node is stopped */
			if (v->cluster)
				g_critical("%s: this node cannot write back what it changed under "
					   "its cluster locks any more: other nodes that need them "
					   "wait until this node is stopped and fenced (its journal "
					   "is then recovered)",
					   v->device);
			if (v->turned_ro)
				v->turned_ro(v, v->gone_arg);
			return r;
		}
		/* the expected answer of a read-only volume: nothing new to say */
		if (r == -EROFS)
			return r;
	}
	/* damage and I/O errors are the operator's business; ENOENT and the
	 * like are only the caller's */
	if (r == -EUCLEAN || r == -EIO) {
		const char *msg = o2_fs_error(v->fs);

		g_warning("%s: %s: %s", v->device, op, msg[0] ? msg : g_strerror(-r));
	}
	return r;
}
