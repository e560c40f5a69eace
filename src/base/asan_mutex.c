/*
 * asan_mutex.c - AddressSanitizer builds only: makes ASan check the mutex
 * that any library locks or unlocks.
 *
 * ASan checks the memory that instrumented code touches.  libfuse, glibc
 * and the other libraries are not instrumented, and ASan's own interceptors
 * of pthread_mutex_lock/unlock do not check their argument, so a library
 * that unlocks a mutex inside memory already freed (libfuse did, when an
 * interrupt callback replied from inside fuse_req_interrupt_func: see
 * src/fuse/pending.c) writes to freed memory unseen.  This file, linked
 * into the dlcache executable of a -Db_sanitize=address build (meson.build),
 * defines pthread_mutex_lock and pthread_mutex_unlock in the executable,
 * which comes first in symbol lookup: every library's call lands here, is
 * checked with one instrumented read, and goes on to the next definition
 * (ASan's interceptor, then glibc's).  A freed or out-of-bounds mutex is
 * then an ordinary ASan report, with the stacks of its free and its use.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <stdatomic.h>

typedef int (*mutex_call)(pthread_mutex_t *);

int pthread_mutex_lock(pthread_mutex_t *mutex);
int pthread_mutex_unlock(pthread_mutex_t *mutex);

/* The definition after this one: resolved once, on first use. */
static mutex_call next(_Atomic(mutex_call) *slot, const char *name)
{
	mutex_call call = atomic_load_explicit(slot, memory_order_acquire);

	if (!call) {
		call = (mutex_call)dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, call, memory_order_release);
	}
	return call;
}

/* An instrumented read of the poisoned byte: ASan reports it and stops. */
static void check(pthread_mutex_t *mutex)
{
	volatile const char *bad = __asan_region_is_poisoned(mutex, sizeof(*mutex));

	if (bad)
		(void)*bad;
}

int pthread_mutex_lock(pthread_mutex_t *mutex)
{
	static _Atomic(mutex_call) real;

	check(mutex);
	return next(&real, "pthread_mutex_lock")(mutex);
}

int pthread_mutex_unlock(pthread_mutex_t *mutex)
{
	static _Atomic(mutex_call) real;

	check(mutex);
	return next(&real, "pthread_mutex_unlock")(mutex);
}
