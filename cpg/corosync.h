/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the daemon asks corosync itself, outside any lock-service group:
 * the cluster's name (totem.cluster_name in cmap), so that a volume
 * formatted for one cluster is never mounted in another.  (The node id
 * comes with the lock-service membership: o2ls_self.)  Each call connects,
 * asks and disconnects; none is on a hot path.
 */
#pragma once

#include <glib.h>

/*
 * The cluster's name (g_free it).  NULL with error set (O2LS_ERROR,
 * ENOTCONN) when corosync cannot be reached, or (ENOENT) when its
 * configuration names no cluster.
 */
char *o2cs_cluster_name(GError **error);
