# SPDX-License-Identifier: GPL-2.0-or-later
"""Running programs: the tools (ocfs2-tools, ocfs2ctl, util-linux) found
also in the sbin directories, with an environment they are fast in."""

import os
import shutil
import subprocess
import sys
import time

from o2test.check import Failure

SKIP = 77  # meson's exit status for a skipped test
TOOLS_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin"


def which(tool):
    """The path of tool (also in /usr/sbin and /sbin), or None."""
    return shutil.which(tool, path=TOOLS_PATH)


def need_tools(*names):
    """Exit 77 (meson's skip) when a tool is missing, saying which."""
    for n in names:
        if which(n) is None:
            print("SKIP: %s is not installed" % n)
            sys.exit(SKIP)


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, flush=True)


def tool_env(env=None, **extra):
    """The environment for the tools (ocfs2-tools, ocfs2ctl): meson's
    MALLOC_PERTURB_ stays with the daemon, not with them - it makes
    fsck.ocfs2 ten times slower (see tests/testenv.h).  extra: variables
    to set as well (TZ="UTC", ...)."""
    e = dict(env or os.environ, PATH=TOOLS_PATH, **extra)
    e.pop("MALLOC_PERTURB_", None)
    return e


def run(argv, check=False, timeout=300, env=None):
    """Run argv (stdin /dev/null, env: tool_env(env)); returns (exit
    status, stdout and stderr together as text).  check: raise Failure
    unless it exits 0."""
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout, env=tool_env(env))
    out = p.stdout.decode("utf-8", "replace")
    if check and p.returncode != 0:
        raise Failure("%s exited %d:\n%s" % (" ".join(argv), p.returncode, out))
    return p.returncode, out


def run_split(argv, input=None, check=False, timeout=None, env=None, binary=False):
    """Run argv with stdout and stderr apart; returns (exit status, stdout,
    stderr), text (invalid UTF-8 replaced) or bytes (binary).  input: bytes
    for stdin (else /dev/null); env: used as it is (default tool_env());
    check: raise Failure unless it exits 0."""
    p = subprocess.run(argv, input=input, stdin=subprocess.DEVNULL if input is None else None,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       env=tool_env() if env is None else env)
    if check and p.returncode != 0:
        raise Failure("%s failed (%d): %s" % (" ".join(argv), p.returncode,
                                              p.stderr.decode(errors="replace")))
    if binary:
        return p.returncode, p.stdout, p.stderr
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def text(b):
    """Bytes a tool printed as text (invalid UTF-8 kept as surrogates)."""
    return b.decode("utf-8", errors="surrogateescape")


def sanitizer_report(text):
    """Whether a log holds an ASan/UBSan report."""
    return "Sanitizer" in text or "runtime error:" in text


def preload_env(daemon, module):
    """LD_PRELOAD for module in daemon: after the ASan runtime when the
    daemon links it (ASan insists on being first in the library list)."""
    first = []
    rc, out = run(["ldd", daemon])
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libasan.so") and len(parts) >= 3 and parts[1] == "=>":
            first.append(parts[2])
    return {"LD_PRELOAD": " ".join(first + [module])}
