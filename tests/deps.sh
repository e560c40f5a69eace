# deps.sh - sourced by tests/build.sh, tests/run.sh and examples/demo.sh: installs the Debian
# packages named in $DLC_PACKAGES that are missing (nothing when all are there).
dlc_install_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "Installing ${missing[*]} from Debian's packages..."
	local sudo=
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "dlcache: ${missing[*]} are missing and this is not root; install them or run as root." >&2; return 1; }
		sudo=sudo
	fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# dpkg-dev: dpkg-source unpacks the private libfuse's source package (tests/build.sh);
# liburing-dev, libnuma-dev: that libfuse's FUSE over io_uring (3.18, io_uring=1),
# linked statically into dlcache.
DLC_BUILD_PACKAGES=(build-essential meson ninja-build pkg-config libfuse3-dev fuse3
	libsqlite3-dev libxxhash-dev libnfs-dev libarchive-dev libmemcached-dev check dpkg-dev
	libssl-dev libcurl4-openssl-dev libexpat1-dev liburing-dev libnuma-dev)
DLC_RUN_PACKAGES=(fuse3 python3 sqlite3 util-linux procps)
# The fuzz suite (tests/fuzz/run.sh): clang 14 and its libFuzzer, ASan and
# UBSan runtimes (libclang-rt-14-dev holds libclang_rt.fuzzer-x86_64.a).
DLC_FUZZ_PACKAGES=(clang libclang-rt-14-dev)
# The training example and its test: PyTorch on the CPU, from Debian.
DLC_TRAIN_PACKAGES=(python3-torch python3-torchvision python3-numpy python3-pil)
# The time-to-accuracy benchmark (tests/bench/fashion.sh): Fashion-MNIST
# (70,000 images, 30 MB) from Debian, on top of the training packages.
DLC_FASHION_PACKAGES=(dataset-fashion-mnist)
# The docs and packaging suites: man(1), dpkg-buildpackage with debhelper and
# dh-python (python3-dlcache), rpmbuild; the python suite's pip install into
# a venv, offline: venv, and setuptools with wheel as the build backend.
DLC_PACKAGE_PACKAGES=(man-db groff-base git dpkg-dev debhelper dh-python rpm systemd
	python3-venv python3-setuptools python3-wheel)
# For the tests and benchmarks only: nfs-ganesha (with its VFS backend) serves
# the NFS mount tests, libnfs-utils (nfs-ls, nfs-cp) is the NFS benchmarks'
# baseline, iproute2 (ss) counts the connections of a crawl, memcached is
# the cluster tier of the tier suites (three on loopback ports), and
# python3-cryptography seals values as a key holder would (tier_adversary.py).
DLC_TEST_PACKAGES=(nfs-ganesha nfs-ganesha-vfs libnfs-utils iproute2 memcached python3-cryptography)
