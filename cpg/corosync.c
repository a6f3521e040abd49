// SPDX-License-Identifier: GPL-2.0-or-later
/* corosync queries outside a lock-service group (see corosync.h). */
#include "corosync.h"

#include <corosync/cmap.h>
#include <errno.h>

#include "lockservice.h"

char *o2cs_cluster_name(GError **error)
{
	cmap_handle_t h;
	char *name = NULL;
	cs_error_t r = cmap_initialize(&h);

	if (r != CS_OK) {
		g_set_error(error, O2LS_ERROR, ENOTCONN,
			    "cannot reach corosync (cmap error %d): is corosync running on this node?",
			    r);
		return NULL;
	}
	r = cmap_get_string(h, "totem.cluster_name", &name);
	cmap_finalize(h);
	if (r != CS_OK || !name || !name[0]) {
		free(name);
		g_set_error(error, O2LS_ERROR, ENOENT,
			    "corosync's configuration names no cluster (totem.cluster_name is unset)");
		return NULL;
	}
	/* cmap allocates with malloc; callers free with g_free */
	char *copy = g_strdup(name);

	free(name);
	return copy;
}
