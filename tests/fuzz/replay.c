/*
 * replay.c - runs a libFuzzer target's LLVMFuzzerTestOneInput over files,
 * without libFuzzer: the checked-in corpus becomes a plain test in every
 * build (gcc, valgrind, the sanitizer build).
 *
 *     fuzz_control_replay FILE|DIR...
 *
 * A directory stands for the regular files directly inside it, in name
 * order.  Exits 0 after running every input (a failed CHECK aborts), 1 when
 * an argument cannot be read or names no input at all.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t size = 0, cap = 0, n;

	if (!f) {
		perror(path);
		return -1;
	}
	do {
		if (size == cap) {
			uint8_t *grown;

			cap = cap ? cap * 2 : 4096;
			grown = realloc(data, cap);
			if (!grown) {
				fclose(f);
				free(data);
				return -1;
			}
			data = grown;
		}
		n = fread(data + size, 1, cap - size, f);
		size += n;
	} while (n > 0);
	fclose(f);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	unsigned long inputs = 0;
	bool failed = false;

	for (int i = 1; i < argc; i++) {
		struct dirent **names;
		struct stat st;
		int n;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			failed = true;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= run_file(argv[i]) != 0;
			inputs++;
			continue;
		}
		n = scandir(argv[i], &names, NULL, by_name);
		if (n < 0) {
			perror(argv[i]);
			failed = true;
			continue;
		}
		for (int j = 0; j < n; j++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
			if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
				failed |= run_file(path) != 0;
				inputs++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("%s: %lu inputs replayed\n", argv[0], inputs);
	return failed || inputs == 0 ? 1 : 0;
}
