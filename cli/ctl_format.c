/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ocfs2ctl format: make a new OCFS2 volume, with mkfs.ocfs2's option
 * letters.  It refuses to overwrite an existing filesystem (OCFS2 or any
 * other signature it knows) unless --force.
 *
 * The verb parses its whole command line itself (its options are not the
 * other verbs'): ocfs2ctl [--json] format [OPTIONS] DEVICE [BLOCKS].
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <glib.h>

#include "ctl.h"
#include "json.h"
#include "print.h"
#include "progress.h"

struct fmt {
	struct o2_mkfs_opts o;
	const char *image;
	uint64_t blocks_count; /* the optional BLOCKS operand */
	bool json, quiet, force, dry_run;
	struct progress prog; /* the offline format's bar (a terminal only) */
	uint64_t time_ns; /* --time */
	/* --via-daemon: the options as the daemon's Format takes them */
	bool via_daemon;
	const char *type_arg, *level_arg, *uuid_arg;
	char features_arg[1024];  /* every --fs-features list, joined */
};

static int fmt_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fmt_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("ocfs2ctl: format: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_FAIL;
}

static int fmt_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fmt_usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ocfs2ctl: format: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (try ocfs2ctl format --help)\n", stderr);
	return CTL_EXIT_USAGE;
}

static void fmt_help(FILE *out)
{
	fprintf(out,
		"Usage: ocfs2ctl [--json] format [OPTIONS] DEVICE|IMAGE [BLOCKS]\n"
		"\n"
		"Make a new OCFS2 volume, as mkfs.ocfs2 does.  BLOCKS limits the volume\n"
		"to that many blocks (of -b, 4096 without it) from the device's start.\n"
		"\n"
		"Options (sizes take K, M, G, T suffixes):\n"
		"  -b, --block-size SIZE       512, 1K, 2K or 4K (default: by volume size)\n"
		"  -C, --cluster-size SIZE     4K .. 1M, a power of two (default: by size)\n"
		"  -N, --node-slots N          1..255 node slots (default: by size; 1 if local)\n"
		"  -L, --label LABEL           volume label, at most 63 bytes\n"
		"  -J, --journal-options OPTS  size=SIZE (per slot, at least 4M), block32,\n"
		"                              block64\n"
		"  -T TYPE                     mail, datafiles or vmstore: tune the defaults\n"
		"  -M, --mount local|cluster   local: one node, no cluster stack\n"
		"      --fs-features LIST      e.g. noinline-data,metaecc ('no' turns off)\n"
		"      --fs-feature-level L    max-compat, default or max-features\n"
		"      --no-backup-super       same as --fs-features=nobackup-super\n"
		"      --cluster-stack NAME    o2cb, pcmk or cman (needs --cluster-name)\n"
		"      --cluster-name NAME     at most 16 characters\n"
		"  -U, --uuid UUID             the volume UUID (32 hex digits, dashes allowed)\n"
		"  -F, --force                 overwrite an existing filesystem\n"
		"  -n, --dry-run               show what would be made; write nothing\n"
		"  -q, --quiet                 no output on success, no progress bar\n"
		"      --via-daemon            let the running ocfs2d format (a D-Bus job;\n"
		"                              one is started if none runs), with every\n"
		"                              option here; ^C cancels it until it writes\n"
		"      --json                  what was made, as JSON (cli/README-json.md)\n"
		"  -h, --help                  this text\n"
		"\n"
		"For reproducible images (tests, builds):\n"
		"      --generation N          the volume generation\n"
		"      --dx-seed A,B,C         the indexed-directory hash seeds\n"
		"      --time SECONDS          the format time, seconds since the epoch\n"
		"\n"
		"Exit status: 0 made, 1 failure or refusal, 2 usage error.\n");
}

/* mkfs.ocfs2's number syntax: C integer, optional K/M/G/T/P (binary) or B suffix. */
static bool parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	switch (*end) {
	case '\0':
	case 'b':
	case 'B':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	case 'p':
	case 'P':
		shift = 50;
		break;
	default:
		return false;
	}
	if (*end && end[1])
		return false;
	if (shift && v > (UINT64_MAX >> shift))
		return false;
	*ret = (uint64_t)v << shift;
	return true;
}

static bool parse_u32(const char *s, uint32_t *ret)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > UINT32_MAX)
		return false;
	*ret = (uint32_t)v;
	return true;
}

static int parse_journal(struct fmt *f, const char *arg)
{
	char *copy = strdup(arg), *save = NULL;
	int status = CTL_EXIT_OK;

	if (!copy)
		return fmt_fail("%s", strerror(ENOMEM));
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool neg = !strncmp(tok, "no", 2);
		char *name = neg ? tok + 2 : tok, *val = strchr(name, '=');

		if (val)
			*val++ = '\0';
		if (!strcmp(name, "size") && val && !neg) {
			if (!parse_size(val, &f->o.journal_size) || !f->o.journal_size) {
				status = fmt_fail("-J size=%s: not a size", val);
				break;
			}
		} else if (!strcmp(name, "block32") && !val) {
			f->o.journal64 = neg ? O2_MKFS_J64_ON : O2_MKFS_J64_OFF;
		} else if (!strcmp(name, "block64") && !val) {
			f->o.journal64 = neg ? O2_MKFS_J64_OFF : O2_MKFS_J64_ON;
		} else {
			status = fmt_fail("-J %s: bad journal option (size=SIZE, [no]block32, "
					  "[no]block64)", arg);
			break;
		}
	}
	free(copy);
	return status;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool parse_uuid(const char *s, uint8_t out[16])
{
	unsigned n = 0;

	for (; *s; s++) {
		int hi, lo;

		if (*s == '-')
			continue;
		if (n == 16 || !s[1])
			return false;
		hi = hexval(s[0]);
		lo = hexval(s[1]);
		if (hi < 0 || lo < 0)
			return false;
		out[n++] = (uint8_t)(hi << 4 | lo);
		s++;
	}
	return n == 16;
}

/* ---- what the device holds now ---- */

static bool at(const uint8_t *buf, size_t len, size_t off, const void *magic, size_t mlen)
{
	return off + mlen <= len && !memcmp(buf + off, magic, mlen);
}

/* The name of a filesystem or container whose signature buf (the device's start) shows. */
static const char *foreign_signature(const uint8_t *buf, size_t len)
{
	static const size_t swap_offs[] = { 4086, 8182, 16374, 32758, 65526 };

	if (at(buf, len, 1080, "\x53\xef", 2))
		return "an ext2/ext3/ext4 filesystem";
	if (at(buf, len, 0, "XFSB", 4))
		return "an XFS filesystem";
	if (at(buf, len, 0x10040, "_BHRfS_M", 8))
		return "a btrfs filesystem";
	if (at(buf, len, 0, "LUKS\xba\xbe", 6))
		return "a LUKS encrypted volume";
	if (at(buf, len, 512, "EFI PART", 8))
		return "a GPT partition table";
	if (at(buf, len, 32769, "CD001", 5))
		return "an ISO 9660 filesystem";
	for (size_t i = 0; i < sizeof(swap_offs) / sizeof(swap_offs[0]); i++)
		if (at(buf, len, swap_offs[i], "SWAPSPACE2", 10) ||
		    at(buf, len, swap_offs[i], "SWAP-SPACE", 10))
			return "a swap area";
	if (at(buf, len, 8, "this is an ocfs2 volume", 23))
		return "what looks like an OCFS2 volume";
	return NULL;
}

/*
 * Where the device is mounted, or NULL: a block device by its device
 * number, anything (a FUSE mount of an image, say) by its mount source.
 * The answer is in buf.
 */
static const char *mounted_at(const char *path, char *buf, size_t len)
{
	struct stat st;
	char *real = realpath(path, NULL);
	FILE *mi = fopen("/proc/self/mountinfo", "r");
	char *line = NULL;
	size_t cap = 0;
	const char *found = NULL;

	if (!mi || stat(path, &st) < 0)
		goto out;
	while (!found && getline(&line, &cap, mi) > 0) {
		unsigned maj, min;
		char mnt[4096], src[4096];
		const char *sep = strstr(line, " - ");

		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) != 3 || !sep ||
		    sscanf(sep + 3, "%*s %4095s", src) != 1)
			continue;
		if ((S_ISBLK(st.st_mode) && major(st.st_rdev) == maj && minor(st.st_rdev) == min) ||
		    (real && !strcmp(src, real))) {
			snprintf(buf, len, "%s", mnt);
			found = buf;
		}
	}
out:
	free(line);
	free(real);
	if (mi)
		fclose(mi);
	return found;
}

/* 0 if the device may be formatted; otherwise it says why not and returns 1. */
static int check_existing(struct fmt *f, struct o2_blockdev *dev)
{
	char errbuf[256] = "";
	struct o2_fs *fs = NULL;
	uint8_t *buf;
	size_t len;
	const char *what;
	int ret = o2_fs_open(dev, O2_OPEN_RDONLY, &fs, errbuf, sizeof(errbuf));

	if (ret == 0) {
		const struct o2_super_info *sb = o2_fs_super(fs);
		char uuid[33];
		int status;

		print_uuid(sb->uuid, uuid);
		status = fmt_fail("%s holds an OCFS2 volume (label '%s', UUID %s); use --force to "
				  "overwrite it", f->image, sb->label, uuid);
		o2_fs_close(fs);
		return status;
	}
	if (ret != -ENODATA && ret != -EIO && ret != -ENXIO)
		return fmt_fail("%s holds an OCFS2 volume ocfs2ctl cannot open (%s); use --force "
				"to overwrite it", f->image, errbuf[0] ? errbuf : strerror(-ret));

	len = dev->size < (128u << 10) ? (size_t)dev->size : (128u << 10);
	len -= len % dev->sector_size;
	if (!len)
		return 0;
	buf = malloc(len);
	if (!buf)
		return fmt_fail("%s", strerror(ENOMEM));
	ret = o2_blockdev_read(dev, buf, len, 0);
	if (ret < 0) {
		free(buf);
		return fmt_fail("%s: reading: %s", f->image, strerror(-ret));
	}
	what = foreign_signature(buf, len);
	free(buf);
	if (what)
		return fmt_fail("%s holds %s; use --force to overwrite it", f->image, what);
	return 0;
}

/* ---- output ---- */

static void progress_cb(void *arg, unsigned done, unsigned total)
{
	struct fmt *f = arg;

	progress_show(&f->prog, total ? (double)done / total : 1, -1, NULL);
}

static const char *type_name(enum o2_mkfs_type t)
{
	switch (t) {
	case O2_MKFS_TYPE_DATAFILES:
		return "datafiles";
	case O2_MKFS_TYPE_MAIL:
		return "mail";
	case O2_MKFS_TYPE_VMSTORE:
		return "vmstore";
	default:
		return "default";
	}
}

static const char *stack_words(const struct o2_mkfs_info *info)
{
	if (info->local)
		return "local";
	if (!info->stack[0])
		return "classic o2cb";
	return info->stack;
}

static void print_human(const struct fmt *f, const struct o2_mkfs_info *info)
{
	char uuid[33];

	print_uuid(info->uuid, uuid);
	printf("%s %s:\n", f->dry_run ? "Would make" : "Made", f->image);
	printf("Filesystem type:       %s\n", type_name(info->type));
	printf("Label:                 %s\n", info->label);
	printf("UUID:                  %s\n", f->dry_run && !f->o.have_uuid ? "(random)" : uuid);
	printf("Features:             ");
	print_features_human(stdout, O2_COMPAT, info->features.compat);
	print_features_human(stdout, O2_INCOMPAT, info->features.incompat);
	print_features_human(stdout, O2_RO_COMPAT, info->features.ro_compat);
	printf("\nCluster stack:         %s", stack_words(info));
	if (info->cluster_name[0])
		printf(" (cluster %s)", info->cluster_name);
	printf("\nBlock size:            %u\n", info->block_size);
	printf("Cluster size:          %u\n", info->cluster_size);
	printf("Volume size:           %" PRIu64 " (%u clusters, %" PRIu64 " blocks)\n",
	       info->volume_bytes, info->clusters, info->blocks);
	printf("Cluster groups:        %u (tail covers %u clusters, rest cover %u clusters)\n",
	       info->cluster_groups, info->tail_group_clusters, info->clusters_per_group);
	printf("Extent allocator size: %" PRIu64 " (%u groups)\n",
	       (uint64_t)info->extent_alloc_clusters * info->cluster_size,
	       info->extent_alloc_groups);
	printf("Journal size:          %" PRIu64 "%s\n", info->journal_bytes,
	       info->journal64 ? " (64-bit block numbers)" : "");
	printf("Node slots:            %u\n", info->slots);
	printf("Backup superblocks:    %u\n", info->backup_supers);
}

static void print_json(const struct fmt *f, const struct o2_mkfs_info *info)
{
	struct json_writer w;
	char uuid[33];

	print_uuid(info->uuid, uuid);
	json_init(&w, stdout);
	json_object_begin(&w, NULL);
	json_string(&w, "image", f->image);
	json_bool(&w, "dry_run", f->dry_run);
	json_string(&w, "label", info->label);
	if (f->dry_run && !f->o.have_uuid)
		json_null(&w, "uuid"); /* drawn when the volume is made */
	else
		json_string(&w, "uuid", uuid);
	json_string(&w, "type", type_name(info->type));
	json_uint(&w, "block_size", info->block_size);
	json_uint(&w, "cluster_size", info->cluster_size);
	json_uint(&w, "volume_size", info->volume_bytes);
	json_uint(&w, "blocks", info->blocks);
	json_uint(&w, "clusters", info->clusters);
	json_uint(&w, "used_clusters", info->used_clusters);
	json_uint(&w, "cluster_groups", info->cluster_groups);
	json_uint(&w, "clusters_per_group", info->clusters_per_group);
	json_uint(&w, "tail_group_clusters", info->tail_group_clusters);
	json_uint(&w, "max_slots", info->slots);
	json_uint(&w, "journal_size", info->journal_bytes);
	json_bool(&w, "journal64", info->journal64);
	json_uint(&w, "extent_alloc_size", (uint64_t)info->extent_alloc_clusters * info->cluster_size);
	json_uint(&w, "extent_alloc_groups", info->extent_alloc_groups);
	json_bool(&w, "local", info->local);
	json_string(&w, "stack", info->stack);
	json_string(&w, "stack_name", info->local ? "local" : info->stack[0] ? info->stack : "o2cb");
	json_string(&w, "cluster_name", info->cluster_name);
	json_uint(&w, "feature_compat", info->features.compat);
	json_uint(&w, "feature_incompat", info->features.incompat);
	json_uint(&w, "feature_ro_compat", info->features.ro_compat);
	json_object_begin(&w, "features");
	print_features_json(&w, "compat", O2_COMPAT, info->features.compat);
	print_features_json(&w, "incompat", O2_INCOMPAT, info->features.incompat);
	print_features_json(&w, "ro_compat", O2_RO_COMPAT, info->features.ro_compat);
	json_object_end(&w);
	json_uint(&w, "root_blkno", info->root_blkno);
	json_uint(&w, "system_dir_blkno", info->system_dir_blkno);
	json_uint(&w, "first_cluster_group", info->first_cluster_group);
	json_array_begin(&w, "backup_superblocks");
	for (unsigned i = 0; i < info->backup_supers; i++)
		json_uint(&w, NULL, info->backup_super_blkno[i]);
	json_array_end(&w);
	if (f->dry_run && !f->o.have_generation)
		json_null(&w, "fs_generation");
	else
		json_uint(&w, "fs_generation", info->generation);
	if (f->dry_run && !f->o.have_uuid)
		json_null(&w, "uuid_hash");
	else
		json_uint(&w, "uuid_hash", info->uuid_hash);
	if (f->dry_run && !f->o.have_dx_seed) {
		json_null(&w, "dx_seed");
	} else {
		json_array_begin(&w, "dx_seed");
		for (unsigned i = 0; i < 3; i++)
			json_uint(&w, NULL, info->dx_seed[i]);
		json_array_end(&w);
	}
	json_int(&w, "format_time", info->format_time);
	json_object_end(&w);
	json_finish(&w);
}

/* ---- the verb ---- */

enum {
	OPT_FEATURES = 256,
	OPT_LEVEL,
	OPT_STACK,
	OPT_NAME,
	OPT_NO_BACKUP,
	OPT_JSON,
	OPT_GENERATION,
	OPT_DX_SEED,
	OPT_TIME,
	OPT_VIA_DAEMON,
};

static const struct option fmt_options[] = {
	{ "block-size", required_argument, NULL, 'b' },
	{ "cluster-size", required_argument, NULL, 'C' },
	{ "node-slots", required_argument, NULL, 'N' },
	{ "label", required_argument, NULL, 'L' },
	{ "journal-options", required_argument, NULL, 'J' },
	{ "mount", required_argument, NULL, 'M' },
	{ "uuid", required_argument, NULL, 'U' },
	{ "force", no_argument, NULL, 'F' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "fs-features", required_argument, NULL, OPT_FEATURES },
	{ "fs-feature-level", required_argument, NULL, OPT_LEVEL },
	{ "cluster-stack", required_argument, NULL, OPT_STACK },
	{ "cluster-name", required_argument, NULL, OPT_NAME },
	{ "no-backup-super", no_argument, NULL, OPT_NO_BACKUP },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "generation", required_argument, NULL, OPT_GENERATION },
	{ "dx-seed", required_argument, NULL, OPT_DX_SEED },
	{ "time", required_argument, NULL, OPT_TIME },
	{ "via-daemon", no_argument, NULL, OPT_VIA_DAEMON },
	{ NULL, 0, NULL, 0 },
};

/* Keep an --fs-features list for the daemon, which takes them joined. */
static void add_features_arg(struct fmt *f, const char *list)
{
	size_t len = strlen(f->features_arg);

	snprintf(f->features_arg + len, sizeof(f->features_arg) - len, "%s%s", len ? "," : "", list);
}

/* The format through the daemon: what was parsed, as Format's options. */
static int format_via_daemon(struct fmt *f)
{
	GVariantBuilder b;

	if (f->blocks_count > UINT64_MAX / (f->o.block_size ? f->o.block_size : 4096))
		return fmt_fail("%" PRIu64 " blocks: more than any device holds", f->blocks_count);
#define ADD(key, value) g_variant_builder_add(&b, "{sv}", key, value)
	g_variant_builder_init(&b, G_VARIANT_TYPE_VARDICT);
	if (f->o.block_size)
		ADD("block_size", g_variant_new_uint32(f->o.block_size));
	if (f->o.cluster_size)
		ADD("cluster_size", g_variant_new_uint32(f->o.cluster_size));
	if (f->o.slots)
		ADD("slots", g_variant_new_uint32(f->o.slots));
	if (f->o.journal_size)
		ADD("journal_size", g_variant_new_uint64(f->o.journal_size));
	if (f->o.journal64 != O2_MKFS_J64_AUTO)
		ADD("journal64", g_variant_new_boolean(f->o.journal64 == O2_MKFS_J64_ON));
	if (f->o.label)
		ADD("label", g_variant_new_string(f->o.label));
	if (f->type_arg)
		ADD("type", g_variant_new_string(f->type_arg));
	if (f->level_arg)
		ADD("feature_level", g_variant_new_string(f->level_arg));
	if (f->features_arg[0])
		ADD("features", g_variant_new_string(f->features_arg));
	if (f->o.mount != O2_MKFS_MOUNT_DEFAULT)
		ADD("local", g_variant_new_boolean(f->o.mount == O2_MKFS_MOUNT_LOCAL));
	if (f->o.cluster_stack)
		ADD("cluster_stack", g_variant_new_string(f->o.cluster_stack));
	if (f->o.cluster_name)
		ADD("cluster_name", g_variant_new_string(f->o.cluster_name));
	if (f->blocks_count)
		ADD("volume_size", g_variant_new_uint64(f->blocks_count *
							(f->o.block_size ? f->o.block_size : 4096)));
	if (f->uuid_arg)
		ADD("uuid", g_variant_new_string(f->uuid_arg));
	if (f->o.have_generation)
		ADD("generation", g_variant_new_uint32(f->o.generation));
	if (f->o.have_dx_seed)
		ADD("dx_seed", g_variant_new_fixed_array(G_VARIANT_TYPE_UINT32, f->o.dx_seed, 3,
							 sizeof(uint32_t)));
	if (f->o.now_ns)
		ADD("time", g_variant_new_uint64(f->time_ns / 1000000000ull));
	if (f->dry_run)
		ADD("dry_run", g_variant_new_boolean(TRUE));
	if (f->force)
		ADD("force", g_variant_new_boolean(TRUE));
#undef ADD
	return ctl_daemon_job("format", f->image, g_variant_builder_end(&b), f->json, f->quiet);
}

static uint64_t fixed_time(void *arg)
{
	return *(const uint64_t *)arg;
}

static int parse_args(struct fmt *f, int argc, char **argv, bool *help)
{
	char errbuf[256];
	uint64_t v;
	uint32_t u;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":b:C:N:L:J:M:T:U:Fnqh", fmt_options, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (!parse_size(optarg, &v) || v > UINT32_MAX)
				return fmt_fail("block size '%s': not a size", optarg);
			f->o.block_size = (unsigned)v;
			if (!v)
				return fmt_fail("block size 0: must be 512, 1024, 2048 or 4096");
			break;
		case 'C':
			if (!parse_size(optarg, &v) || v > UINT32_MAX)
				return fmt_fail("cluster size '%s': not a size", optarg);
			f->o.cluster_size = (unsigned)v;
			if (!v)
				return fmt_fail("cluster size 0: must be a power of two from 4K to 1M");
			break;
		case 'N':
			if (!parse_u32(optarg, &u))
				return fmt_fail("node slots '%s': not a number", optarg);
			if (u < 1)
				return fmt_fail("node slots: at least 1");
			if (u > 255)
				return fmt_fail("%u node slots: at most 255", u);
			f->o.slots = u;
			break;
		case 'L':
			f->o.label = optarg;
			break;
		case 'J':
			if (parse_journal(f, optarg))
				return CTL_EXIT_FAIL;
			break;
		case 'M':
			if (!strcasecmp(optarg, "local"))
				f->o.mount = O2_MKFS_MOUNT_LOCAL;
			else if (!strcasecmp(optarg, "cluster"))
				f->o.mount = O2_MKFS_MOUNT_CLUSTER;
			else
				return fmt_fail("mount type '%s': local or cluster", optarg);
			break;
		case 'T':
			f->type_arg = optarg;
			if (o2_mkfs_parse_type(optarg, &f->o.type) < 0)
				return fmt_fail("filesystem type '%s': mail, datafiles or vmstore",
						optarg);
			break;
		case 'U':
			f->uuid_arg = optarg;
			if (!parse_uuid(optarg, f->o.uuid))
				return fmt_fail("UUID '%s': 32 hex digits expected", optarg);
			f->o.have_uuid = true;
			break;
		case 'F':
			f->force = true;
			break;
		case 'n':
			f->dry_run = true;
			break;
		case 'q':
			f->quiet = true;
			break;
		case 'h':
			*help = true;
			break;
		case OPT_FEATURES:
			add_features_arg(f, optarg);
			if (o2_mkfs_parse_features(optarg, &f->o.features_on, &f->o.features_off,
						   errbuf, sizeof(errbuf)) < 0)
				return fmt_fail("--fs-features=%s: %s", optarg, errbuf);
			break;
		case OPT_LEVEL:
			f->level_arg = optarg;
			if (o2_mkfs_parse_level(optarg, &f->o.level) < 0)
				return fmt_fail("feature level '%s': max-compat, default or "
						"max-features", optarg);
			break;
		case OPT_STACK:
			if (!*optarg)
				return fmt_fail("--cluster-stack needs a name");
			f->o.cluster_stack = optarg;
			break;
		case OPT_NAME:
			if (!*optarg)
				return fmt_fail("--cluster-name needs a name");
			f->o.cluster_name = optarg;
			break;
		case OPT_NO_BACKUP:
			add_features_arg(f, "nobackup-super");
			f->o.features_off.compat |= O2_FEATURE_COMPAT_BACKUP_SB;
			break;
		case OPT_JSON:
			f->json = true;
			break;
		case OPT_GENERATION:
			if (!parse_u32(optarg, &f->o.generation))
				return fmt_fail("generation '%s': not a 32-bit number", optarg);
			f->o.have_generation = true;
			break;
		case OPT_DX_SEED: {
			char *copy = strdup(optarg), *save = NULL, *tok;
			unsigned n = 0;

			if (!copy)
				return fmt_fail("%s", strerror(ENOMEM));
			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (n == 3 || !parse_u32(tok, &f->o.dx_seed[n])) {
					n = 4;
					break;
				}
				n++;
			}
			free(copy);
			if (n != 3)
				return fmt_fail("--dx-seed=%s: three 32-bit numbers expected", optarg);
			f->o.have_dx_seed = true;
			break;
		}
		case OPT_TIME:
			if (!parse_size(optarg, &v) || v > INT64_MAX / 1000000000ll)
				return fmt_fail("--time=%s: seconds since the epoch expected", optarg);
			f->time_ns = v * 1000000000ull;
			f->o.now_ns = fixed_time;
			f->o.clock_arg = &f->time_ns;
			break;
		case OPT_VIA_DAEMON:
			f->via_daemon = true;
			break;
		case ':':
			return fmt_usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return fmt_usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (*help)
		return CTL_EXIT_OK;
	if (optind >= argc)
		return fmt_usage_error("no device or image given");
	f->image = argv[optind++];
	if (optind < argc) {
		if (!parse_size(argv[optind], &f->blocks_count) || !f->blocks_count)
			return fmt_usage_error("blocks count '%s': not a number", argv[optind]);
		optind++;
	}
	if (optind < argc)
		return fmt_usage_error("unexpected argument '%s'", argv[optind]);
	return CTL_EXIT_OK;
}

int ctl_format_main(int argc, char **argv, bool json)
{
	struct fmt f = { .json = json };
	struct o2_blockdev *dev = NULL;
	struct o2_mkfs_info info;
	char errbuf[512] = "";
	bool help = false;
	bool bar;
	int status, ret;

	status = parse_args(&f, argc, argv, &help);
	if (status != CTL_EXIT_OK)
		return status;
	if (help) {
		fmt_help(stdout);
		return CTL_EXIT_OK;
	}
	if (f.via_daemon)
		return format_via_daemon(&f);

	{
		char where[4096];

		if (mounted_at(f.image, where, sizeof(where)))
			return fmt_fail("%s is mounted on %s; will not format it", f.image, where);
	}
	ret = o2_blockdev_open_file(f.image, f.dry_run ? O2_DEV_RDONLY : 0, &dev);
	if (ret < 0)
		return fmt_fail("%s: %s", f.image, strerror(-ret));
	if (f.blocks_count) {
		unsigned bs = f.o.block_size ? f.o.block_size : 4096;

		if (f.blocks_count > dev->size / bs) {
			status = fmt_fail("%" PRIu64 " blocks of %u bytes is more than %s holds "
					  "(%" PRIu64 " bytes)", f.blocks_count, bs, f.image, dev->size);
			goto out;
		}
		f.o.volume_size = f.blocks_count * bs;
	}
	/* the options first: a bad value is reported before anything is examined */
	ret = o2_mkfs_plan(dev->size, &f.o, &info, errbuf, sizeof(errbuf));
	if (ret < 0) {
		status = fmt_fail("%s", errbuf[0] ? errbuf : strerror(-ret));
		goto out;
	}
	if (!f.force) {
		status = check_existing(&f, dev);
		if (status)
			goto out;
	}
	if (f.dry_run) {
		if (f.json)
			print_json(&f, &info);
		else if (!f.quiet)
			print_human(&f, &info);
		status = CTL_EXIT_OK;
		goto out;
	}
	/* a bar on a terminal; no lines into a pipe (the result says it all) */
	progress_init(&f.prog, "Formatting", "format", false, f.quiet || f.json);
	bar = !f.prog.off;
	ret = o2_mkfs(dev, &f.o, bar ? progress_cb : NULL, &f, &info, errbuf, sizeof(errbuf));
	progress_end(&f.prog);
	if (ret < 0) {
		status = fmt_fail("%s: %s", f.image, errbuf[0] ? errbuf : strerror(-ret));
		goto out;
	}
	if (f.json)
		print_json(&f, &info);
	else if (!f.quiet)
		print_human(&f, &info);
	status = CTL_EXIT_OK;
out:
	o2_blockdev_free(dev);
	if (fflush(stdout) != 0 && status == CTL_EXIT_OK)
		status = fmt_fail("writing output: %s", strerror(errno));
	return status;
}
