/* SPDX-License-Identifier: GPL-2.0-or-later */
/* ocfs2ctl verbs about the whole volume: info, slots, check. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "ctl.h"
#include "json.h"
#include "print.h"

/* ---- info ---- */

struct journal_entry {
	unsigned slot;
	int err; /* o2_journal_info() failed: -errno, and error says why */
	char error[256];
	struct o2_journal_info info;
};

static void info_journal_json(struct json_writer *w, const struct journal_entry *j)
{
	const struct o2_journal_info *ji = &j->info;
	char uuid[33];

	json_object_begin(w, NULL);
	json_uint(w, "slot", j->slot);
	if (j->err) {
		json_string(w, "error", j->error);
		json_object_end(w);
		return;
	}
	print_uuid(ji->uuid, uuid);
	json_uint(w, "inode", ji->inode_blkno);
	json_uint(w, "size", (uint64_t)ji->maxlen * ji->block_size);
	json_uint(w, "block_size", ji->block_size);
	json_uint(w, "maxlen", ji->maxlen);
	json_uint(w, "first", ji->first);
	json_uint(w, "sequence", ji->sequence);
	json_uint(w, "start", ji->start);
	json_int(w, "errno", (int32_t)ji->errno_);
	json_uint(w, "feature_compat", ji->feature_compat);
	json_uint(w, "feature_incompat", ji->feature_incompat);
	json_uint(w, "feature_ro_compat", ji->feature_ro_compat);
	json_string(w, "uuid", uuid);
	json_uint(w, "nr_users", ji->nr_users);
	json_uint(w, "flags", ji->ij_flags);
	print_flags_json(w, "flag_names", print_journal_flags, ji->ij_flags);
	json_bool(w, "dirty", ji->ij_flags & 0x1);
	json_uint(w, "recovery_generation", ji->recovery_generation);
	json_object_end(w);
}

static void info_json(struct ctl *c, const struct o2_super_info *sb, const struct ctl_vec *journals)
{
	struct json_writer w;
	char uuid[33];
	uint32_t free_clusters = sb->total_clusters >= sb->used_clusters ?
					 sb->total_clusters - sb->used_clusters : 0;

	print_uuid(sb->uuid, uuid);
	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "image", c->image);
	json_string(&w, "label", sb->label);
	json_string(&w, "uuid", uuid);
	json_uint(&w, "uuid_hash", sb->uuid_hash);
	json_uint(&w, "major_rev", sb->major_rev);
	json_uint(&w, "minor_rev", sb->minor_rev);
	json_uint(&w, "block_size", sb->block_size);
	json_uint(&w, "block_bits", sb->block_bits);
	json_uint(&w, "cluster_size", sb->cluster_size);
	json_uint(&w, "cluster_bits", sb->cluster_bits);
	json_uint(&w, "device_blocks", sb->device_blocks);
	json_uint(&w, "total_clusters", sb->total_clusters);
	json_uint(&w, "used_clusters", sb->used_clusters);
	json_uint(&w, "free_clusters", free_clusters);
	json_uint(&w, "free_bytes", (uint64_t)free_clusters * sb->cluster_size);
	json_uint(&w, "max_slots", sb->max_slots);
	json_string(&w, "stack", sb->stack);
	json_string(&w, "stack_name", o2_fs_stack_name(c->fs));
	json_string(&w, "cluster_name", sb->cluster_name);
	json_uint(&w, "stack_flags", sb->stack_flags);
	json_uint(&w, "feature_compat", sb->feature_compat);
	json_uint(&w, "feature_incompat", sb->feature_incompat);
	json_uint(&w, "feature_ro_compat", sb->feature_ro_compat);
	json_object_begin(&w, "features");
	print_features_json(&w, "compat", O2_COMPAT, sb->feature_compat);
	print_features_json(&w, "incompat", O2_INCOMPAT, sb->feature_incompat);
	print_features_json(&w, "ro_compat", O2_RO_COMPAT, sb->feature_ro_compat);
	json_object_end(&w);
	json_uint(&w, "tunefs_flags", sb->tunefs_flags);
	json_uint(&w, "root_blkno", sb->root_blkno);
	json_uint(&w, "system_dir_blkno", sb->system_dir_blkno);
	json_uint(&w, "first_cluster_group", sb->first_cluster_group);
	json_uint(&w, "mnt_count", sb->mnt_count);
	json_uint(&w, "max_mnt_count", sb->max_mnt_count);
	json_uint(&w, "state", sb->state);
	json_uint(&w, "errors", sb->errors);
	json_uint(&w, "check_interval", sb->check_interval);
	json_uint(&w, "last_check", sb->last_check);
	json_uint(&w, "creator_os", sb->creator_os);
	json_uint(&w, "xattr_inline_size", sb->xattr_inline_size);
	json_array_begin(&w, "dx_seed");
	for (unsigned i = 0; i < 3; i++)
		json_uint(&w, NULL, sb->dx_seed[i]);
	json_array_end(&w);
	json_uint(&w, "fs_generation", sb->fs_generation);
	if (journals->len && !CTL_VEC_AT(journals, struct journal_entry, 0)->err) {
		const struct o2_journal_info *j0 =
			&CTL_VEC_AT(journals, struct journal_entry, 0)->info;

		json_uint(&w, "journal_size", (uint64_t)j0->maxlen * j0->block_size);
	} else {
		json_null(&w, "journal_size");
	}
	json_array_begin(&w, "journals");
	for (size_t i = 0; i < journals->len; i++)
		info_journal_json(&w, CTL_VEC_AT(journals, struct journal_entry, i));
	json_array_end(&w);
	json_object_end(&w);
	json_finish(&w);
}

static void info_human(struct ctl *c, const struct o2_super_info *sb, const struct ctl_vec *journals)
{
	char uuid[33];
	char when[64];
	uint32_t free_clusters = sb->total_clusters >= sb->used_clusters ?
					 sb->total_clusters - sb->used_clusters : 0;

	print_uuid(sb->uuid, uuid);
	print_ctime((int64_t)sb->last_check, when, sizeof(when));
	printf("Label:               %s\n", sb->label);
	printf("UUID:                %s\n", uuid);
	printf("Revision:            %u.%u\n", sb->major_rev, sb->minor_rev);
	printf("Block size:          %u (bits %u)\n", sb->block_size, sb->block_bits);
	printf("Cluster size:        %u (bits %u)\n", sb->cluster_size, sb->cluster_bits);
	printf("Device blocks:       %" PRIu64 "\n", sb->device_blocks);
	printf("Clusters:            %u total, %u used, %u free\n", sb->total_clusters,
	       sb->used_clusters, free_clusters);
	printf("Free space:          %" PRIu64 " bytes\n", (uint64_t)free_clusters * sb->cluster_size);
	printf("Node slots:          %u\n", sb->max_slots);
	printf("Cluster stack:       %s", o2_fs_stack_name(c->fs));
	if (sb->cluster_name[0])
		printf("   Cluster name: %s", sb->cluster_name);
	printf("   Stack flags: 0x%x\n", sb->stack_flags);
	printf("Feature compat:      0x%x", sb->feature_compat);
	print_features_human(stdout, O2_COMPAT, sb->feature_compat);
	printf("\nFeature incompat:    0x%x", sb->feature_incompat);
	print_features_human(stdout, O2_INCOMPAT, sb->feature_incompat);
	printf("\nFeature ro-compat:   0x%x", sb->feature_ro_compat);
	print_features_human(stdout, O2_RO_COMPAT, sb->feature_ro_compat);
	printf("\nTunefs flags:        0x%x\n", sb->tunefs_flags);
	printf("Root directory:      %" PRIu64 "\n", sb->root_blkno);
	printf("System directory:    %" PRIu64 "\n", sb->system_dir_blkno);
	printf("First cluster group: %" PRIu64 "\n", sb->first_cluster_group);
	printf("Mount count:         %u (max %u)\n", sb->mnt_count, sb->max_mnt_count);
	printf("State:               %u   Errors: %u\n", sb->state, sb->errors);
	printf("Last check:          %s (interval %u)\n", when, sb->check_interval);
	printf("Creator OS:          %u\n", sb->creator_os);
	printf("Xattr inline size:   %u\n", sb->xattr_inline_size);
	printf("UUID hash:           %u (0x%x)\n", sb->uuid_hash, sb->uuid_hash);
	printf("DX seeds:            0x%08x 0x%08x 0x%08x\n", sb->dx_seed[0], sb->dx_seed[1],
	       sb->dx_seed[2]);
	printf("FS generation:       %u (0x%x)\n", sb->fs_generation, sb->fs_generation);
	for (size_t i = 0; i < journals->len; i++) {
		const struct journal_entry *j = CTL_VEC_AT(journals, struct journal_entry, i);

		if (j->err) {
			printf("Journal %-4u         unreadable: %s\n", j->slot, j->error);
			continue;
		}
		printf("Journal %-4u         inode %" PRIu64 ", %" PRIu64
		       " bytes, start %u, sequence %u, %s, recovery generation %u\n",
		       j->slot, j->info.inode_blkno, (uint64_t)j->info.maxlen * j->info.block_size,
		       j->info.start, j->info.sequence, (j->info.ij_flags & 1) ? "dirty" : "clean",
		       j->info.recovery_generation);
	}
}

int verb_info(struct ctl *c, int argc, char **argv)
{
	const struct o2_super_info *sb;
	struct ctl_vec journals;
	int status;
	int ret;

	status = ctl_open(c);
	if (status)
		return status;
	sb = o2_fs_super(c->fs);

	ctl_vec_init(&journals, sizeof(struct journal_entry));
	for (unsigned slot = 0; slot < sb->max_slots; slot++) {
		struct journal_entry j = { .slot = slot };

		/*
		 * A damaged journal is shown, not fatal: info is what one runs
		 * first on a sick volume (check gives the verdict).
		 */
		ret = o2_journal_info(c->fs, slot, &j.info);
		if (ret < 0) {
			j.err = ret;
			snprintf(j.error, sizeof(j.error), "%s", ctl_strerror(c, ret));
		}
		if (ctl_vec_push(&journals, &j) < 0) {
			status = ctl_fail(c, "%s", strerror(ENOMEM));
			goto out_free_journals;
		}
	}

	if (c->json)
		info_json(c, sb, &journals);
	else
		info_human(c, sb, &journals);
	status = CTL_EXIT_OK;

out_free_journals:
	ctl_vec_free(&journals);
	return status;
}

/* ---- slots ---- */

int verb_slots(struct ctl *c, int argc, char **argv)
{
	struct o2_slotmap_info *map;
	struct stat st;
	int status;
	int ret;

	/* a mount point: the live cluster, from the daemon that serves it */
	if (stat(c->image, &st) == 0 && S_ISDIR(st.st_mode))
		return ctl_daemon_cluster_state(c->image, c->json);
	status = ctl_open(c);
	if (status)
		return status;

	/* Big (255 slots): keep it off the stack. */
	map = calloc(1, sizeof(*map));
	if (!map)
		return ctl_fail(c, "%s", strerror(ENOMEM));
	ret = o2_slotmap_read(c->fs, map);
	if (ret < 0) {
		status = ctl_fail(c, "slot map: %s", ctl_strerror(c, ret));
		goto out_free_map;
	}
	if (map->nslots > sizeof(map->slots) / sizeof(map->slots[0])) {
		status = ctl_fail(c, "slot map: %u slots is more than %zu", map->nslots,
				  sizeof(map->slots) / sizeof(map->slots[0]));
		goto out_free_map;
	}

	if (c->json) {
		struct json_writer w;

		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_bool(&w, "extended", map->extended);
		json_uint(&w, "num_slots", map->nslots);
		json_array_begin(&w, "slots");
		for (unsigned i = 0; i < map->nslots; i++) {
			json_object_begin(&w, NULL);
			json_uint(&w, "slot", i);
			json_bool(&w, "valid", map->slots[i].valid);
			json_uint(&w, "node", map->slots[i].node);
			json_object_end(&w);
		}
		json_array_end(&w);
		json_object_end(&w);
		json_finish(&w);
	} else {
		printf("Slot map (%s format, %u slots)\n", map->extended ? "extended" : "legacy",
		       map->nslots);
		printf("%5s   %5s   %s\n", "Slot#", "Valid", "Node#");
		for (unsigned i = 0; i < map->nslots; i++) {
			if (map->slots[i].valid)
				printf("%5u   %5s   %u\n", i, "yes", map->slots[i].node);
			else
				printf("%5u   %5s   -\n", i, "no");
		}
	}
	status = CTL_EXIT_OK;

out_free_map:
	free(map);
	return status;
}

/* ---- check ---- */

/* The JSON verdict on a damaged volume. */
static void check_json_damaged(struct ctl *c, int err, const char *msg)
{
	struct json_writer w;

	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "image", c->image);
	json_bool(&w, "clean", false);
	json_string(&w, "error", msg);
	json_int(&w, "errno", -err);
	json_object_end(&w);
	json_finish(&w);
}

int verb_check(struct ctl *c, int argc, char **argv)
{
	struct o2_walk_stats st = { 0 };
	struct json_writer w;
	int status;
	int ret;

	if (c->via_daemon)
		return ctl_daemon_job("check", c->image, NULL, c->json, false);
	/*
	 * Opening reads the superblock and the system directory: damage there
	 * is a verdict too (but a foreign or missing file is just an error).
	 */
	status = ctl_open(c);
	if (status) {
		if (c->json && c->open_err == -EUCLEAN)
			check_json_damaged(c, c->open_err, c->open_msg);
		return status;
	}

	ret = o2_fs_walk(c->fs, &st);
	if (ret < 0) {
		const char *msg = ctl_strerror(c, ret);

		if (c->json)
			check_json_damaged(c, ret, msg);
		return ctl_fail(c, "%s: %s", c->image, msg);
	}

	if (c->json) {
		json_init(&w, stdout);
		json_object_begin(&w, NULL);
		json_string(&w, "image", c->image);
		json_bool(&w, "clean", true);
		json_uint(&w, "inodes", st.inodes);
		json_uint(&w, "dirs", st.dirs);
		json_uint(&w, "dirents", st.dirents);
		json_uint(&w, "extent_blocks", st.extent_blocks);
		json_uint(&w, "data_blocks", st.data_blocks);
		json_uint(&w, "groups", st.groups);
		json_uint(&w, "dx_blocks", st.dx_blocks);
		json_uint(&w, "xattrs", st.xattrs);
		json_uint(&w, "xattr_blocks", st.xattr_blocks);
		json_uint(&w, "refcount_trees", st.refcount_trees);
		json_uint(&w, "refcount_records", st.refcount_records);
		json_object_end(&w);
		json_finish(&w);
	} else {
		printf("%s: clean\n", c->image);
		printf("  inodes:        %" PRIu64 "\n", st.inodes);
		printf("  directories:   %" PRIu64 "\n", st.dirs);
		printf("  dir entries:   %" PRIu64 "\n", st.dirents);
		printf("  extent blocks: %" PRIu64 "\n", st.extent_blocks);
		printf("  data blocks:   %" PRIu64 "\n", st.data_blocks);
		printf("  groups:        %" PRIu64 "\n", st.groups);
		printf("  dx blocks:     %" PRIu64 "\n", st.dx_blocks);
		printf("  xattrs:        %" PRIu64 " (%" PRIu64 " blocks outside inodes)\n",
		       st.xattrs, st.xattr_blocks);
		printf("  refcount trees: %" PRIu64 " (%" PRIu64 " records)\n", st.refcount_trees,
		       st.refcount_records);
	}
	return CTL_EXIT_OK;
}
