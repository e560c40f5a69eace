/*
 * backend.c - driver selection and the counting wrappers around every driver.
 *
 * dlc_backend_create() looks at the form of SOURCE and hands the new struct
 * dlc_backend to the matching driver, which fills ops and priv: "/path" goes
 * to the posix driver, the NFS forms ("host:/export/path",
 * "nfs://host/export/path?version=4", see nfs_source.h) to the NFS driver,
 * "s3://BUCKET/PREFIX" (s3_source.h) to the S3 driver, and a relative path (the options module makes directories absolute before
 * this point) is refused as such.
 *
 * Every other module reaches the remote through the dlc_backend_* wrappers
 * below, never through ops directly: each wrapper counts its call in
 * calls[op] and, when the driver returns a negative value, in errors.  The
 * counters are relaxed atomics; they are statistics, not synchronisation.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlcache/cause.h"
#include "dlcache/backend.h"
#include "dlcache/nfs_source.h"
#include "dlcache/s3_source.h"

static void count_call(struct dlc_backend *backend, enum dlc_backend_op op, long long rc)
{
	atomic_fetch_add_explicit(&backend->calls[op], 1, memory_order_relaxed);
	if (rc < 0)
		atomic_fetch_add_explicit(&backend->errors, 1, memory_order_relaxed);
}

int dlc_backend_create(const char *source, const struct dlc_backend_config *config,
		       struct dlc_backend **out, char **cause)
{
	static const struct dlc_backend_config no_emulation;
	struct dlc_backend *backend;
	int rc;

	if (cause)
		*cause = NULL;
	*out = NULL;
	if (!source || !*source) {
		dlc_cause_set(cause, "no source given; give the dataset's directory");
		return -EINVAL;
	}
	if (source[0] != '/' && !dlc_nfs_source_matches(source) && !dlc_s3_source_matches(source)) {
		dlc_cause_set(cause, "source '%s' is not an absolute path; give the "
			  "dataset's directory as /path", source);
		return -EINVAL;
	}
	if (!config)
		config = &no_emulation;

	backend = calloc(1, sizeof(*backend));
	if (!backend) {
		rc = -ENOMEM;
		goto err_oom;
	}
	backend->source = strdup(source);
	if (!backend->source) {
		rc = -ENOMEM;
		goto err_free_backend;
	}
	for (int op = 0; op < DLC_BACKEND_OP_COUNT; op++)
		atomic_init(&backend->calls[op], 0);
	atomic_init(&backend->errors, 0);

	/* s3:// first: the NFS matcher claims every other "scheme://". */
	if (dlc_s3_source_matches(source))
		rc = dlc_backend_s3_create(source, config, backend, cause);
	else if (dlc_nfs_source_matches(source))
		rc = dlc_backend_nfs_create(source, config, backend, cause);
	else
		rc = dlc_backend_posix_create(source, config, backend, cause);
	if (rc < 0)
		goto err_free_source;
	/*
	 * The source's identity, recorded in snapshots and in the cache index:
	 * the same bucket and prefix on another S3 endpoint is another dataset,
	 * so the endpoint is part of it.
	 */
	if (dlc_s3_source_matches(source) && config->s3_endpoint && *config->s3_endpoint) {
		char *named;

		if (asprintf(&named, "%s at %s", source, config->s3_endpoint) < 0) {
			backend->ops->destroy(backend->priv);
			rc = -ENOMEM;
			goto err_free_source;
		}
		free(backend->source);
		backend->source = named;
	}
	/* The NFS and S3 drivers bound their own calls. */
	if (source[0] == '/') {
		rc = dlc_backend_deadline_wrap(backend, config->timeout_ns ? config->timeout_ns
									 : DLC_BACKEND_DEFAULT_TIMEOUT_NS);
		if (rc < 0) {
			backend->ops->destroy(backend->priv);
			goto err_free_source;
		}
	}
	*out = backend;
	return 0;

err_free_source:
	free(backend->source);
err_free_backend:
	free(backend);
err_oom:
	if (rc == -ENOMEM && cause && !*cause)
		dlc_cause_set(cause, "out of memory while opening source '%s'", source);
	return rc;
}

void dlc_backend_destroy(struct dlc_backend *backend)
{
	if (!backend)
		return;
	if (backend->ops && backend->ops->destroy)
		backend->ops->destroy(backend->priv);
	free(backend->source);
	free(backend);
}

int dlc_backend_list(struct dlc_backend *backend, const char *dir,
		     dlc_backend_list_cb cb, void *arg)
{
	int rc;

	dlc_cause_thread_clear();
	rc = backend->ops->list(backend->priv, dir, cb, arg);

	count_call(backend, DLC_BACKEND_LIST, rc);
	return rc;
}

int dlc_backend_stat(struct dlc_backend *backend, const char *path,
		     struct dlc_backend_attr *out)
{
	int rc = backend->ops->stat(backend->priv, path, out);

	count_call(backend, DLC_BACKEND_STAT, rc);
	return rc;
}

int dlc_backend_open(struct dlc_backend *backend, const char *path,
		     struct dlc_backend_file **out)
{
	int rc = backend->ops->open(backend->priv, path, out);

	count_call(backend, DLC_BACKEND_OPEN, rc);
	return rc;
}

ssize_t dlc_backend_pread(struct dlc_backend *backend, struct dlc_backend_file *file,
			  void *buf, size_t len, uint64_t off)
{
	ssize_t rc = backend->ops->pread(backend->priv, file, buf, len, off);

	count_call(backend, DLC_BACKEND_READ, rc);
	return rc;
}

int dlc_backend_close(struct dlc_backend *backend, struct dlc_backend_file *file)
{
	int rc = backend->ops->close(backend->priv, file);

	count_call(backend, DLC_BACKEND_CLOSE, rc);
	return rc;
}

void dlc_backend_set_versions(struct dlc_backend *backend, dlc_backend_version_fn fn, void *arg)
{
	if (backend->ops->set_versions)
		backend->ops->set_versions(backend->priv, fn, arg);
}

uint64_t dlc_backend_metadata_calls(const struct dlc_backend *backend)
{
	return atomic_load_explicit(&backend->calls[DLC_BACKEND_LIST], memory_order_relaxed) +
	       atomic_load_explicit(&backend->calls[DLC_BACKEND_STAT], memory_order_relaxed);
}
