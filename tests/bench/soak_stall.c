/*
 * soak_stall.c - an LD_PRELOAD shim that makes a directory source stall and
 * recover, for tests/bench/soak.sh: loaded into the daemon only, it makes
 * every open and read of a file under DLC_STALL_ROOT wait while the file
 * DLC_STALL_FLAG exists, and go on once it is removed.  That is what a
 * hard-mounted NFS or Lustre client does while its server is away: the
 * calls block in the kernel, none fails, and they all finish when the server
 * is back.  The daemon's deadline (source_timeout) is what must end a read
 * that waits too long; the shim never fails a call itself.
 *
 * Hooked: pread/pread64/preadv/preadv64 (data reads), openat/openat64 (the
 * fallback open of backend_posix.c) and syscall() for SYS_openat2 (its usual
 * open).  A call asks whether the flag exists first (one access(2)), so a
 * source that does not stall costs one system call per open or read; only
 * while stalled does it look up the descriptor's path in /proc/self/fd.
 * The cache's own files (under cache_dir) are never held.
 *
 * Build: cc -shared -fPIC -O2 -o soak_stall.so soak_stall.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static const char *flag_path(void)
{
	static const char *flag;

	if (!flag)
		flag = getenv("DLC_STALL_FLAG");
	return flag;
}

/* true when path (absolute, canonical) lies under DLC_STALL_ROOT */
static int under_root(const char *path)
{
	const char *root = getenv("DLC_STALL_ROOT");
	size_t n;

	if (!root || !*root)
		return 0;
	n = strlen(root);
	return strncmp(path, root, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

static int fd_under_root(int fd)
{
	char link[64], target[PATH_MAX];
	ssize_t n;

	if (fd == AT_FDCWD)
		return 0;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return under_root(target);
}

/* Waits, polling every 20 ms, while the flag exists and the call touches
 * the source (dirfd or fd under the root, or an absolute path under it). */
static void hold(int fd, const char *path)
{
	const char *flag = flag_path();
	struct timespec tick = { 0, 20 * 1000 * 1000 };

	if (!flag || access(flag, F_OK) != 0)
		return;
	if (path && path[0] == '/' ? !under_root(path) : !fd_under_root(fd))
		return;
	while (access(flag, F_OK) == 0)
		nanosleep(&tick, NULL);
}

/* real_NAME: the next definition of NAME (libc's), looked up once. */
#define REAL(name)                                                            \
	static __typeof__(&name) real_##name;                                 \
	if (!real_##name)                                                     \
		real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	REAL(pread);
	hold(fd, NULL);
	return real_pread(fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	REAL(pread64);
	hold(fd, NULL);
	return real_pread64(fd, buf, len, off);
}

ssize_t preadv(int fd, const struct iovec *iov, int n, off_t off)
{
	REAL(preadv);
	hold(fd, NULL);
	return real_preadv(fd, iov, n, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int n, off64_t off)
{
	REAL(preadv64);
	hold(fd, NULL);
	return real_preadv64(fd, iov, n, off);
}

static mode_t mode_of(int flags, va_list ap)
{
	return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	REAL(openat);
	va_start(ap, flags);
	mode = mode_of(flags, ap);
	va_end(ap);
	hold(dirfd, path);
	return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	mode_t mode;

	REAL(openat64);
	va_start(ap, flags);
	mode = mode_of(flags, ap);
	va_end(ap);
	hold(dirfd, path);
	return real_openat64(dirfd, path, flags, mode);
}

/* glibc's syscall(2) takes at most six arguments after the number; passing
 * all six on is what glibc's own wrapper does with them. */
long syscall(long number, ...)
{
	va_list ap;
	long a[6];
	int i;

	REAL(syscall);
	va_start(ap, number);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
#ifdef SYS_openat2
	if (number == SYS_openat2)
		hold((int)a[0], (const char *)a[1]);
#endif
	return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
