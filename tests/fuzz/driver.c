/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The replay driver: built without libFuzzer, it turns a fuzz target into a
 * normal program that runs LLVMFuzzerTestOneInput on every file of the
 * corpus directories (or single files) named on its command line, in name
 * order.  Files whose names begin with '.' or "README" are skipped.  A
 * finding aborts the program, so the test fails and names the input last
 * printed.  A directory that does not exist is skipped with a note.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#define FZ_MAX_INPUT (16u << 20)

static unsigned long ran;

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	buf = malloc(FZ_MAX_INPUT);
	if (!buf) {
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, FZ_MAX_INPUT, f);
	fclose(f);
	printf("replay %s (%zu bytes)\n", path, n);
	fflush(stdout);
	/* a copy of exactly n bytes, so ASan sees reads past the input */
	uint8_t *in = malloc(n ? n : 1);
	if (!in) {
		free(buf);
		return -1;
	}
	memcpy(in, buf, n);
	free(buf);
	LLVMFuzzerTestOneInput(in, n);
	free(in);
	ran++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;

	if (!d) {
		printf("%s: %s (skipped)\n", dir, strerror(errno));
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || strncmp(de->d_name, "README", 6) == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				r = -1;
				break;
			}
			names = nn;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (r == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			r = run_file(path);
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	int r = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc && r == 0; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode))
			r = run_file(argv[i]);
		else
			r = run_dir(argv[i]);
	}
	printf("%lu inputs replayed\n", ran);
	return r == 0 ? 0 : 1;
}
