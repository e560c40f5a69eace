#!/usr/bin/env bash
# tests/bench/run.sh - every benchmark, one after the other, with the build
# in build/ (run tests/run.sh or examples/demo.sh first).  Not part of meson
# test: these print ratios, they do not pass or fail.  Needs root, /dev/fuse
# and about 12 GB under /var/tmp for the generated trees, which are reused;
# nfs.sh also needs nfs-ganesha and libnfs-utils (DLC_TEST_PACKAGES in
# tests/deps.sh) and deletes its trees; tier.sh needs memcached (the same);
# peers.sh needs s3fs and rclone (apt-get install s3fs rclone) and npm.
# soak.sh, last, runs a mixed load for SOAK_MINUTES (default 30) and, unlike
# the others, judges it: PASS/FAIL per target of issue 36, non-zero exit
# when one is missed.
set -euo pipefail
cd "$(dirname "$0")"
for bench in metadata.sh control_ingest.sh read.sh announced_hits.sh ttyprobe.sh prefetch.sh announce.sh train.sh nfs.sh \
	tar.sh blocks.sh tier.sh peers.sh s3_epoch1.sh soak.sh; do
	echo "=== tests/bench/$bench"
	bash "$bench"
done
