# SPDX-License-Identifier: GPL-2.0-or-later
"""`ocfs2ctl format` judged by the real ocfs2-tools.

For every block size (512..4096) x cluster size (4K, 64K, 1M) x feature
level (max-compat, default, max-features), plus pcmk, o2cb-with-cluster-info
and local volumes, a fresh sparse image is formatted and then:

  - fsck.ocfs2 -fn must exit 0 with "All passes succeeded." and no problem;
  - debugfs.ocfs2 stats must show the block/cluster size bits, slots, label,
    features, cluster stack and name asked for; stat //journal:NNNN the
    journal size of every slot (and no more slots); ls // the system files;
  - tunefs.ocfs2 -Q must read the same cluster size, slots, features, UUID
    and label (1.8.7 has no block-size specifier, %B, in -Q);
  - o2info --volinfo must agree too: it only reads block devices (on an
    image file 1.8.7 prints nothing and exits 0), so it runs on a read-only
    loop device when the machine lets us make one, and is reported as
    skipped otherwise;
  - ocfs2ctl check and ocfs2ctl --json info must pass and agree.

Then the verb's behaviour: refusal to overwrite OCFS2 and other
filesystems without --force (and success with it), one-line errors for bad
option values, --json output, -q, --dry-run, BLOCKS, the progress bar on a
terminal only.

Usage: test_format.py OCFS2CTL WORKDIR; by hand, from the top of the tree
(o2test, the tests' library, is found through PYTHONPATH):

    PYTHONPATH=tests python3 tests/format/test_format.py build/cli/ocfs2ctl /tmp/fmt
"""

import concurrent.futures
import functools
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import threading

from o2test.proc import SKIP, run_split, tool_env, which
from o2test.tree import file_sha
from o2test.volume import make_image

MiB = 1 << 20

# the tools' environment (without meson's MALLOC_PERTURB_: see proc.tool_env)
ENV = tool_env(TZ="UTC", LANG="C", LC_ALL="C")
# (exit status, stdout, stderr) as text, in ENV
run = functools.partial(run_split, env=ENV)

OCFS2CTL = None
WORK = None

COMPAT_ALL = {"backup-super", "strict-journal-super"}
DEFAULT_INCOMPAT = {"sparse", "extended-slotmap", "inline-data", "xattr", "indexed-dirs",
                    "refcount", "discontig-bg", "append-dio"}
LEVELS = {
    "max-compat": (COMPAT_ALL, set(), set()),
    "default": (COMPAT_ALL, DEFAULT_INCOMPAT, {"unwritten"}),
    "max-features": (COMPAT_ALL, DEFAULT_INCOMPAT | {"metaecc"},
                     {"unwritten", "usrquota", "grpquota"}),
}


class Failures:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []
        self.notes = []

    def fail(self, where, what):
        with self.lock:
            self.items.append("%s: %s" % (where, what))

    def note(self, what):
        with self.lock:
            if what not in self.notes:
                self.notes.append(what)


F = Failures()


def fresh_image(name, size):
    return make_image(os.path.join(WORK, name + ".img"), size)


# ------------------------------------------------------------------ judges

def debugfs(img, cmd):
    rc, out, err = run([which("debugfs.ocfs2"), "-R", cmd, img])
    return rc, out, err


def parse_stats(out):
    st = {}
    m = re.search(r"Block Size Bits: (\d+)\s+Cluster Size Bits: (\d+)", out)
    if m:
        st["block_bits"], st["cluster_bits"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"Max Node Slots: (\d+)", out)
    if m:
        st["slots"] = int(m.group(1))
    m = re.search(r"^\s*Label: ?(.*)$", out, re.M)
    if m:
        st["label"] = m.group(1)
    m = re.search(r"^\s*UUID: (\S+)$", out, re.M)
    if m:
        st["uuid"] = m.group(1)
    for key, field in (("compat", "Feature Compat"), ("incompat", "Feature Incompat"),
                       ("ro_compat", "Feature RO compat")):
        m = re.search(r"^\s*%s: \d+ ?(.*)$" % field, out, re.M)
        if m:
            st[key] = set(m.group(1).split())
    m = re.search(r"^\s*Cluster stack: (.*)$", out, re.M)
    if m:
        st["stack"] = m.group(1).strip()
    m = re.search(r"^\s*Cluster name: (.*)$", out, re.M)
    st["cluster_name"] = m.group(1).strip() if m else ""
    m = re.search(r"Links: \d+\s+Clusters: (\d+)", out)
    if m:
        st["clusters"] = int(m.group(1))
    return st


def system_files(slots, quotas):
    names = {"bad_blocks", "global_inode_alloc", "slot_map", "heartbeat", "global_bitmap"}
    per = ["orphan_dir", "extent_alloc", "inode_alloc", "journal", "local_alloc",
           "truncate_log"]
    for q in quotas:
        names.add("aquota." + q)
        per.append("aquota." + q)
    for s in range(slots):
        for p in per:
            names.add("%s:%04d" % (p, s))
    return names


LOOP_LOCK = threading.Lock()


def o2info_check(where, img, exp):
    """o2info --volinfo on a read-only loop device; False if none can be made."""
    losetup = which("losetup")
    if not losetup or os.geteuid() != 0:
        return False
    with LOOP_LOCK:
        rc, out, err = run([losetup, "-f", "-r", "--show", img])
    if rc != 0 or not out.strip().startswith("/dev/"):
        return False
    loop = out.strip()
    try:
        rc, out, err = run([which("o2info"), "--volinfo", loop])
    finally:
        with LOOP_LOCK:
            run([losetup, "-d", loop])
    if rc != 0:
        F.fail(where, "o2info --volinfo exit %d: %s" % (rc, err.strip()))
        return True
    info = {}
    feats = set()
    for line in out.splitlines():
        k, _, v = line.partition(":")
        k = k.strip()
        if k == "Features":
            feats |= set(v.split())
        elif k:
            info[k] = v.strip()
    want = {"Block Size": str(exp["bs"]), "Cluster Size": str(exp["cs"]),
            "Node Slots": str(exp["slots"]), "Label": exp["label"], "UUID": exp["uuid"]}
    for k, v in want.items():
        if info.get(k) != v:
            F.fail(where, "o2info %s: %r, expected %r" % (k, info.get(k), v))
    allf = exp["compat"] | exp["incompat"] | exp["ro_compat"]
    if feats != allf:
        F.fail(where, "o2info features %s, expected %s" % (sorted(feats), sorted(allf)))
    return True


def judge(where, img, exp):
    """Every tool's view of img against the expectation exp."""
    # fsck: the judge of consistency
    rc, out, err = run([which("fsck.ocfs2"), "-fn", img])
    problems = [l for l in out.splitlines() if l.startswith("[")]
    if rc != 0 or "All passes succeeded." not in out or problems:
        F.fail(where, "fsck.ocfs2 -fn exit %d: %s" % (rc, "; ".join(problems) or
                                                       (out + err).strip()[-300:]))

    # debugfs stats
    rc, out, err = debugfs(img, "stats")
    st = parse_stats(out)
    want = {"block_bits": exp["bs"].bit_length() - 1, "cluster_bits": exp["cs"].bit_length() - 1,
            "slots": exp["slots"], "label": exp["label"], "uuid": exp["uuid"],
            "compat": exp["compat"], "incompat": exp["incompat"],
            "ro_compat": exp["ro_compat"], "stack": exp["stack_words"],
            "cluster_name": exp["cluster_name"]}
    if "clusters" in exp:
        want["clusters"] = exp["clusters"]
    for k, v in want.items():
        if st.get(k) != v:
            F.fail(where, "debugfs stats %s: %r, expected %r" % (k, st.get(k), v))

    # journals: every slot's, and no more
    for s in range(exp["slots"] + 1):
        rc, out, err = debugfs(img, "stat //journal:%04d" % s)
        m = re.search(r"Size: (\d+)", out)
        if s == exp["slots"]:
            if m:
                F.fail(where, "journal:%04d exists with %d slots" % (s, exp["slots"]))
            continue
        if not m or int(m.group(1)) != exp["journal"]:
            F.fail(where, "journal:%04d size %s, expected %d" %
                   (s, m.group(1) if m else "?", exp["journal"]))
        if "Journal" not in out:
            F.fail(where, "journal:%04d lacks the Journal flag" % s)

    # the system directory
    rc, out, err = debugfs(img, "ls //")
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] != "." and parts[-1] not in (".", ".."):
            names.add(parts[-1])
    quotas = [q for q in ("user", "group") if
              ("usr" if q == "user" else "grp") + "quota" in exp["ro_compat"]]
    want_names = system_files(exp["slots"], quotas)
    if names != want_names:
        F.fail(where, "system directory: missing %s, extra %s" %
               (sorted(want_names - names)[:5], sorted(names - want_names)[:5]))
    rc, out, err = debugfs(img, "ls -l /")
    if "lost+found" not in out:
        F.fail(where, "no lost+found in /")

    # tunefs.ocfs2 -Q (no block size specifier in 1.8.7)
    rc, out, err = run([which("tunefs.ocfs2"), "-Q", "%T|%N|%M|%H|%O|%U|%V\\n", img])
    parts = out.strip().split("|")
    if rc != 0 or len(parts) != 7:
        F.fail(where, "tunefs.ocfs2 -Q exit %d: %s" % (rc, (out + err).strip()))
    else:
        def fs(s):
            return set() if s.strip() == "None" else set(s.split())
        got = (int(parts[0]), int(parts[1]), fs(parts[2]), fs(parts[3]), fs(parts[4]),
               parts[5], parts[6])
        want_t = (exp["cs"], exp["slots"], exp["compat"], exp["incompat"], exp["ro_compat"],
                  exp["uuid"], exp["label"])
        if got != want_t:
            F.fail(where, "tunefs.ocfs2 -Q: %r, expected %r" % (got, want_t))

    if not o2info_check(where, img, exp):
        F.note("o2info --volinfo skipped: no loop device could be made (it reads only "
               "block devices)")

    # our own reader
    rc, out, err = run([OCFS2CTL, "check", img])
    if rc != 0:
        F.fail(where, "ocfs2ctl check exit %d: %s" % (rc, (out + err).strip()[-300:]))
    rc, out, err = run([OCFS2CTL, "--json", "info", img])
    try:
        info = json.loads(out)
        got = (info["block_size"], info["cluster_size"], info["max_slots"], info["label"],
               info["uuid"], info["journal_size"])
        want_i = (exp["bs"], exp["cs"], exp["slots"], exp["label"], exp["uuid"], exp["journal"])
        if got != want_i:
            F.fail(where, "ocfs2ctl info: %r, expected %r" % (got, want_i))
    except (ValueError, KeyError) as e:
        F.fail(where, "ocfs2ctl --json info: %s (%s)" % (e, err.strip()))


def format_and_judge(name, size, bs, cs, level, extra=(), slots=2, label=None,
                     stack=None, cluster_name="", local=False, jsize=None,
                     add_incompat=(), del_incompat=()):
    where = name
    img = fresh_image(name, size)
    jsize = jsize or (16 * MiB if cs >= MiB else 4 * MiB)
    label = label if label is not None else name[:40]
    args = [OCFS2CTL, "format", "--json", "-b", str(bs), "-C", str(cs), "-N", str(slots),
            "-L", label, "-J", "size=%d" % jsize]
    if level != "default":
        args.append("--fs-feature-level=" + level)
    args += list(extra)
    rc, out, err = run(args + [img])
    if rc != 0:
        F.fail(where, "format exit %d: %s" % (rc, err.strip()))
        return
    if err.strip():
        F.fail(where, "format wrote to stderr: %s" % err.strip())
    try:
        made = json.loads(out)
    except ValueError as e:
        F.fail(where, "format --json output: %s: %r" % (e, out[:200]))
        return
    compat, incompat, ro = (set(x) for x in LEVELS[level])
    incompat = (set(incompat) | set(add_incompat)) - set(del_incompat)
    if stack == "pcmk":
        incompat |= {"userspace-stack", "extended-slotmap"}
    elif stack == "o2cb":
        incompat |= {"clusterinfo", "extended-slotmap"}
    if local:
        incompat.add("local")
    exp = {"bs": bs, "cs": cs, "slots": slots, "label": label, "uuid": made.get("uuid"),
           "compat": compat, "incompat": incompat, "ro_compat": ro,
           "stack_words": stack or "classic o2cb", "cluster_name": cluster_name,
           "journal": jsize}
    got_f = (set(made["features"]["compat"]), set(made["features"]["incompat"]),
             set(made["features"]["ro_compat"]))
    if got_f != (compat, incompat, ro):
        F.fail(where, "format --json features %r, expected %r" % (got_f, (compat, incompat, ro)))
    for k, v in (("block_size", bs), ("cluster_size", cs), ("max_slots", slots),
                 ("journal_size", jsize), ("label", label), ("local", local),
                 ("stack", stack or ""), ("cluster_name", cluster_name)):
        if made.get(k) != v:
            F.fail(where, "format --json %s: %r, expected %r" % (k, made.get(k), v))
    judge(where, img, exp)
    os.unlink(img)


def matrix():
    jobs = []
    for bs in (512, 1024, 2048, 4096):
        for cs in (4096, 65536, MiB):
            for level in ("max-compat", "default", "max-features"):
                name = "b%d-c%dk-%s" % (bs, cs // 1024, level)
                jobs.append(dict(name=name, size=128 * MiB, bs=bs, cs=cs, level=level))
    jobs.append(dict(name="pcmk-b4096", size=128 * MiB, bs=4096, cs=4096, level="default",
                     extra=["--cluster-stack=pcmk", "--cluster-name=x"], stack="pcmk",
                     cluster_name="x", slots=4))
    jobs.append(dict(name="pcmk-b512-maxfeat", size=128 * MiB, bs=512, cs=65536,
                     level="max-features",
                     extra=["--cluster-stack=pcmk", "--cluster-name=hacluster"], stack="pcmk",
                     cluster_name="hacluster"))
    jobs.append(dict(name="o2cb-info", size=128 * MiB, bs=2048, cs=4096, level="default",
                     extra=["--cluster-stack=o2cb", "--cluster-name=ocfs2"], stack="o2cb",
                     cluster_name="ocfs2"))
    jobs.append(dict(name="local-b4096", size=128 * MiB, bs=4096, cs=4096, level="default",
                     extra=["-M", "local"], slots=1, local=True))
    jobs.append(dict(name="local-b1024-maxcompat", size=128 * MiB, bs=1024, cs=65536,
                     level="max-compat", extra=["-M", "local"], slots=1, local=True))
    jobs.append(dict(name="noinline-ecc", size=128 * MiB, bs=4096, cs=4096, level="default",
                     extra=["--fs-features=noinline-data,metaecc"], add_incompat={"metaecc"},
                     del_incompat={"inline-data"}))
    jobs.append(dict(name="noinline-b512", size=128 * MiB, bs=512, cs=4096, level="default",
                     extra=["--fs-features=noinline-data"], del_incompat={"inline-data"}))
    jobs.append(dict(name="many-slots", size=512 * MiB, bs=1024, cs=4096, level="max-features",
                     slots=24, label=""))
    jobs.append(dict(name="backup-supers", size=1200 * MiB, bs=4096, cs=4096, level="default",
                     label="bk"))
    return jobs


def run_matrix(workers):
    jobs = matrix()

    def one(j):
        j = dict(j)
        name, size, bs, cs, level = (j.pop(k) for k in ("name", "size", "bs", "cs", "level"))
        try:
            format_and_judge(name, size, bs, cs, level, **j)
        except Exception as e:  # a harness bug must show, not hide the others
            F.fail(name, "harness error: %r" % e)

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        list(ex.map(one, jobs))
    # the backup superblock of the 1200M volume specifically
    return len(jobs)


# ------------------------------------------------------------------ behaviour

def one_error_line(where, rc, out, err, want_rc, want):
    lines = [l for l in err.splitlines() if l.strip()]
    if rc != want_rc:
        F.fail(where, "exit %d, expected %d (%s)" % (rc, want_rc, err.strip()))
    if len(lines) != 1 or not lines[0].startswith("ocfs2ctl: format: "):
        F.fail(where, "expected one 'ocfs2ctl: format:' line, got %r" % err)
    elif want.lower() not in lines[0].lower():
        F.fail(where, "message %r lacks %r" % (lines[0], want))
    if out.strip():
        F.fail(where, "stdout not empty on failure: %r" % out[:200])


def test_refusals():
    img = fresh_image("refuse", 128 * MiB)
    rc, out, err = run([OCFS2CTL, "format", "-q", "-J", "size=4M", img])
    if rc != 0:
        F.fail("refuse", "first format failed: %s" % err)
        return
    before = file_sha(img)
    rc, out, err = run([OCFS2CTL, "format", "-q", img])
    one_error_line("refuse-ocfs2", rc, out, err, 1, "holds an OCFS2 volume")
    if "--force" not in err:
        F.fail("refuse-ocfs2", "the message does not mention --force: %r" % err)
    if file_sha(img) != before:
        F.fail("refuse-ocfs2", "the refused image was modified")
    uuid_before = json.loads(run([OCFS2CTL, "--json", "info", img])[1])["uuid"]
    rc, out, err = run([OCFS2CTL, "format", "-q", "--force", "-J", "size=4M", img])
    if rc != 0:
        F.fail("refuse-force", "--force failed: %s" % err)
    else:
        uuid_after = json.loads(run([OCFS2CTL, "--json", "info", img])[1])["uuid"]
        if uuid_after == uuid_before:
            F.fail("refuse-force", "the UUID did not change")
        rc, fout, ferr = run([which("fsck.ocfs2"), "-fn", img])
        if rc != 0 or "All passes succeeded." not in fout:
            F.fail("refuse-force", "fsck after reformat: %s" % fout[-200:])
    # -F is mkfs.ocfs2's spelling of --force
    rc, out, err = run([OCFS2CTL, "format", "-q", "-F", "-J", "size=4M", img])
    if rc != 0:
        F.fail("refuse-F", "-F failed: %s" % err)

    foreign = [
        ("ext4", [(1080, b"\x53\xef")], "ext2/ext3/ext4"),
        ("xfs", [(0, b"XFSB")], "XFS"),
        ("swap", [(4086, b"SWAPSPACE2")], "swap"),
        ("luks", [(0, b"LUKS\xba\xbe")], "LUKS"),
        ("btrfs", [(0x10040, b"_BHRfS_M")], "btrfs"),
    ]
    mkext4 = which("mkfs.ext4")
    for name, patches, words in foreign:
        img = fresh_image("foreign-" + name, 64 * MiB)
        if name == "ext4" and mkext4:
            rc, out, err = run([mkext4, "-q", "-F", img])
            if rc != 0:
                F.fail("foreign-ext4", "mkfs.ext4 failed: %s" % err)
        else:
            with open(img, "r+b") as f:
                for off, data in patches:
                    f.seek(off)
                    f.write(data)
        before = file_sha(img)
        rc, out, err = run([OCFS2CTL, "format", "-q", img])
        one_error_line("foreign-" + name, rc, out, err, 1, words)
        if file_sha(img) != before:
            F.fail("foreign-" + name, "the refused image was modified")
        rc, out, err = run([OCFS2CTL, "format", "-q", "--force", "-J", "size=4M", img])
        if rc != 0:
            F.fail("foreign-" + name, "--force failed: %s" % err)
        else:
            rc, fout, ferr = run([which("fsck.ocfs2"), "-fn", img])
            if rc != 0 or "All passes succeeded." not in fout:
                F.fail("foreign-" + name, "fsck after --force: %s" % fout[-200:])
        os.unlink(img)


BAD = [
    (["-b", "3000"], 1, "block size 3000"),
    (["-b", "8K"], 1, "block size 8192"),
    (["-C", "2K"], 1, "cluster size 2048"),
    (["-C", "2M"], 1, "cluster size"),
    (["-N", "300"], 1, "at most 255"),
    (["-N", "0"], 1, "at least 1"),
    (["-N", "two"], 1, "not a number"),
    (["-L", "x" * 64], 1, "label of 64 bytes"),
    (["-J", "size=3M"], 1, "at least 4M"),
    (["-C", "1M", "-J", "size=4M"], 1, "nine clusters"),
    (["-J", "size=100M", "-N", "4"], 1, "too big"),
    (["-J", "bogus"], 1, "bad journal option"),
    (["-T", "bogus"], 1, "filesystem type"),
    (["-M", "bogus"], 1, "mount type"),
    (["--fs-features=bogus"], 1, "unknown feature 'bogus'"),
    (["--fs-features=sparse,nosparse"], 1, "both asked for and turned off"),
    (["--fs-feature-level=bogus"], 1, "feature level"),
    (["--cluster-stack=pcmk"], 1, "needs --cluster-name"),
    (["--cluster-name=x"], 1, "needs --cluster-stack"),
    (["--cluster-stack=bogus", "--cluster-name=x"], 1, "unknown cluster stack"),
    (["--cluster-stack=o2cb", "--cluster-name=a-b"], 1, "alphanumeric"),
    (["-M", "local", "--cluster-stack=pcmk", "--cluster-name=x"], 1, "local"),
    (["-U", "nothex"], 1, "UUID"),
    (["--frobnicate"], 2, "unknown option"),
]


def test_bad_options():
    img = fresh_image("bad", 64 * MiB)
    before = file_sha(img)
    for args, want_rc, want in BAD:
        rc, out, err = run([OCFS2CTL, "format"] + args + [img])
        one_error_line("bad %s" % " ".join(args)[:40], rc, out, err, want_rc, want)
    if file_sha(img) != before:
        F.fail("bad", "a refused format modified the image")
    small = fresh_image("small", 4 * MiB)
    rc, out, err = run([OCFS2CTL, "format", small])
    one_error_line("too-small", rc, out, err, 1, "too small")
    rc, out, err = run([OCFS2CTL, "format", os.path.join(WORK, "does-not-exist.img")])
    one_error_line("missing", rc, out, err, 1, "No such file")
    rc, out, err = run([OCFS2CTL, "format"])
    one_error_line("no-device", rc, out, err, 2, "no device")
    os.unlink(img)
    os.unlink(small)


def test_mounted():
    """A mounted block device is refused, --force or not (checked with -n, which
    writes nothing in any case)."""
    src = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if len(fields) > 4 and fields[4] == "/":
                parts = right.split()
                if len(parts) > 1:
                    src = parts[1]
    if not src or not src.startswith("/dev/") or not os.path.exists(src):
        F.note("mounted-device refusal not tested: / is not mounted from a block device")
        return
    rc, out, err = run([OCFS2CTL, "format", "-n", "--force", src])
    one_error_line("mounted", rc, out, err, 1, "is mounted on /")


def test_output_modes():
    # --dry-run writes nothing and says what it would make
    img = fresh_image("dry", 128 * MiB)
    before = file_sha(img)
    rc, out, err = run([OCFS2CTL, "--json", "format", "-n", "-b", "2048", "-N", "3", img])
    if rc != 0:
        F.fail("dry-run", "exit %d: %s" % (rc, err))
    else:
        d = json.loads(out)
        if not d["dry_run"] or d["block_size"] != 2048 or d["max_slots"] != 3 or \
                d["uuid"] is not None:
            F.fail("dry-run", "json %r" % d)
    if file_sha(img) != before:
        F.fail("dry-run", "--dry-run wrote to the image")

    # -q: silent; default: a summary, no progress bar when stdout is no terminal
    rc, out, err = run([OCFS2CTL, "format", "-q", "-J", "size=4M", img])
    if rc != 0 or out or err:
        F.fail("quiet", "exit %d, stdout %r, stderr %r" % (rc, out, err))
    rc, out, err = run([OCFS2CTL, "format", "-F", "-J", "size=4M", "-L", "hello", img])
    if rc != 0 or "Label:" not in out or "hello" not in out or "\r" in out or err:
        F.fail("human", "exit %d, stdout %r, stderr %r" % (rc, out[:300], err))

    # BLOCKS limits the volume
    rc, out, err = run([OCFS2CTL, "--json", "format", "-F", "-b", "4096", "-J", "size=4M",
                        img, "16384"])
    if rc != 0:
        F.fail("blocks", "exit %d: %s" % (rc, err))
    else:
        d = json.loads(out)
        if d["blocks"] != 16384 or d["volume_size"] != 16384 * 4096:
            F.fail("blocks", "json blocks %r" % d["blocks"])
        st = parse_stats(debugfs(img, "stats")[1])
        if st.get("clusters") != 16384:
            F.fail("blocks", "debugfs sees %r clusters" % st.get("clusters"))
        rc, fout, ferr = run([which("fsck.ocfs2"), "-fn", img])
        if rc != 0 or "All passes succeeded." not in fout:
            F.fail("blocks", "fsck: %s" % fout[-200:])

    # --json keys agree with the volume
    rc, out, err = run([OCFS2CTL, "format", "--json", "-F", "-J", "size=4M", "-N", "3",
                        "-L", "jsonvol", "--fs-feature-level=max-features", img])
    try:
        d = json.loads(out)
        info = json.loads(run([OCFS2CTL, "--json", "info", img])[1])
        for k in ("uuid", "label", "block_size", "cluster_size", "max_slots",
                  "first_cluster_group", "root_blkno", "system_dir_blkno", "used_clusters",
                  "feature_compat", "feature_incompat", "feature_ro_compat", "journal_size",
                  "fs_generation", "uuid_hash"):
            if d.get(k) != info.get(k):
                F.fail("json", "%s: format says %r, info says %r" % (k, d.get(k), info.get(k)))
        if list(d["dx_seed"]) != list(info["dx_seed"]):
            F.fail("json", "dx_seed differs")
    except (ValueError, KeyError) as e:
        F.fail("json", "%s: %r %r" % (e, out[:200], err))

    # --help
    rc, out, err = run([OCFS2CTL, "format", "--help"])
    if rc != 0 or "--fs-features" not in out:
        F.fail("help", "exit %d: %r" % (rc, out[:200]))

    # the progress bar, on a terminal only
    master, slave = pty.openpty()
    p = subprocess.Popen([OCFS2CTL, "format", "-F", "-J", "size=32M", img], stdout=slave,
                         stderr=subprocess.PIPE, env=ENV)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:
            break
        if not b:
            break
        chunks.append(b)
    rc = p.wait()
    os.close(master)
    tty = b"".join(chunks).decode(errors="replace")
    if rc != 0 or "Formatting [" not in tty or "100%" not in tty or "\r" not in tty:
        F.fail("progress", "exit %d, terminal output %r" % (rc, tty[:300]))
    rc, out, err = run([OCFS2CTL, "format", "-F", "-q", "-J", "size=4M", img])
    os.unlink(img)


def main(argv):
    global OCFS2CTL, WORK
    if len(argv) != 3:
        print("usage: test_format.py OCFS2CTL WORKDIR", file=sys.stderr)
        return 2
    OCFS2CTL = os.path.abspath(argv[1])
    for t in ("fsck.ocfs2", "debugfs.ocfs2", "tunefs.ocfs2", "o2info"):
        if not which(t):
            print("SKIP: %s is not installed" % t)
            return SKIP
    WORK = os.path.join(os.path.abspath(argv[2]), "format-work")
    os.makedirs(WORK, exist_ok=True)

    n = run_matrix(workers=min(8, os.cpu_count() or 2))
    test_refusals()
    test_bad_options()
    test_mounted()
    test_output_modes()

    for note in F.notes:
        print("NOTE:", note)
    if F.items:
        print("FAILED: %d problems" % len(F.items))
        for item in F.items:
            print("  " + item)
        return 1
    print("ok: %d volumes judged by fsck.ocfs2, debugfs.ocfs2, tunefs.ocfs2, o2info and "
          "ocfs2ctl; refusal, option and output checks passed" % n)
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
