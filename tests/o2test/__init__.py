# SPDX-License-Identifier: GPL-2.0-or-later
"""o2test: the one library of ocfs2d's Python test suites.

  proc       running programs: which, tool_env, run, run_split, need_tools,
             log, sanitizer_report, preload_env
  check      Check (counted checks: ok, eq, err, noerr) and Failure
  volume     images and mounts: make_image, Image (formatted offline, judged
             by fsck.ocfs2), Volume (an Image served by a foreground ocfs2d),
             mount_entry, abort_connection, lazy_umount
  ctl        Ctl: ocfs2ctl, raw or --json, and the checked forms (ok, fails)
  harness    Env and main: the runner of the cases that mount (fuse, dbus, ra)
  tree       tree snapshots and whole-file reads and writes
  syscalls   what Python's os module lacks (renameat2, fallocate, utimensat),
             as_user, errno_of, nobody_access (what nobody may do on a mount),
             unshare_mounts
  cluster    corosync nodes in namespaces of their own on a private bridge
  pacemaker  pacemaker on those nodes: directories, CIB, daemons, queries

meson passes the location of this package to every Python test through
PYTHONPATH (the `env:` of each test() in tests/*/meson.build); run a script
by hand the same way, from the top of the source tree:

    PYTHONPATH=tests python3 tests/fuse/test_fuse.py build/daemon/ocfs2d build/cli/ocfs2ctl ops
"""
