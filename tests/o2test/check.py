# SPDX-License-Identifier: GPL-2.0-or-later
"""Counted checks: a failed check prints "FAIL: what" and the case goes on;
Failure is for what ends a case (a harness step that did not work)."""

import errno
import hashlib


class Failure(RuntimeError):
    pass


def short(v):
    """v, shortened for a message when it is long bytes or text."""
    if isinstance(v, (bytes, bytearray)) and len(v) > 64:
        return "%s...(%d bytes, sha %s)" % (bytes(v[:32]), len(v), hashlib.sha256(v).hexdigest()[:12])
    if isinstance(v, str) and len(v) > 200:
        return v[:200] + "...(%d chars)" % len(v)
    return v


class Check:
    def __init__(self):
        self.failures = 0
        self.count = 0

    def ok(self, cond, what):
        self.count += 1
        if not cond:
            self.failures += 1
            print("FAIL: " + what, flush=True)
        return bool(cond)

    def eq(self, got, want, what):
        return self.ok(got == want, "%s: got %r, want %r" % (what, short(got), short(want)))

    def err(self, fn, want, what):
        """fn() must fail with errno want (an int or a tuple of them)."""
        wants = want if isinstance(want, tuple) else (want,)
        try:
            r = fn()
        except OSError as e:
            return self.ok(e.errno in wants, "%s: got %s, want %s" % (
                what, errno.errorcode.get(e.errno, e.errno),
                "/".join(errno.errorcode[w] for w in wants)))
        return self.ok(False, "%s: succeeded (%r), want %s" % (
            what, short(r), "/".join(errno.errorcode[w] for w in wants)))

    def noerr(self, fn, what):
        try:
            return fn()
        except OSError as e:
            self.ok(False, "%s: %s" % (what, e))
            return None
