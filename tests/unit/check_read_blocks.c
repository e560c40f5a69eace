/*
 * check_read_blocks.c - the state of blocks.c (read/blocks.c): its flights
 * and its readers keep their INVARIANTS through reads that fly, stage and
 * hold blocks, and dlc_blocks_verify and dlc_blocks_reader_verify catch
 * each state the INVARIANTS rule out when it is made on purpose.
 *
 * White box: the flights (read/flights.c, with the state blocks.c shares
 * in blocks_private.h) keep their checks to themselves, so this suite
 * compiles flights.c in (its symbols take the place of the library's).  The source is an
 * in-memory file; a reader is made by hand, as dlc_blocks_open makes one,
 * without a snapshot.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/blob.h"
#include "dlcache/stats.h"

#include "../../src/read/flights.c"

#define BLOCK 4096u
#define FILE_BYTES (5 * BLOCK + 1000)   /* six blocks, the last short */

static unsigned char file[FILE_BYTES];
static struct dlc_stats stats;
static struct dlc_blocks *blocks;

static int memory_open(void *ctx, uint32_t ino, void **handle)
{
	(void)ctx;
	(void)ino;
	*handle = file;
	return 0;
}

static ssize_t memory_read(void *ctx, uint32_t ino, void *handle, void *buf, size_t len,
			   uint64_t off)
{
	(void)ctx;
	(void)ino;
	(void)handle;
	if (off >= FILE_BYTES)
		return 0;
	if (len > FILE_BYTES - off)
		len = FILE_BYTES - off;
	memcpy(buf, file + off, len);
	return (ssize_t)len;
}

static void setup(void)
{
	struct dlc_block_source source = { memory_open, memory_read, NULL, NULL };

	for (size_t i = 0; i < FILE_BYTES; i++)
		file[i] = (unsigned char)(i * 7 + (i >> 12));
	dlc_stats_init(&stats);
	blocks = dlc_blocks_create(&source, NULL, NULL, &stats, NULL, BLOCK, 4 * BLOCK, 0);
	ck_assert_ptr_nonnull(blocks);
}

static void teardown(void)
{
	dlc_blocks_free(blocks);
	dlc_stats_destroy(&stats);
}

/* A reader of the in-memory file, as dlc_blocks_open makes one. */
static struct dlc_block_reader *reader_new(void)
{
	struct dlc_block_reader *reader = calloc(1, sizeof(*reader));

	ck_assert_ptr_nonnull(reader);
	atomic_init(&reader->refs, 1);
	reader->blocks = blocks;
	reader->ino = 7;
	reader->size = FILE_BYTES;
	reader->nblocks = (uint32_t)((FILE_BYTES + BLOCK - 1) / BLOCK);
	reader->fd = -1;
	pthread_mutex_init(&reader->lock, NULL);
	return reader;
}

/* Reads the file in order, a block at a time, checking every byte. */
static void read_through(struct dlc_block_reader *reader)
{
	static char buf[BLOCK];

	for (uint64_t off = 0; off < FILE_BYTES; off += BLOCK) {
		ssize_t n = dlc_blocks_read(reader, buf, BLOCK, off);
		size_t want = FILE_BYTES - off < BLOCK ? FILE_BYTES - off : BLOCK;

		ck_assert_int_eq(n, (ssize_t)want);
		ck_assert_int_eq(memcmp(buf, file + off, want), 0);
		ck_assert_int_eq(dlc_blocks_reader_verify(reader), 0);
		ck_assert_int_eq(dlc_blocks_verify(blocks), 0);
	}
}

START_TEST(flights_verify_holds_and_catches_broken_states)
{
	struct dlc_block_reader *reader = reader_new();
	struct block_flight flying = { 0 }, staged = { 0 }, twin = { 0 };

	read_through(reader);
	dlc_blocks_stop(blocks);        /* readahead done: the list holds what it staged */

	pthread_mutex_lock(&blocks->lock);
	ck_assert_int_eq(verify_flights(blocks), 0);
	flying = (struct block_flight) { .ino = 9, .index = 0, .refs = 2, .listed = true,
					 .blocks = blocks, .next = blocks->flights };
	staged = (struct block_flight) { .ino = 9, .index = 1, .refs = 1, .listed = true,
					 .landed = true, .ahead = true, .owner = reader,
					 .blob = dlc_blob_alloc(BLOCK), .blocks = blocks,
					 .next = &flying };
	blocks->flights = &staged;
	ck_assert_int_eq(verify_flights(blocks), 0);
	flying.refs = 1;                /* flown with no reference of its flier */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	flying.refs = 2;
	flying.owner = reader;          /* a reader's own flight named for it */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	flying.owner = NULL;
	flying.listed = false;          /* in the list, marked out of it */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	flying.listed = true;
	staged.owner = NULL;            /* settled and staged for nobody: should be gone */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	staged.owner = reader;
	staged.rc = -EIO;               /* a failure still listed */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	staged.rc = 0;
	staged.settling = true;         /* settling without its offer's reference */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	staged.settling = false;
	twin = (struct block_flight) { .ino = 9, .index = 0, .refs = 2, .listed = true,
				       .blocks = blocks, .next = &staged };
	blocks->flights = &twin;        /* two flights of one block */
	ck_assert_int_eq(verify_flights(blocks), -EUCLEAN);
	blocks->flights = flying.next;
	ck_assert_int_eq(verify_flights(blocks), 0);
	pthread_mutex_unlock(&blocks->lock);
	dlc_blob_put(staged.blob);
	dlc_blocks_close(reader);
}
END_TEST

START_TEST(reader_verify_holds_and_catches_broken_states)
{
	struct dlc_block_reader *reader = reader_new();
	struct dlc_blob *wrong = dlc_blob_alloc(BLOCK);
	struct dlc_blob *saved;
	uint32_t index;

	ck_assert_int_eq(dlc_blocks_reader_verify(reader), 0);
	read_through(reader);

	pthread_mutex_lock(&reader->lock);
	ck_assert_ptr_nonnull(reader->held[0]);
	ck_assert_int_eq(verify_reader(reader), 0);
	index = reader->held_index[0];
	reader->held_index[0] = reader->nblocks;        /* a block past the file */
	ck_assert_int_eq(verify_reader(reader), -EUCLEAN);
	reader->held_index[0] = index;
	saved = reader->held[0];                        /* the last block, short */
	reader->held[0] = wrong;                        /* a whole block's length */
	ck_assert_int_eq(verify_reader(reader), -EUCLEAN);
	reader->held[0] = saved;
	reader->held[HELD_MAX - 1] = wrong;             /* past the slots in use */
	ck_assert_int_eq(verify_reader(reader), -EUCLEAN);
	reader->held[HELD_MAX - 1] = NULL;
	reader->window = blocks->readahead_blocks + 1;  /* wider than readahead_max */
	ck_assert_int_eq(verify_reader(reader), -EUCLEAN);
	reader->window = 0;
	reader->next_index = reader->nblocks + 1;       /* read past the file */
	ck_assert_int_eq(verify_reader(reader), -EUCLEAN);
	reader->next_index = reader->nblocks;
	ck_assert_int_eq(verify_reader(reader), 0);
	pthread_mutex_unlock(&reader->lock);
	dlc_blob_put(wrong);
	dlc_blocks_close(reader);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("read_blocks");
	TCase *tc = tcase_create("verify");
	SRunner *runner;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, flights_verify_holds_and_catches_broken_states);
	tcase_add_test(tc, reader_verify_holds_and_catches_broken_states);
	suite_add_tcase(s, tc);
	runner = srunner_create(s);
	srunner_run_all(runner, CK_ENV);
	failed = srunner_ntests_failed(runner);
	srunner_free(runner);
	return failed ? 1 : 0;
}
