# SPDX-License-Identifier: GPL-2.0-or-later
"""ocfs2ctl, run as the tools are run (see proc.tool_env)."""

import json

from o2test.proc import run_split, text


class Ctl:
    """exe: the ocfs2ctl to run.  img: what "{img}" in the arguments stands
    for; chk: the Check counting ok, json_ok and fails; env: the
    environment (default proc.tool_env())."""

    def __init__(self, exe, img=None, chk=None, env=None):
        self.exe = self.path = exe
        self.img, self.chk, self.env = img, chk, env

    def argv(self, args):
        if self.img is None:
            return list(args)
        return [a.replace("{img}", self.img) for a in args]

    def run(self, *args):
        """(exit status, stdout, stderr) as text."""
        return run_split([self.exe] + list(args), env=self.env)

    def raw(self, *args):
        """(exit status, stdout, stderr) as bytes."""
        return run_split([self.exe] + self.argv(args), env=self.env, binary=True)

    def json(self, *args):
        """Run ocfs2ctl --json ARGS; returns (exit status, the document or
        None when it printed nothing, stderr text).  Output that is not
        JSON raises RuntimeError."""
        rc, out, err = run_split([self.exe, "--json"] + self.argv(args), env=self.env, binary=True)
        doc = None
        if out:
            try:
                doc = json.loads(out.decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as e:
                raise RuntimeError("ocfs2ctl %s: output is not JSON (%s): %r"
                                   % (" ".join(args), e, out[:200]))
        return rc, doc, text(err)

    # ---- checked: each counts in chk ----

    def ok(self, *args):
        """A verb that must succeed quietly (text mode: nothing on stdout or stderr)."""
        argv = self.argv(args)
        rc, out, err = self.run(*argv)
        self.chk.ok(rc == 0 and err == "",
                    "ocfs2ctl %s: exit %d, stderr %r (want 0, quiet)" % (" ".join(argv), rc, err))
        return out

    def json_ok(self, *args):
        """ocfs2ctl --json ARGS must exit 0 quietly with a JSON document; returns it ({} if not)."""
        argv = ["--json"] + self.argv(args)
        rc, out, err = self.run(*argv)
        if not self.chk.ok(rc == 0 and err == "",
                           "ocfs2ctl %s: exit %d, stderr %r" % (" ".join(argv), rc, err)):
            return {}
        try:
            return json.loads(out)
        except ValueError:
            self.chk.ok(False, "ocfs2ctl %s: output is not JSON: %r" % (" ".join(argv), out))
            return {}

    def fails(self, rc_want, verb, needle, *args):
        """Exit rc_want, nothing on stdout, one stderr line 'ocfs2ctl: VERB: ...NEEDLE...'."""
        argv = self.argv(args)
        rc, out, err = self.run(*argv)
        lines = err.splitlines()
        what = "ocfs2ctl %s" % " ".join(argv)
        self.chk.ok(rc == rc_want, "%s: exit %d, want %d (stderr %r)" % (what, rc, rc_want, err))
        self.chk.ok(out == "", "%s: stdout %r, want nothing" % (what, out))
        self.chk.ok(len(lines) == 1 and lines[0].startswith("ocfs2ctl: %s: " % verb),
                    "%s: stderr %r, want one line 'ocfs2ctl: %s: ...'" % (what, err, verb))
        self.chk.ok(needle in err, "%s: stderr %r does not say %r" % (what, err, needle))
