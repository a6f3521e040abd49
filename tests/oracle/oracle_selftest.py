#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Self-test of the oracle harness: it must fail when ocfs2ctl is wrong.

    oracle_selftest.py OCFS2CTL

Runs oracle_volumes.py on one volume unchanged (it must pass), then once per
mutation in o2oracle.MUTATIONS (each falsifies one field of what ocfs2ctl
said): every run must exit 1 and name the falsified field.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True
import o2oracle as o2  # noqa: E402
from o2test.proc import need_tools  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GROUP, VOLUME = "b4096", "b4096-c4K-max-features"

# What the MISMATCH line must mention for each mutation.
EXPECT = {
    "stat-generation": "stat //global_bitmap: generation",
    "stat-flags": "stat //local_alloc:0000: flags",
    "group-contig": "contig_free",
    "chain-rec": "stat //global_inode_alloc: chain_list.records",
    "extent-blkno": "stat //journal:0000: extent_list.records",
    "inline-max": "stat /: inline_data.max",
    "mtime-nsec": "stat /lost+found: mtime_nsec",
    "ls-order": "ls //: names in order",
    "slot-node": "slots (occupied): occupied slots",
    "info-uuid": "info: uuid",
    "info-label": "info: label",
    "journal-seq": "journal slot 0: sequence",
    "check-dirents": "check: dirents",
    "cat-byte": "cat //slot_map",
}


def run_volumes(ctl, mutation):
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("O2ORACLE_MUTATE", None)
    if mutation:
        env["O2ORACLE_MUTATE"] = mutation
    p = subprocess.run([sys.executable, os.path.join(HERE, "oracle_volumes.py"), ctl, GROUP,
                        "--only", VOLUME], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=env)
    return p.returncode, p.stdout.decode(errors="replace")


def main():
    if len(sys.argv) != 2:
        print("usage: oracle_selftest.py OCFS2CTL")
        return 2
    need_tools("mkfs.ocfs2", "debugfs.ocfs2", "tunefs.ocfs2")
    ctl = os.path.abspath(sys.argv[1])
    missing = set(o2.MUTATIONS) ^ set(EXPECT)
    if missing:
        print("FAIL: mutations and expectations differ: %s" % sorted(missing))
        return 1
    bad = 0
    rc, out = run_volumes(ctl, None)
    if rc != 0:
        print("FAIL: the unmutated run does not pass (rc %d):\n%s" % (rc, out))
        return 1
    print("baseline: passes")
    for name in sorted(EXPECT):
        rc, out = run_volumes(ctl, name)
        lines = [l for l in out.splitlines() if l.startswith("MISMATCH")]
        hit = [l for l in lines if EXPECT[name] in l]
        if rc == 1 and hit:
            print("%-16s caught: %s" % (name, hit[0]))
        else:
            bad += 1
            print("%-16s NOT CAUGHT (rc %d, wanted a MISMATCH naming %r):\n%s"
                  % (name, rc, EXPECT[name], out))
    print("%d mutations, %d not caught" % (len(EXPECT), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
