#!/usr/bin/env bash
# S3 trust boundary: a faulty S3 server or proxy (fake_s3.py's adversary
# flags) never makes a listing lose files: the snapshot is whole or fails
# in one sentence.
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

run_tests
