#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Install what ocfs2d needs to build and test, on Debian 12 (as root), and
# configure the build directory.  Safe to run again: it only installs what
# is missing.
set -eu
cd "$(dirname "$0")/.."

PKGS="build-essential meson ninja-build pkg-config check zlib1g-dev
      ocfs2-tools ocfs2-tools-dev kmod python3 util-linux
      libfuse3-dev fuse3 libglib2.0-dev liburing-dev
      corosync libcpg-dev libcmap-dev iproute2 dbus-daemon dbus-bin libglib2.0-bin
      resource-agents psmisc libxml2-utils pacemaker pacemaker-cli-utils polkitd"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: these Debian packages are missing:$missing" >&2
		echo "setup: run as root (or install them) and try again" >&2
		exit 1
	fi
	echo "setup: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

if [ ! -f build/build.ninja ]; then
	meson setup build >/dev/null
fi
ninja -C build >/dev/null
