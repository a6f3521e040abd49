#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The 'package' suite: build the Debian packages with packaging/build-deb.sh
# (dpkg-buildpackage -b -us -uc in a temporary copy of the tree), judge them
# with lintian (no errors), install them with dpkg -i on this machine, and
# check that what they install works together:
#   - the unit's ExecStart (parsed from the installed ocfs2d.service, run by
#     hand since PID 1 need not be systemd; with a private control socket
#     through OCFS2D_CONTROL and --no-system-bus) serves the D-Bus API;
#   - the installed ocfs2ctl formats a volume, mounts, lists and unmounts
#     it through that daemon;
#   - a private bus reading the installed bus policy and activation file
#     starts the installed ocfs2d on the first call to org.ocfs2d.Daemon1;
#   - mount -t fuse.ocfs2 and umount (the installed helpers) do the same;
#   - the installed resource agent starts, monitors and stops the volume,
#     the ocfs2ctl it runs starting the installed ocfs2d on its own;
#   - fsck.ocfs2 -fn finds the volume clean and the files are there;
# then purges the packages (dpkg -P), leaving the machine as it was.
#
#   tests/package/test_package.sh SOURCE_DIR
#
# It changes the system (root; it installs debhelper, lintian and the
# Build-Depends with apt-get when they are missing and skips with 77 if
# that fails), so it is not in the default test setup: run it with
#   meson test -C build --setup package --suite package
# Skips (77) when not root, without /dev/fuse or fsck.ocfs2, or when an
# ocfs2d is already installed on the system (a package or /usr/sbin/ocfs2d)
# that the purge would take away.  OCFS2D_TEST_DEBS=DIR uses the packages
# an earlier packaging/build-deb.sh DIR made instead of building them.
set -u
top=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH LC_ALL=C
unset OCFS2D

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $(date +%T) $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (dpkg -i, FUSE mounts)"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fsck.ocfs2 >/dev/null || skip "no fsck.ocfs2 (ocfs2-tools)"
for p in ocfs2d resource-agents-ocfs2d; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" &&
		skip "$p is installed on this system already: not touching it"
done
for f in /usr/sbin/ocfs2d /usr/bin/ocfs2ctl /sbin/mount.fuse.ocfs2 /usr/lib/ocf/resource.d/ocfs2d/volume; do
	[ -e "$f" ] && skip "$f exists (not from a package): the purge would remove it"
done

# Building packages: dpkg-dev, debhelper, fakeroot, lintian, and the
# Build-Depends (scripts/setup.sh installs those for the build anyway).
tools="dpkg-dev debhelper fakeroot lintian"
bdeps=$(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$top/packaging/debian/control" |
	sed -e 's/^Build-Depends://' -e '/^[A-Z]/d' | tr ',' '\n' |
	sed -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -v '^debhelper-compat$' | grep -v '^$')
missing=""
for p in $tools $bdeps; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	step "installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	{ apt-get -o DPkg::Lock::Timeout=300 update -q >/dev/null &&
	  apt-get -o DPkg::Lock::Timeout=300 install -y -q --no-install-recommends $missing >/dev/null; } ||
		skip "could not install$missing"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ocfs2d-package.XXXXXX") || fail "mktemp"
ctl=$work/control
mnt=$work/mnt
img=$work/vol.img
mkdir "$mnt"
installed=0
daemon_pid=""
bus_pid=""

# dpkg has no lock timeout of its own: wait while another dpkg runs
dpkg_locked() {
	n=0
	while :; do
		out=$("$@" 2>&1) && { echo "$out"; return 0; }
		case "$out" in
		*"lock"*) [ $n -lt 60 ] || { echo "$out"; return 1; }
			n=$((n + 1)); sleep 5 ;;
		*) echo "$out"; return 1 ;;
		esac
	done
}

# our daemons only: the one we started and any that answers on our socket
our_daemons() {
	# (pgrep only lists the candidates; each is checked by its exe and
	# environment, and only those are ever signalled)
	for p in $(pgrep -x ocfs2d); do
		[ "$(readlink "/proc/$p/exe" 2>/dev/null)" = /usr/sbin/ocfs2d ] || continue
		tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OCFS2D_CONTROL=$ctl" &&
			echo "$p"
	done
}

cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		/usr/bin/ocfs2ctl umount -f "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null
	fi
	for p in $daemon_pid $(our_daemons); do
		kill "$p" 2>/dev/null
	done
	sleep 1
	for p in $daemon_pid $(our_daemons); do
		kill -9 "$p" 2>/dev/null
	done
	[ -n "$bus_pid" ] && kill "$bus_pid" 2>/dev/null
	if [ "$installed" = 1 ]; then
		dpkg_locked dpkg -P resource-agents-ocfs2d ocfs2d >/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

t0=$(date +%s)
if [ -n "${OCFS2D_TEST_DEBS:-}" ]; then
	# working on this test: the packages of an earlier build-deb.sh run
	step "using the packages in $OCFS2D_TEST_DEBS"
	mkdir "$work/deb" || fail "mkdir"
	cp "$OCFS2D_TEST_DEBS"/* "$work/deb/" || fail "no packages in $OCFS2D_TEST_DEBS"
else
	step "building the packages (packaging/build-deb.sh)"
	"$top/packaging/build-deb.sh" "$work/deb" > "$work/build.log" 2>&1 || {
		tail -n 40 "$work/build.log"; fail "packaging/build-deb.sh failed (log above)"; }
fi
t1=$(date +%s)
echo "built in $((t1 - t0)) s:"
ls -l "$work/deb"
deb=$(ls "$work"/deb/ocfs2d_*.deb)
ra=$(ls "$work"/deb/resource-agents-ocfs2d_*_all.deb)
version=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$top/meson.build" | head -n1)
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "ocfs2d's version is not meson.build's $version"
[ "$(dpkg-deb -f "$ra" Version)" = "$version" ] || fail "the agent's version is not meson.build's $version"

step "lintian"
lintian --fail-on error "$work"/deb/ocfs2d_*.changes > "$work/lintian.log" 2>&1
lrc=$?
sed 's/^/lintian: /' "$work/lintian.log"
grep -q '^E: ' "$work/lintian.log" && fail "lintian reports errors"
[ $lrc -eq 0 ] || fail "lintian exited with $lrc"
echo "lintian: $(grep -c '^E: ' "$work/lintian.log") errors, $(grep -c '^W: ' "$work/lintian.log") warnings"

step "dpkg -i"
installed=1
dpkg_locked dpkg -i "$deb" "$ra" || fail "dpkg -i failed"
for f in /usr/sbin/ocfs2d /usr/bin/ocfs2ctl /sbin/mount.fuse.ocfs2 /sbin/umount.fuse.ocfs2 \
	 /lib/systemd/system/ocfs2d.service \
	 /usr/share/dbus-1/system.d/org.ocfs2d.Daemon1.conf \
	 /usr/share/dbus-1/system-services/org.ocfs2d.Daemon1.service \
	 /usr/share/dbus-1/interfaces/org.ocfs2d.Daemon1.xml \
	 /usr/share/polkit-1/actions/org.ocfs2d.Daemon1.policy \
	 /usr/share/man/man8/ocfs2d.8.gz /usr/share/man/man8/ocfs2ctl.8.gz \
	 /usr/share/man/man8/mount.fuse.ocfs2.8.gz /usr/share/man/man7/ocf_ocfs2d_volume.7.gz \
	 /usr/lib/ocf/resource.d/ocfs2d/volume; do
	[ -e "$f" ] || fail "$f is not installed"
done
[ "$(/usr/sbin/ocfs2d --version)" = "ocfs2d $version" ] || fail "ocfs2d --version: $(/usr/sbin/ocfs2d --version)"
grep -q '^SystemdService=ocfs2d.service$' /usr/share/dbus-1/system-services/org.ocfs2d.Daemon1.service ||
	fail "the activation file does not name ocfs2d.service"

step "the unit's ExecStart, by hand"
unit=/lib/systemd/system/ocfs2d.service
grep -q '^Type=dbus$' $unit || fail "$unit: not Type=dbus"
grep -q '^BusName=org.ocfs2d.Daemon1$' $unit || fail "$unit: no BusName"
cmd=$(sed -n 's/^ExecStart=[-@:+!]*//p' $unit)
echo "ExecStart: $cmd"
case "$cmd" in /usr/sbin/ocfs2d\ *--server*) ;; *) fail "ExecStart is not /usr/sbin/ocfs2d --server ...";; esac
# no system bus here: the control socket only
# shellcheck disable=SC2086
OCFS2D_CONTROL=$ctl $cmd --no-system-bus 2> "$work/daemon.log" &
daemon_pid=$!
n=0
until [ -S "$ctl" ]; do
	kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log"; fail "the daemon exited"; }
	[ $n -lt 100 ] || fail "no control socket after 10 s"
	n=$((n + 1)); sleep 0.1
done
[ "$(readlink /proc/$daemon_pid/exe)" = /usr/sbin/ocfs2d ] || fail "the daemon is not /usr/sbin/ocfs2d"
export OCFS2D_CONTROL="$ctl"

step "ocfs2ctl format, mount, write, umount"
truncate -s 256M "$img"
/usr/bin/ocfs2ctl format -q -M local -L pkgtest "$img" || fail "ocfs2ctl format"
/usr/bin/ocfs2ctl mount "$img" "$mnt" || fail "ocfs2ctl mount"
echo "written through ocfs2ctl mount" > "$mnt/one" || fail "write"
/usr/bin/ocfs2ctl mounts | tee "$work/mounts"
grep -q "$mnt" "$work/mounts" || fail "ocfs2ctl mounts does not list $mnt"
/usr/bin/ocfs2ctl umount "$mnt" || fail "ocfs2ctl umount"
kill -0 "$daemon_pid" || fail "the unit's daemon is gone"

step "mount -t fuse.ocfs2 and umount (the installed helpers)"
mount -t fuse.ocfs2 -o commit=10,_netdev "$img" "$mnt" || fail "mount -t fuse.ocfs2"
grep -q "^written through ocfs2ctl mount$" "$mnt/one" || fail "the first file is not there"
echo "written through mount.fuse.ocfs2" > "$mnt/two" || fail "write"
/usr/bin/ocfs2ctl mounts | grep -q "$mnt" || fail "the unit's daemon does not serve the helper's mount"
umount "$mnt" || fail "umount"
mountpoint -q "$mnt" && fail "still mounted after umount"

step "stopping the unit's daemon (SIGTERM)"
kill "$daemon_pid"
n=0
while kill -0 "$daemon_pid" 2>/dev/null; do
	[ $n -lt 100 ] || fail "the daemon did not exit after SIGTERM"
	n=$((n + 1)); sleep 0.1
done
wait "$daemon_pid" || fail "the daemon exited with $?"
daemon_pid=""
sed 's/^/ocfs2d: /' "$work/daemon.log"

# The installed activation file and bus policy: a private bus that reads
# them where the package put them (a bus of its own, not the system's:
# activation runs Exec itself, with the bus's environment, so the daemon
# gets our control socket and this bus as its "system bus").
if command -v dbus-daemon >/dev/null && command -v gdbus >/dev/null; then
	step "D-Bus activation on a private bus with the installed policy"
	bus=$work/bus
	cat > "$work/bus.conf" <<EOT
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <auth>EXTERNAL</auth>
  <listen>unix:path=$bus</listen>
  <servicedir>/usr/share/dbus-1/system-services</servicedir>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
  </policy>
  <includedir>/usr/share/dbus-1/system.d</includedir>
</busconfig>
EOT
	DBUS_SYSTEM_BUS_ADDRESS=unix:path=$bus dbus-daemon --config-file="$work/bus.conf" \
		--nofork --nopidfile 2> "$work/bus.log" &
	bus_pid=$!
	n=0
	until [ -S "$bus" ]; do
		[ $n -lt 100 ] || { cat "$work/bus.log"; fail "the private bus did not start"; }
		n=$((n + 1)); sleep 0.1
	done
	export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$bus"
	gdbus introspect --system --dest org.ocfs2d.Daemon1 --object-path /org/ocfs2d/Daemon1 \
		-r > "$work/introspect" 2>&1 || { cat "$work/introspect" "$work/bus.log"; fail "activation failed"; }
	grep -q "org.ocfs2d.Daemon1.Manager" "$work/introspect" || {
		cat "$work/introspect"; fail "the activated daemon does not offer the Manager"; }
	pids=$(our_daemons)
	[ -n "$pids" ] || fail "no /usr/sbin/ocfs2d was activated"
	echo "activated: pid $pids, $(readlink /proc/"$pids"/exe)"
	/usr/bin/ocfs2ctl mounts || fail "ocfs2ctl cannot reach the activated daemon"
	kill "$pids"
	n=0
	while [ -n "$(our_daemons)" ]; do
		[ $n -lt 100 ] || fail "the activated daemon did not exit after SIGTERM"
		n=$((n + 1)); sleep 0.1
	done
	kill "$bus_pid"; wait "$bus_pid" 2>/dev/null
	bus_pid=""
	unset DBUS_SYSTEM_BUS_ADDRESS
fi

step "the resource agent (its ocfs2ctl starts the installed ocfs2d)"
agent=/usr/lib/ocf/resource.d/ocfs2d/volume
export OCF_ROOT=/usr/lib/ocf OCF_RESKEY_device="$img" OCF_RESKEY_directory="$mnt"
$agent validate-all || fail "agent validate-all: $?"
$agent monitor; rc=$?
[ $rc -eq 7 ] || fail "agent monitor before start: $rc, not 7"
$agent start || fail "agent start: $?"
pids=$(our_daemons)
[ -n "$pids" ] || fail "no /usr/sbin/ocfs2d serves $ctl after the agent's start"
echo "the agent's daemon: pid $pids, $(readlink /proc/"$pids"/exe)"
$agent monitor || fail "agent monitor: $?"
OCF_CHECK_LEVEL=20 $agent monitor || fail "agent monitor (depth 20): $?"
echo "written while the agent held it" > "$mnt/three" || fail "write"
$agent stop || fail "agent stop: $?"
$agent monitor; rc=$?
[ $rc -eq 7 ] || fail "agent monitor after stop: $rc, not 7"
n=0
while [ -n "$(our_daemons)" ]; do
	[ $n -lt 100 ] || fail "the daemon the agent started did not exit when idle"
	n=$((n + 1)); sleep 0.1
done

step "fsck.ocfs2 -fn and the files"
fsck.ocfs2 -fn "$img" > "$work/fsck.log" 2>&1 || { cat "$work/fsck.log"; fail "fsck.ocfs2 -fn"; }
for f in one two three; do
	/usr/bin/ocfs2ctl cat "$img" "/$f" || fail "/$f is not on the volume"
done

step "dpkg -P"
dpkg_locked dpkg -P resource-agents-ocfs2d ocfs2d || fail "dpkg -P failed"
installed=0
for f in /usr/sbin/ocfs2d /usr/bin/ocfs2ctl /sbin/mount.fuse.ocfs2 /lib/systemd/system/ocfs2d.service \
	 /usr/lib/ocf/resource.d/ocfs2d /etc/systemd/system/multi-user.target.wants/ocfs2d.service; do
	[ -e "$f" ] || [ -L "$f" ] && fail "$f is left after the purge"
done
echo "OK: packages built, lintian clean of errors, installed, used and purged in $(($(date +%s) - t0)) s"
