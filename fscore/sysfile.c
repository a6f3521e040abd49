/* SPDX-License-Identifier: GPL-2.0-or-later */
/* System files: named entries of the system directory, some one per slot. */
#include <stdio.h>

#include "error.h"
#include "internal.h"

static const char *const sysfile_names[O2_SYS_COUNT] = {
	[O2_SYS_BAD_BLOCKS] = "bad_blocks",
	[O2_SYS_GLOBAL_INODE_ALLOC] = "global_inode_alloc",
	[O2_SYS_SLOT_MAP] = "slot_map",
	[O2_SYS_HEARTBEAT] = "heartbeat",
	[O2_SYS_GLOBAL_BITMAP] = "global_bitmap",
	[O2_SYS_USER_QUOTA] = "aquota.user",
	[O2_SYS_GROUP_QUOTA] = "aquota.group",
	[O2_SYS_ORPHAN_DIR] = "orphan_dir",
	[O2_SYS_EXTENT_ALLOC] = "extent_alloc",
	[O2_SYS_INODE_ALLOC] = "inode_alloc",
	[O2_SYS_JOURNAL] = "journal",
	[O2_SYS_LOCAL_ALLOC] = "local_alloc",
	[O2_SYS_TRUNCATE_LOG] = "truncate_log",
	[O2_SYS_LOCAL_USER_QUOTA] = "aquota.user",
	[O2_SYS_LOCAL_GROUP_QUOTA] = "aquota.group",
};

bool o2_sysfile_is_per_slot(enum o2_sysfile type)
{
	return type >= O2_SYS_ORPHAN_DIR && type < O2_SYS_COUNT;
}

void o2_sysfile_name(enum o2_sysfile type, unsigned slot, char *buf, size_t len)
{
	if ((unsigned)type >= O2_SYS_COUNT) {
		snprintf(buf, len, "?");
		return;
	}
	if (o2_sysfile_is_per_slot(type))
		snprintf(buf, len, "%s:%04u", sysfile_names[type], slot);
	else
		snprintf(buf, len, "%s", sysfile_names[type]);
}

int o2_sysfile_lookup(struct o2_fs *fs, enum o2_sysfile type, unsigned slot, uint64_t *ret_blkno)
{
	struct o2_inode *sysdir;
	struct o2_dirent de;
	char name[32];
	int r;

	if ((unsigned)type >= O2_SYS_COUNT)
		return -EINVAL;
	if (o2_sysfile_is_per_slot(type) && slot >= fs->info.max_slots)
		return -EINVAL;
	o2_sysfile_name(type, slot, name, sizeof(name));
	r = o2_inode_get(fs, fs->info.system_dir_blkno, &sysdir);
	if (r < 0)
		return r;
	r = o2_dir_lookup(fs, sysdir, name, strlen(name), &de);
	o2_inode_unref(sysdir);
	/* quota files exist only with quotas; every other one must be there */
	if (r == -ENOENT && (type == O2_SYS_USER_QUOTA || type == O2_SYS_GROUP_QUOTA ||
			     type == O2_SYS_LOCAL_USER_QUOTA || type == O2_SYS_LOCAL_GROUP_QUOTA))
		return o2_fail(fs, r, "the system directory has no %s", name);
	if (r == -ENOENT)
		return o2_corrupt(fs, fs->info.system_dir_blkno, "the system directory has no %s",
				  name);
	if (r < 0)
		return r;
	*ret_blkno = de.ino;
	return 0;
}
