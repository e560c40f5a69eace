/*
 * tier_seal.c - the job's tier key and the values sealed under it.
 *
 * memcached has no authentication and the tier's keys are predictable, so
 * whoever reaches a tier port could otherwise put any bytes in front of
 * every node of the job.  This file is where that stops: a value is served
 * only if it opens under the key derived from tier_key=FILE (see
 * tier_seal.h for the format), with the snapshot, inode and size it is
 * asked for bound in as associated data.
 *
 * The key file is checked the way munge checks its key: a regular file,
 * owned by the mounting user or root, with no group or other permission
 * bits, of at least DLC_TIER_KEY_MIN bytes; dlc_tier_key_generate makes one
 * with O_EXCL (never over an existing file or symlink).  The AEAD key is
 * HKDF-SHA256 of the file's bytes, derived once per mount; the secret
 * itself is not kept.
 *
 * Each seal or open makes its own cipher context (about a microsecond
 * beside the tens of a memcached round trip), so any number of threads
 * share one sealer, which is immutable after dlc_tier_sealer_new.  Nothing
 * here logs: the caller counts and words the outcome.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlcache/cause.h"
#include "dlcache/tier_seal.h"

#define MAGIC "DLT2"
#define KEY_SIZE 32
#define AD_SIZE (DLC_TIER_SEAL_MAGIC_SIZE + 8 + 4 + 8)
#define HKDF_SALT "dlcache tier_key"
#define HKDF_INFO "dlcache tier values " MAGIC " AES-256-GCM"

struct dlc_tier_sealer {
	unsigned char key[KEY_SIZE];
	EVP_CIPHER *cipher;            /* fetched once (OpenSSL 3); NULL: the 1.1 static one */
};

static const EVP_CIPHER *cipher_of(const struct dlc_tier_sealer *sealer)
{
	return sealer->cipher ? sealer->cipher : EVP_aes_256_gcm();
}

int dlc_tier_key_read(const char *path, unsigned char **secret, size_t *len, char **cause)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	unsigned char *buf = NULL;
	struct stat st;
	size_t got = 0;
	int rc;

	*secret = NULL;
	*len = 0;
	if (fd < 0) {
		rc = -errno;
		dlc_cause_set(cause, "cannot read the tier_key file %s (%s); make one with dlcache keygen %s and copy it to every node of the job",
			      path, strerror(-rc), path);
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		dlc_cause_set(cause, "the tier_key file %s is not a regular file; make one with dlcache keygen FILE",
			      path);
		rc = -EINVAL;
		goto out;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		dlc_cause_set(cause, "the tier_key file %s belongs to uid %u, who could change it; chown it to the mounting user (or root), or make one with dlcache keygen FILE",
			      path, (unsigned)st.st_uid);
		rc = -EPERM;
		goto out;
	}
	if (st.st_mode & 077) {
		dlc_cause_set(cause, "the tier_key file %s is open to its group or others (mode %04o); chmod 600 %s, or make a new one with dlcache keygen FILE",
			      path, (unsigned)(st.st_mode & 07777), path);
		rc = -EPERM;
		goto out;
	}
	if (st.st_size < DLC_TIER_KEY_MIN || st.st_size > DLC_TIER_KEY_MAX_BYTES) {
		dlc_cause_set(cause, "the tier_key file %s holds %lld bytes, not %d to %d; make one with dlcache keygen FILE",
			      path, (long long)st.st_size, DLC_TIER_KEY_MIN, DLC_TIER_KEY_MAX_BYTES);
		rc = -EINVAL;
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != (size_t)st.st_size) {
		dlc_cause_set(cause, "cannot read the tier_key file %s whole; check the file, or make a new one with dlcache keygen FILE",
			      path);
		rc = -EIO;
		goto out;
	}
	*secret = buf;
	*len = got;
	buf = NULL;
	rc = 0;
out:
	if (buf) {
		OPENSSL_cleanse(buf, (size_t)st.st_size);
		free(buf);
	}
	close(fd);
	return rc;
}

int dlc_tier_key_generate(const char *path, char **cause)
{
	unsigned char key[DLC_TIER_KEY_GENERATED];
	size_t got = 0, put = 0;
	int fd, rc = 0;

	while (got < sizeof(key)) {
		ssize_t n = getrandom(key + got, sizeof(key) - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			dlc_cause_set(cause, "cannot draw random bytes for the key (getrandom: %s); try again on a system that has them",
				      strerror(-rc));
			return rc;
		}
		got += (size_t)n;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			dlc_cause_set(cause, "%s exists; keygen never overwrites a key: give a new name, or remove the old key first",
				      path);
		else
			dlc_cause_set(cause, "cannot create the key file %s (%s); give a path in a directory you can write",
				      path, strerror(-rc));
		OPENSSL_cleanse(key, sizeof(key));
		return rc;
	}
	/* Whatever the umask: the owner alone, as dlc_tier_key_read wants. */
	if (fchmod(fd, 0600) < 0)
		rc = -errno;
	while (rc == 0 && put < sizeof(key)) {
		ssize_t n = write(fd, key + put, sizeof(key) - put);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = n < 0 ? -errno : -EIO;
		else
			put += (size_t)n;
	}
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	OPENSSL_cleanse(key, sizeof(key));
	if (rc < 0) {
		unlink(path);
		dlc_cause_set(cause, "cannot write the key file %s (%s); check the disk and try again",
			      path, strerror(-rc));
	}
	return rc;
}

int dlc_tier_sealer_new(const unsigned char *secret, size_t len, struct dlc_tier_sealer **out)
{
	struct dlc_tier_sealer *sealer = calloc(1, sizeof(*sealer));
	EVP_PKEY_CTX *kdf = NULL;
	size_t key_len = KEY_SIZE;
	int rc = -EIO;

	*out = NULL;
	if (!sealer)
		return -ENOMEM;
	if (len > INT_MAX)
		goto out;
	kdf = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	if (!kdf || EVP_PKEY_derive_init(kdf) <= 0 ||
	    EVP_PKEY_CTX_set_hkdf_md(kdf, EVP_sha256()) <= 0 ||
	    EVP_PKEY_CTX_set1_hkdf_salt(kdf, (const unsigned char *)HKDF_SALT,
					(int)strlen(HKDF_SALT)) <= 0 ||
	    EVP_PKEY_CTX_set1_hkdf_key(kdf, secret, (int)len) <= 0 ||
	    EVP_PKEY_CTX_add1_hkdf_info(kdf, (const unsigned char *)HKDF_INFO,
					(int)strlen(HKDF_INFO)) <= 0 ||
	    EVP_PKEY_derive(kdf, sealer->key, &key_len) <= 0 || key_len != KEY_SIZE)
		goto out;
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	/* Fetched once: EVP_aes_256_gcm() would look the cipher up at every init. */
	sealer->cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	if (!sealer->cipher)
		goto out;
#endif
	*out = sealer;
	sealer = NULL;
	rc = 0;
out:
	EVP_PKEY_CTX_free(kdf);
	dlc_tier_sealer_free(sealer);
	return rc;
}

void dlc_tier_sealer_free(struct dlc_tier_sealer *sealer)
{
	if (!sealer)
		return;
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
	EVP_CIPHER_free(sealer->cipher);
#endif
	OPENSSL_cleanse(sealer->key, sizeof(sealer->key));
	free(sealer);
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* The associated data: the frame's magic, the snapshot, the inode, the size. */
static void associated_data(uint64_t snapshot_id, uint32_t ino, uint64_t size, unsigned char *ad)
{
	memcpy(ad, MAGIC, DLC_TIER_SEAL_MAGIC_SIZE);
	put_le(ad + 4, snapshot_id, 8);
	put_le(ad + 12, ino, 4);
	put_le(ad + 16, size, 8);
}

int dlc_tier_seal(const struct dlc_tier_sealer *sealer, uint64_t snapshot_id, uint32_t ino,
		  const void *data, uint64_t size, unsigned char *value)
{
	unsigned char ad[AD_SIZE];
	unsigned char *nonce = value + DLC_TIER_SEAL_MAGIC_SIZE;
	unsigned char *body = nonce + DLC_TIER_SEAL_NONCE_SIZE;
	EVP_CIPHER_CTX *ctx;
	int n = 0, end = 0;
	bool ok;

	if (size > INT_MAX - DLC_TIER_SEAL_OVERHEAD)
		return -EIO;
	memcpy(value, MAGIC, DLC_TIER_SEAL_MAGIC_SIZE);
	if (RAND_bytes(nonce, DLC_TIER_SEAL_NONCE_SIZE) != 1)
		return -EIO;
	associated_data(snapshot_id, ino, size, ad);
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx && EVP_EncryptInit_ex(ctx, cipher_of(sealer), NULL, sealer->key, nonce) == 1 &&
	     EVP_EncryptUpdate(ctx, NULL, &n, ad, (int)sizeof(ad)) == 1 &&
	     EVP_EncryptUpdate(ctx, body, &n, data, (int)size) == 1 &&
	     EVP_EncryptFinal_ex(ctx, body + n, &end) == 1 && (uint64_t)n + (uint64_t)end == size &&
	     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, DLC_TIER_SEAL_TAG_SIZE, body + size) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -EIO;
}

enum dlc_tier_open dlc_tier_unseal(const struct dlc_tier_sealer *sealer, uint64_t snapshot_id,
				   uint32_t ino, const void *value, size_t len, void *out,
				   uint64_t size)
{
	const unsigned char *v = value;
	const unsigned char *nonce = v + DLC_TIER_SEAL_MAGIC_SIZE;
	const unsigned char *body = nonce + DLC_TIER_SEAL_NONCE_SIZE;
	unsigned char ad[AD_SIZE], tag[DLC_TIER_SEAL_TAG_SIZE];
	EVP_CIPHER_CTX *ctx;
	int n = 0, end = 0;
	bool ok;

	if (size > INT_MAX - DLC_TIER_SEAL_OVERHEAD || len != size + DLC_TIER_SEAL_OVERHEAD ||
	    memcmp(v, MAGIC, DLC_TIER_SEAL_MAGIC_SIZE) != 0)
		return DLC_TIER_OPEN_BAD_FRAME;
	associated_data(snapshot_id, ino, size, ad);
	memcpy(tag, body + size, sizeof(tag));
	ctx = EVP_CIPHER_CTX_new();
	ok = ctx && EVP_DecryptInit_ex(ctx, cipher_of(sealer), NULL, sealer->key, nonce) == 1 &&
	     EVP_DecryptUpdate(ctx, NULL, &n, ad, (int)sizeof(ad)) == 1 &&
	     EVP_DecryptUpdate(ctx, out, &n, body, (int)size) == 1 &&
	     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, (int)sizeof(tag), tag) == 1 &&
	     EVP_DecryptFinal_ex(ctx, (unsigned char *)out + n, &end) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? DLC_TIER_OPEN_GOOD : DLC_TIER_OPEN_BAD_SEAL;
}
