/*
 * fuzz.h - shared by the libFuzzer targets and their corpus replayer.
 *
 * CHECK is the targets' assert: it stays on in every build type (a release
 * build's NDEBUG must not turn an oracle off) and aborts, which libFuzzer
 * and the replayer both report as a crash with the failed condition.
 */
#ifndef DLCACHE_FUZZ_H
#define DLCACHE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                       \
		}                                                                      \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
