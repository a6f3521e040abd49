#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the Debian packages (ocfs2d, resource-agents-ocfs2d) with
# dpkg-buildpackage -b, into OUTDIR (default build/deb).
#
#   packaging/build-deb.sh [OUTDIR]
#
# The Debian packaging lives in packaging/debian, not at the top of the tree:
# upstream keeps its own tree free of a debian/ directory (a distribution's
# maintainers bring their own, and a top-level one would be in their way).
# This script copies the source tree (the files git knows, or all but
# build directories without git) into a temporary directory, puts
# packaging/debian at its top as debian/, writes debian/changelog with
# the version of meson.build's project(), and builds there; the tree
# itself is left untouched.  Needs dpkg-dev, debhelper and the
# Build-Depends of packaging/debian/control.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build/deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)

version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$top/meson.build" | head -n1)
[ -n "$version" ] || { echo "build-deb: no version in meson.build" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ocfs2d-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/ocfs2d-$version
mkdir "$src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	# tracked files and new ones not ignored; uncommitted changes included
	(cd "$top" && git ls-files -z --cached --others --exclude-standard |
		xargs -0 -r cp -P --parents -t "$src" 2>/dev/null) || true
	when=$(git -C "$top" log -1 --format=%ct 2>/dev/null || date +%s)
else
	tar -C "$top" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$src" -xf -
	when=$(date +%s)
fi
[ -f "$src/meson.build" ] || { echo "build-deb: could not copy the tree" >&2; exit 1; }
rm -rf "$src/debian"
cp -r "$top/packaging/debian" "$src/debian"

maint=$(sed -n 's/^Maintainer: *//p' "$src/debian/control")
cat > "$src/debian/changelog" <<EOT
ocfs2d ($version) unstable; urgency=medium

  * Built from the ocfs2d source tree by packaging/build-deb.sh.

 -- $maint  $(LC_ALL=C date -R -u -d "@$when")
EOT

echo "build-deb: building ocfs2d $version in $src"
(cd "$src" && dpkg-buildpackage -b -us -uc) || { echo "build-deb: dpkg-buildpackage failed" >&2; exit 1; }
for f in "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo; do
	[ -e "$f" ] && cp "$f" "$out/"
done
echo "build-deb: packages in $out:"
ls -1 "$out"
