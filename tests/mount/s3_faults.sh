#!/usr/bin/env bash
# S3 trust boundary: a faulty S3 server or proxy (fake_s3.py's adversary
# flags) never puts a wrong byte in front of a reader or into the cache;
# listings cannot lose files; credentials and clocks fail the mount in one
# sentence.  Under each adversary every file is read through the mount and
# compared with the source ("served"), then the mount is made again with a
# healthy server on the same cache and every file compared again ("kept").
# Each case prints its figures as "figures: ADVERSARY ...".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/s3_lib.sh"

S3ROOT=$WORK/s3
DATA=$S3ROOT/bucket/data
mkdir -p "$DATA"
make_dataset "$DATA" 4 10 20000
head -c $((3 * 1024 * 1024 + 77)) /dev/urandom >"$DATA/big.bin"
SRC=$DATA

# Credentials of the test only: never the machine's.
export AWS_ACCESS_KEY_ID=AKIDDLCACHETEST AWS_SECRET_ACCESS_KEY=dlcache-test-secret-b1e7
export AWS_SHARED_CREDENTIALS_FILE=$WORK/no-credentials AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_REGION

READ_FAILED='^dlcache: warning: [a-z_]+: (cannot read .* from the source|read from the source failed|cannot open .* on the source): (Input/output error|Connection timed out)$'
# big.bin (over cache_max_file) is read by ranged GETs of 1 MiB blocks at
# offsets 0, 1, 2 and 3 MiB; the small files by one GET each.
MOUNT_OPTIONS=cache_max_file=1M,block_size=1M

ensure_fake() {
	[ -n "$FAKE_S3_PID" ] && kill -0 "$FAKE_S3_PID" 2>/dev/null && return 0
	start_fake_s3 "$S3ROOT" --access-key "$AWS_ACCESS_KEY_ID" "$@"
}

mount_s3() {   # mount_s3 [OPTIONS]
	ensure_fake
	start_daemon_from s3://bucket/data "s3_endpoint=$FAKE_S3_URL,$MOUNT_OPTIONS${1:+,$1}"
}

# read_compare: reads every file of $DATA through $MNT (whole, and big.bin
# also in 40 random ranges) and prints "READS FAILED WRONG WRONG_BYTES": reads
# made, reads that failed (any error), reads that returned other bytes than
# the source's, and how many bytes of them differ or are missing.
read_compare() {
	drop_caches
	python3 - "$DATA" "$MNT" <<'PY'
import os, random, sys
src, mnt = sys.argv[1], sys.argv[2]
reads = failed = wrong = wrong_bytes = 0
def check(got, want):
    global wrong, wrong_bytes
    if got != want:
        wrong += 1
        wrong_bytes += sum(a != b for a, b in zip(got, want)) + abs(len(got) - len(want))
for d, _, files in os.walk(src):
    for name in sorted(files):
        rel = os.path.relpath(os.path.join(d, name), src)
        want = open(os.path.join(src, rel), "rb").read()
        reads += 1
        try:
            got = open(os.path.join(mnt, rel), "rb").read()
        except OSError:
            failed += 1
            continue
        check(got, want)
want = open(os.path.join(src, "big.bin"), "rb").read()
rng = random.Random(7)
for _ in range(40):
    off = rng.randrange(len(want))
    n = rng.randrange(1, 300000)
    reads += 1
    try:
        fd = os.open(os.path.join(mnt, "big.bin"), os.O_RDONLY)
        try:
            got = os.pread(fd, n, off)
        finally:
            os.close(fd)
    except OSError:
        failed += 1
        continue
    check(got, want[off:off + n])
print(reads, failed, wrong, wrong_bytes)
PY
}

# under_adversary FLAG: mounts with a healthy server (the snapshot), turns
# FLAG on, reads everything (SERVED_*), turns it off, mounts again on the
# same cache and reads everything (KEPT_*: bytes the cache kept).
under_adversary() {
	local flag=$1 allowed=$ALLOWED_LOG bad
	# The daemon's lines are checked after the figures are printed.
	ALLOWED_LOG='.*'
	rm -rf "$CACHE"
	mount_s3
	fake_s3 POST "/_fake/fault?name=$flag&on=1" >/dev/null
	read -r SERVED_READS SERVED_FAILED SERVED_WRONG SERVED_WRONG_BYTES < <(read_compare)
	fake_s3 POST "/_fake/fault?name=$flag&on=0" >/dev/null
	cp "$LOG" "$WORK/adversary.log"
	stop_daemon
	mount_s3
	read -r KEPT_READS KEPT_FAILED KEPT_WRONG KEPT_WRONG_BYTES < <(read_compare)
	cat "$LOG" >>"$WORK/adversary.log"
	stop_daemon
	ALLOWED_LOG=$allowed
	echo "figures: $flag: served: $SERVED_READS reads, $SERVED_FAILED failed, $SERVED_WRONG wrong ($SERVED_WRONG_BYTES bytes); kept: $KEPT_WRONG wrong ($KEPT_WRONG_BYTES bytes) of $KEPT_READS reads, $KEPT_FAILED failed"
	expect_eq "$flag: reads served with wrong bytes" "$SERVED_WRONG" 0
	expect_eq "$flag: wrong bytes served" "$SERVED_WRONG_BYTES" 0
	expect_eq "$flag: reads with wrong bytes after a remount (kept in the cache)" "$KEPT_WRONG" 0
	expect_eq "$flag: wrong bytes kept" "$KEPT_WRONG_BYTES" 0
	expect_eq "$flag: failed reads once the server is healthy" "$KEPT_FAILED" 0
	bad=$(grep -Ev "$ALLOWED_LOG" "$WORK/adversary.log" || true)
	[ -z "$bad" ] || fail "$flag: unexpected daemon output: $bad"
}

# A 206 whose Content-Range starts 64 bytes later than asked: every read
# fails with EIO and one sentence naming the server's fault.
test_wrong_range_is_refused() {
	ALLOWED_LOG="$READ_FAILED|: the server at http://127\\.0\\.0\\.1:[0-9]+ sent bytes [0-9]+-[0-9]+ when bytes [0-9]+-[0-9]+ were asked; no byte of that answer was used"
	under_adversary wrong-range
	expect_eq "wrong-range: reads that failed" "$SERVED_FAILED" "$SERVED_READS"
}

# Another version of the object, If-Match ignored: refused.
test_other_etag_is_refused() {
	ALLOWED_LOG="$READ_FAILED|: the server at http://127\\.0\\.0\\.1:[0-9]+ sent version \"[0-9a-f]+\" of the object, not the snapshot's \"[0-9a-f]+\" \\(it ignored If-Match\\)"
	under_adversary bad-etag
	expect_eq "bad-etag: reads that failed" "$SERVED_FAILED" "$SERVED_READS"
}

# A 200 to a ranged GET: the whole object of the snapshot's size is sliced
# (every read served); a 200 holding only the range (a proxy that cut the
# object but said 200) is refused where it is not the whole object.
test_200_to_a_ranged_get() {
	ALLOWED_LOG='^$'
	under_adversary full-body-for-range
	expect_eq "full-body-for-range: reads that failed" "$SERVED_FAILED" 0
	ALLOWED_LOG="$READ_FAILED|: the server at http://127\\.0\\.0\\.1:[0-9]+ answered a ranged GET with [0-9]+ bytes as the whole object \\(200\\), but the snapshot's object holds [0-9]+"
	under_adversary range-as-200
	[ "$SERVED_FAILED" -gt 0 ] || fail "range-as-200: no read of big.bin's later blocks failed"
}

# A body cut at half its Content-Length, one cut with no Content-Length (a
# close-delimited body), and one reset mid-body are transient: retried
# within source_timeout, and every read is served.
test_cut_and_reset_bodies_are_retried() {
	ALLOWED_LOG='^$'
	local flag
	for flag in cut-body cut-body-unframed reset-mid-body; do
		under_adversary "$flag"
		expect_eq "$flag: reads that failed" "$SERVED_FAILED" 0
	done
}

# --- Listings -------------------------------------------------------------

restart_fake() {   # restart_fake [FAKE_S3 OPTIONS]: the same port, other flags
	stop_fake_s3
	start_fake_s3 "$S3ROOT" --access-key "$AWS_ACCESS_KEY_ID" "$@"
}

snapshot_of() {   # snapshot_of SOURCE: dlcache snapshot into $WORK/snap.db
	rm -f "$WORK/snap.db"
	"$DLCACHE" snapshot "$1" -o "$WORK/snap.db" --s3-endpoint "$FAKE_S3_URL" \
		>"$WORK/out" 2>"$WORK/err"
}

# A page that says it is truncated but gives no token fails the snapshot
# in one sentence (it used to end the directory quietly, files missing).
test_truncated_listing_without_token_fails_the_snapshot() {
	restart_fake --page-size 4 --truncated-listing-no-token
	! snapshot_of s3://bucket/data || fail "a snapshot was made of a listing that lost files: $(cat "$WORK/out")"
	expect_eq "error lines" "$(grep -cv '^dlcache: info: ' "$WORK/err")" 1
	grep -q "is truncated but gives no NextContinuationToken" "$WORK/err" ||
		fail "cause: $(cat "$WORK/err")"
	[ ! -e "$WORK/snap.db" ] || fail "a snapshot file was left"
	stop_fake_s3
}

# Continuation tokens of any length (5000 bytes here; 2 KiB and more were
# dropped, and the directory ended at its first page).
test_long_continuation_tokens() {
	restart_fake --page-size 4 --long-token 5000
	snapshot_of s3://bucket/data || fail "dlcache snapshot: $(cat "$WORK/err")"
	expect_eq "files in the snapshot" "$(sqlite3 "$WORK/snap.db" 'SELECT count(*) FROM versions')" \
		"$(find "$DATA" -type f | wc -l)"
	stop_fake_s3
}

# Keys XML 1.0 cannot carry (a control byte) list with encoding-type=url,
# and keys with '%', '+' and spaces are decoded to themselves.
test_keys_are_url_encoded_in_listings() {
	local odd=$S3ROOT/bucket/odd
	mkdir -p "$odd/sub dir"
	printf 'ctl\n' >"$odd/ctl$(printf '\001')name"
	printf 'pct\n' >"$odd/50%+off &<tag>.txt"
	printf 'sp\n' >"$odd/sub dir/a+b c.txt"
	restart_fake
	snapshot_of s3://bucket/odd || fail "dlcache snapshot: $(cat "$WORK/err")"
	start_daemon_from s3://bucket/odd "s3_endpoint=$FAKE_S3_URL,snapshot=$WORK/snap.db"
	expect_eq "the tree" "$(cd "$MNT" && find . -path ./.stats -prune -o -path ./.control -prune \
		-o -path ./.cached -prune -o -path ./.chunks -prune -o -print | sort)" \
		"$(cd "$odd" && find . | sort)"
	local f
	while IFS= read -r -d '' f; do
		cmp "$MNT/$f" "$odd/$f" || fail "bytes differ: $f"
	done < <(cd "$odd" && find . -type f -print0)
	stop_daemon
	stop_fake_s3
	rm -rf "$odd"
}

# --- Credentials and clocks -----------------------------------------------

# Session tokens of any length, from the environment and from a
# credentials file (8 KiB: the signer refused over ~4 KB, and the file's
# lines were cut at 4096 bytes).
test_long_session_tokens() {
	python3 -c 'import base64, os; print(base64.b64encode(os.urandom(6144)).decode())' >"$WORK/token"
	local token
	token=$(cat "$WORK/token")
	restart_fake --session-token-file "$WORK/token"
	AWS_SESSION_TOKEN=$token start_daemon_from s3://bucket/data "s3_endpoint=$FAKE_S3_URL"
	cmp "$MNT/train/n00000000/n00000000_0.JPEG" "$DATA/train/n00000000/n00000000_0.JPEG" ||
		fail "read with a long token from the environment"
	stop_daemon
	rm -rf "$CACHE"
	printf '[long]\r\naws_access_key_id = %s\r\naws_secret_access_key = %s\r\naws_session_token = %s\r\n' \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$token" >"$WORK/credentials"
	AWS_SHARED_CREDENTIALS_FILE=$WORK/credentials \
		start_daemon_from s3://bucket/data "s3_endpoint=$FAKE_S3_URL,s3_profile=long"
	cmp "$MNT/train/n00000001/n00000001_0.JPEG" "$DATA/train/n00000001/n00000001_0.JPEG" ||
		fail "read with a long token from the credentials file"
	stop_daemon
	stop_fake_s3
}

# One key without the other is one sentence at mount, not "anonymous" and
# then EINVAL on every request.
test_half_configured_credentials() {
	ensure_fake
	printf '[default]\naws_access_key_id = AKIDHALF\n' >"$WORK/credentials"
	! env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_SHARED_CREDENTIALS_FILE=$WORK/credentials \
		timeout 60 "$DLCACHE" mount s3://bucket/data "$MNT" -f \
		-o "cache_dir=$CACHE,s3_endpoint=$FAKE_S3_URL" 2>"$WORK/err" || fail "mounted a half profile"
	expect_eq "error lines" "$(wc -l <"$WORK/err")" 1
	grep -q "profile 'default' of $WORK/credentials has aws_access_key_id but no aws_secret_access_key" \
		"$WORK/err" || fail "cause: $(cat "$WORK/err")"
	! env -u AWS_SECRET_ACCESS_KEY timeout 60 "$DLCACHE" mount s3://bucket/data "$MNT" -f \
		-o "cache_dir=$CACHE,s3_endpoint=$FAKE_S3_URL" 2>"$WORK/err" || fail "mounted half keys"
	expect_eq "error lines" "$(wc -l <"$WORK/err")" 1
	grep -q "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not" "$WORK/err" ||
		fail "cause: $(cat "$WORK/err")"
	mountpoint -q "$MNT" && fail "mounted"
	stop_fake_s3
}

# RequestTimeTooSkewed is clock skew, said with its size from the server's
# Date header: at mount, and on reads after mount.
test_clock_skew_is_named_with_its_size() {
	restart_fake --skew 3600
	! timeout 60 "$DLCACHE" mount s3://bucket/data "$MNT" -f \
		-o "cache_dir=$CACHE,s3_endpoint=$FAKE_S3_URL" 2>"$WORK/err" || fail "mounted with a skewed clock"
	expect_eq "error lines" "$(wc -l <"$WORK/err")" 1
	grep -Eq "RequestTimeTooSkewed\\): this machine's clock is 3(59[0-9]|60[0-9]) s behind the server's" \
		"$WORK/err" || fail "cause: $(cat "$WORK/err")"
	restart_fake
	mount_s3
	fake_s3 POST "/_fake/skew?s=-7200" >/dev/null
	ALLOWED_LOG="$READ_FAILED|RequestTimeTooSkewed\\): this machine's clock is 7[12][0-9][0-9] s ahead of the server's"
	! cat "$MNT/train/n00000002/n00000002_0.JPEG" >/dev/null 2>&1 || fail "read with a skewed clock"
	grep -Eq "clock is 7(19[0-9]|20[0-9]) s ahead of the server's" "$LOG" || fail "the skew is not named: $(cat "$LOG")"
	fake_s3 POST "/_fake/skew?s=0" >/dev/null
	cmp "$MNT/train/n00000002/n00000002_0.JPEG" "$DATA/train/n00000002/n00000002_0.JPEG" ||
		fail "no recovery once the clocks agree"
	stop_daemon
	stop_fake_s3
}

run_tests
