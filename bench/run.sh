#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Install and build ocfs2d (scripts/setup.sh, into build/), then run the
# benchmark.  Arguments go to bench/bench.py, e.g.:
#   bench/run.sh --quick
#   bench/run.sh --size 8G --repeat 3
#   bench/run.sh --db                (the database rows: SQLite, fio fdatasync
#                                     and O_DIRECT, pgbench)
# bench.py installs the tools a run needs (fio, fuse2fs, fuse-overlayfs,
# and postgresql for pgbench) with apt-get unless --no-install is given.
set -eu
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "bench/run.sh: must run as root (mounts, loop devices, drop_caches)" >&2
	exit 1
fi
./scripts/setup.sh
exec python3 bench/bench.py "$@"
