#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The D-Bus API (dbus/org.ocfs2d.Daemon1.xml) over a real bus.

    test_dbus.py OCFS2D OCFS2CTL CASE

Each case starts a private dbus-daemon shaped like the system bus (type
system, EXTERNAL authentication, the default-deny policy of Debian's
system.conf) whose policy directory holds a copy of the shipped
packaging/dbus/org.ocfs2d.Daemon1.conf, and an ocfs2d --server that finds
it through DBUS_SYSTEM_BUS_ADDRESS.  Clients are the stock tools: gdbus
(call, introspect, monitor), dbus-send for what gdbus will not do (a
wrong signature; the control socket, peer-to-peer), ocfs2ctl on the control
socket, setpriv for a caller that is not root (uid 65534), and a bare
client of the test's own (RawClient) for Mounts that must arrive together.
Volumes are made by mkfs.ocfs2, mounted for real through FUSE, and judged
by fsck.ocfs2 -fn and debugfs.ocfs2 once they are closed.

CASE: bus (the name, objects, properties against what the ocfs2-tools
read, signals, Mount/Reflink/Unmount, a second daemon that cannot take the
name), args (hostile and wrong arguments: the right error, and nothing
changes), auth (a caller that is not root may read but not act; the
control socket and the bus name are root's).

After every case each daemon stops cleanly with no sanitizer report in its
log, no volume is left mounted, and every volume is fsck-clean.  Needs
root and /dev/fuse (else exit 77, the skip).
"""

import errno
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

from o2test.check import Failure
from o2test.harness import main
from o2test.proc import log, run, sanitizer_report, tool_env, which
from o2test.tree import read_file
from o2test.volume import mount_entry

HERE = os.path.dirname(os.path.abspath(__file__))

POLICY = os.path.join(HERE, "..", "..", "packaging", "dbus", "org.ocfs2d.Daemon1.conf")
BUS_NAME = "org.ocfs2d.Daemon1"
ROOT = "/org/ocfs2d/Daemon1"
MANAGER = ROOT + "/Manager"
VOLUMES = ROOT + "/volumes"
MGR = "org.ocfs2d.Daemon1.Manager"
VOL = "org.ocfs2d.Daemon1.Volume"
OM = "org.freedesktop.DBus.ObjectManager"
PROPS = "org.freedesktop.DBus.Properties"
E = "org.ocfs2d.Daemon1.Error."
INVALID_ARGS = "org.freedesktop.DBus.Error.InvalidArgs"
ACCESS_DENIED = "org.freedesktop.DBus.Error.AccessDenied"
NOBODY = 65534
# every call gets an answer well inside this (mounting a small volume takes
# a fraction of a second): a call that has none is a hang, and a failure
CALL_TIMEOUT = 30
# the long check's volume: directories of 300 empty files each
JOBS_DIRS = int(os.environ.get("DBUS_JOBS_DIRS", "150"))

# A bus like Debian's system bus (/usr/share/dbus-1/system.conf): anyone
# may connect; owning names and calling methods are denied unless a file
# in the policy directory punches a hole; replies and signals flow; anyone
# may talk to the bus itself.  Only that directory differs: it holds the
# policy under test.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <auth>EXTERNAL</auth>
  <listen>unix:path={socket}</listen>
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
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"
          send_member="UpdateActivationEnvironment"/>
    <deny send_destination="org.freedesktop.DBus"
          send_interface="org.freedesktop.DBus.Debug.Stats"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus"
           send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <includedir>{policy_dir}</includedir>
</busconfig>
"""


# ---- GVariant text (what gdbus prints) ----

class Typed:
    """A value with an explicit GVariant type: Typed("int32", -1)."""

    def __init__(self, type_word, value):
        self.type_word, self.value = type_word, value


def U(n):
    return Typed("uint32", n)


def gv_string(s):
    out = ["'"]
    for ch in s:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def gv(v):
    """A Python value as GVariant text: str s, bool b, int u, float d,
    dict a{sv} (each value in a variant), Typed as given."""
    if isinstance(v, Typed):
        if v.type_word == "text":  # GVariant text as it is: "@au [1, 2]"
            return v.value
        if v.type_word == "variant":
            return "<%s>" % gv(v.value)
        if v.type_word == "objectpath":
            return "objectpath " + gv_string(v.value)
        return "%s %s" % (v.type_word, gv(v.value))
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return "uint32 %d" % v
    if isinstance(v, float):
        return "double %r" % v
    if isinstance(v, str):
        return gv_string(v)
    if isinstance(v, dict):
        if not v:
            return "@a{sv} {}"
        return "{%s}" % ", ".join("%s: <%s>" % (gv_string(k), gv(x)) for k, x in v.items())
    raise TypeError(v)


class GVParser:
    """Parses g_variant_print() output into Python values: tuples, lists,
    dicts, str (strings, object paths, signatures), int, float, bool;
    variants become their contents."""

    TYPE_WORDS = ("objectpath", "signature", "boolean", "byte", "int16", "uint16", "int32",
                  "uint32", "int64", "uint64", "handle", "double", "string")

    def __init__(self, text):
        self.s, self.i = text, 0

    def parse(self):
        v = self.value()
        self.space()
        if self.i != len(self.s):
            raise ValueError("trailing text at %d: %r" % (self.i, self.s[self.i:self.i + 40]))
        return v

    def space(self):
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self):
        self.space()
        return self.s[self.i] if self.i < len(self.s) else ""

    def expect(self, ch):
        if self.peek() != ch:
            raise ValueError("expected %r at %d in %r" % (ch, self.i, self.s[:200]))
        self.i += 1

    def items(self, close, one):
        out = []
        while self.peek() != close:
            out.append(one())
            if self.peek() == ",":
                self.i += 1
        self.i += 1
        return out

    def value(self):
        c = self.peek()
        if c == "(":
            self.i += 1
            return tuple(self.items(")", self.value))
        if c == "[":
            self.i += 1
            return self.items("]", self.value)
        if c == "{":
            self.i += 1

            def entry():
                k = self.value()
                self.expect(":")
                return k, self.value()
            return dict(self.items("}", entry))
        if c == "<":
            self.i += 1
            v = self.value()
            self.expect(">")
            return v
        if c in "'\"":
            return self.string()
        if c == "@":  # a type annotation: @a{sv} {}
            while self.i < len(self.s) and not self.s[self.i].isspace():
                self.i += 1
            return self.value()
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(self.s, self.i)
        if m:
            word = m.group(0)
            self.i = m.end()
            if word in ("true", "false"):
                return word == "true"
            if word in self.TYPE_WORDS:
                return self.value()
            if word in ("nan", "inf"):
                return float(word)
            raise ValueError("unknown word %r in %r" % (word, self.s[:200]))
        m = re.compile(r"[-+]?(0x[0-9a-fA-F]+|[0-9.]+([eE][-+]?[0-9]+)?|inf|nan)").match(self.s, self.i)
        if not m:
            raise ValueError("cannot parse at %d: %r" % (self.i, self.s[self.i:self.i + 40]))
        self.i = m.end()
        t = m.group(0)
        if t.lstrip("+-").startswith("0x"):
            return int(t, 16)
        return float(t) if any(ch in t for ch in ".eEni") else int(t)

    def string(self):
        q = self.s[self.i]
        self.i += 1
        out = []
        simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a"}
        while True:
            ch = self.s[self.i]
            self.i += 1
            if ch == q:
                return "".join(out)
            if ch != "\\":
                out.append(ch)
                continue
            e = self.s[self.i]
            self.i += 1
            if e in simple:
                out.append(simple[e])
            elif e in "uU":
                n = 4 if e == "u" else 8
                out.append(chr(int(self.s[self.i:self.i + n], 16)))
                self.i += n
            else:
                out.append(e)


def gv_parse(text):
    return GVParser(text.strip()).parse()


# What dbus-send --print-reply prints: "array [", "dict entry(", "variant",
# "string \"...\"", "uint32 5", ... one value a line (strings are not escaped:
# one ends at its line's last quote).
SEND_TOKEN = re.compile(r'\s*(?:(array \[)|(\])|(dict entry\()|(\))|(struct \{)|(\})|(variant)'
                        r'|(?:string|object path|signature) "(.*)"(?=\n|$)'
                        r'|((?:u?int(?:16|32|64)|byte|double) \S+)|boolean (true|false))')


def send_parse(text):
    """The values of a dbus-send --print-reply answer, as gv_parse gives
    them (an array of dict entries is a dict; an empty array is {})."""
    body = text.split("\n", 1)[1] if text.startswith(("method return", "error")) else text
    toks = []
    pos = 0
    while body[pos:].strip():
        m = SEND_TOKEN.match(body, pos)
        if not m:
            raise ValueError("dbus-send output at %d: %r" % (pos, body[pos:pos + 60]))
        pos = m.end()
        toks.append(m)
    i = 0

    def value():
        nonlocal i
        m = toks[i]
        i += 1
        if m.group(1):  # array [
            items = []
            while not toks[i].group(2):
                items.append(value())
            i += 1
            if all(isinstance(x, tuple) and len(x) == 3 and x[0] == "entry" for x in items):
                return {x[1]: x[2] for x in items}
            return items
        if m.group(3):  # dict entry(
            k = value()
            v = value()
            i += 1  # )
            return ("entry", k, v)
        if m.group(5):  # struct {
            items = []
            while not toks[i].group(6):
                items.append(value())
            i += 1
            return tuple(items)
        if m.group(7):  # variant
            return value()
        if m.group(8) is not None:
            return m.group(8)
        if m.group(9):
            word, num = m.group(9).split()
            return float(num) if word == "double" else int(num, 0)
        if m.group(10):
            return m.group(10) == "true"
        raise ValueError("dbus-send output: unexpected %r" % m.group(0))
    out = []
    while i < len(toks):
        out.append(value())
    return tuple(out)


def escape_object_path(s):
    """g_dbus_escape_object_path: ASCII letters and digits stay, each other byte is _XX."""
    return "".join(chr(b) if chr(b).isascii() and chr(b).isalnum() else "_%02x" % b
                   for b in os.fsencode(s))


def journal_counters(stats):
    """Statistics' keys but the per-request ones (requests_OP, requests_OP_us,
    which come in pairs): sorted, or None if a request counter is unpaired."""
    req = [k for k in stats if k.startswith("requests_")]
    counts = [k for k in req if not k.endswith("_us")]
    if sorted(req) != sorted(counts + [k + "_us" for k in counts]):
        return None
    return sorted(k for k in stats if not k.startswith("requests_"))


def volume_path(mnt):
    """The object of the volume mounted on mnt (which the daemon resolves first)."""
    mnt = os.path.realpath(mnt)
    return VOLUMES + "/" + escape_object_path(mnt[1:])


# ---- clients ----

class Reply:
    """What a client printed: ok, the value (parsed), the error's D-Bus name."""

    def __init__(self, argv, rc, out, err, took, parse=gv_parse):
        self.argv, self.rc, self.out, self.err, self.took = argv, rc, out, err, took
        self.ok = rc == 0
        self.value = None
        self.error = None
        if self.ok:
            try:
                self.value = parse(out) if out.strip() else ()
            except (ValueError, IndexError):
                self.value = out
        else:
            m = re.search(r"GDBus\.Error:([A-Za-z0-9_.]+):", err) or \
                re.search(r"^Error ([A-Za-z0-9_.]+):", err, re.M)
            self.error = m.group(1) if m else "(no D-Bus error name: %s)" % err.strip()[:300]

    @classmethod
    def raw(cls, what, answer):
        """A RawClient answer, (error name or None, first string of the body)."""
        error, first = answer
        r = cls([what], 1 if error else 0, "", "%s: %s" % (error, first) if error else "", 0)
        if error:
            r.error = error
        else:
            r.value = (first,)
        return r

    def __repr__(self):
        what = ("ok %r" % (self.value,)) if self.ok else "error %s" % self.error
        text = (self.err.strip() or self.out.strip())[:300]
        return "<%s (exit %d): %s>" % (what, self.rc, text)


class RawClient:
    """A bare D-Bus client on a unix socket (the stock tools send one call
    per process; this sends many at once on one connection, so that they
    reach the daemon together).  Little-endian messages; method calls with
    string and empty a{sv} arguments; replies read back by serial."""

    def __init__(self, path, bus=True):
        import socket
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(CALL_TIMEOUT)
        self.sock.connect(path)
        self.buf = b""
        self.serial = 0
        self.replies = {}  # serial -> (error, first): answers read while waiting for others
        uid = str(os.getuid()).encode().hex().encode()
        self.sock.sendall(b"\0AUTH EXTERNAL " + uid + b"\r\n")
        line = self.line()
        if not line.startswith(b"OK "):
            raise Failure("D-Bus authentication refused: %r" % line)
        self.sock.sendall(b"BEGIN\r\n")
        if bus:
            self.wait(self.send("/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello",
                                "org.freedesktop.DBus", []))

    def close(self):
        self.sock.close()

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def fill(self):
        b = self.sock.recv(65536)
        if not b:
            raise Failure("the D-Bus peer closed the connection")
        self.buf += b

    @staticmethod
    def pad(out, n):
        out += b"\0" * (-len(out) % n)

    @classmethod
    def put_string(cls, out, s, sig=False):
        b = s.encode()
        if sig:
            out += bytes([len(b)]) + b + b"\0"
        else:
            cls.pad(out, 4)
            out += len(b).to_bytes(4, "little") + b + b"\0"

    @classmethod
    def put_vardict(cls, out, d):
        """An a{sv} of str (s), bool (b), U(n) (u) and Typed("uint64", n) (t)."""
        cls.pad(out, 4)
        at = len(out)
        out += b"\0\0\0\0"
        cls.pad(out, 8)
        start = len(out)
        for k, v in d.items():
            cls.pad(out, 8)
            cls.put_string(out, k)
            if isinstance(v, bool):
                cls.put_string(out, "b", sig=True)
                cls.pad(out, 4)
                out += int(v).to_bytes(4, "little")
            elif isinstance(v, str):
                cls.put_string(out, "s", sig=True)
                cls.put_string(out, v)
            elif isinstance(v, Typed) and v.type_word in ("uint32", "uint64"):
                n = 4 if v.type_word == "uint32" else 8
                cls.put_string(out, "u" if n == 4 else "t", sig=True)
                cls.pad(out, n)
                out += v.value.to_bytes(n, "little")
            else:
                raise TypeError(v)
        out[at:at + 4] = (len(out) - start).to_bytes(4, "little")

    def send(self, path, iface, member, dest, args):
        """args: str (s) or dict (a{sv}, see put_vardict); returns the call's serial."""
        body = bytearray()
        sig = ""
        for a in args:
            if isinstance(a, str):
                self.put_string(body, a)
                sig += "s"
            elif isinstance(a, dict):
                self.put_vardict(body, a)
                sig += "a{sv}"
            else:
                raise TypeError(a)
        self.serial += 1
        fields = bytearray()
        for code, t, v in ((1, "o", path), (2, "s", iface), (3, "s", member), (6, "s", dest),
                           (8, "g", sig)):
            if t == "g" and not v:
                continue
            self.pad(fields, 8)
            fields += bytes([code])
            self.put_string(fields, t, sig=True)
            self.put_string(fields, v, sig=(t == "g"))
        head = bytearray(b"l\x01\x00\x01" + len(body).to_bytes(4, "little") +
                         self.serial.to_bytes(4, "little") + len(fields).to_bytes(4, "little"))
        head += fields
        self.pad(head, 8)
        self.sock.sendall(bytes(head + body))
        return self.serial

    def message(self):
        """The next message: (type, reply serial, error name, the body's first
        string or object path, if it begins with one)."""
        while len(self.buf) < 16:
            self.fill()
        if self.buf[0:1] != b"l":
            raise Failure("a big-endian message: not expected from GDBus or dbus-daemon")
        body_len = int.from_bytes(self.buf[4:8], "little")
        fields_len = int.from_bytes(self.buf[12:16], "little")
        start = 16 + fields_len + (-(16 + fields_len) % 8)
        while len(self.buf) < start + body_len:
            self.fill()
        msg, self.buf = self.buf[:start + body_len], self.buf[start + body_len:]
        mtype = msg[1]
        self.member = None
        pos, reply_to, error = 16, None, None

        def string(pos, sig=False):
            if sig:
                n = msg[pos]
                return msg[pos + 1:pos + 1 + n].decode(), pos + 2 + n
            pos += -pos % 4
            n = int.from_bytes(msg[pos:pos + 4], "little")
            return msg[pos + 4:pos + 4 + n].decode(errors="replace"), pos + 5 + n
        while pos < 16 + fields_len:
            pos += -pos % 8
            code = msg[pos]
            t, pos = string(pos + 1, sig=True)
            if t == "u":
                pos += -pos % 4
                v, pos = int.from_bytes(msg[pos:pos + 4], "little"), pos + 4
            else:
                v, pos = string(pos, sig=(t == "g"))
            if code == 5:
                reply_to = v
            elif code == 4:
                error = v
            elif code == 3:
                self.member = v
        self.body = bytes(msg[start:])
        first = None
        if body_len and mtype in (2, 3, 4):
            try:
                first = string(start)[0]
            except (IndexError, UnicodeDecodeError):
                pass
        return mtype, reply_to, error, first

    def wait(self, serial, signals=None):
        """The answer to call SERIAL: (error name, first string).  With a
        list SIGNALS, every signal read before it is appended there as
        (member, first string or path).  Answers to other calls read
        meanwhile are kept for their own wait (or poll)."""
        if serial in self.replies:
            return self.replies.pop(serial)
        while True:
            mtype, reply_to, error, first = self.message()
            if reply_to == serial:
                return error, first
            if reply_to is not None and mtype in (2, 3):
                self.replies[reply_to] = (error, first)
            if mtype == 4 and signals is not None:
                signals.append((self.member, first))

    def poll(self, serial):
        """The answer to SERIAL if it has come, else None (reads nothing)."""
        return self.replies.pop(serial, None)


def as_nobody(argv):
    return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"] + argv


class Ctx:
    """One case's world: the bus, the daemons, the clients' environment."""

    def __init__(self, env, chk):
        self.env, self.chk = env, chk
        for tool in ("dbus-daemon", "gdbus", "dbus-send", "setpriv", "mkfs.ocfs2",
                     "tunefs.ocfs2", "debugfs.ocfs2"):
            if not which(tool):
                raise Failure("%s is missing (scripts/setup.sh installs it)" % tool)
        # uid 65534 must reach the bus socket: the case directory is searchable
        os.chmod(env.tmp, 0o755)
        d = env.tmp
        while d != "/":
            d = os.path.dirname(d)
            if os.stat(d).st_mode & 0o001 == 0:
                raise Failure("%s is not searchable by other users: uid %d cannot reach the bus"
                              % (d, NOBODY))
        self.servers = []
        self.monitors = []
        self.bus = None
        self.bus_log = ""
        env.cleanups.append(self.teardown)
        env.extra_logs = [self.show_logs]
        self.version = run([env.daemon, "--version"], check=True)[1].split()[-1]
        self.start_bus()

    # -- the bus --

    def start_bus(self):
        busdir = os.path.join(self.env.tmp, "bus")
        policy_dir = os.path.join(busdir, "system.d")
        os.makedirs(policy_dir)
        os.chmod(busdir, 0o755)
        shutil.copy(POLICY, os.path.join(policy_dir, os.path.basename(POLICY)))
        self.bus_socket = os.path.join(busdir, "socket")
        conf = os.path.join(busdir, "bus.conf")
        with open(conf, "w") as f:
            f.write(BUS_CONFIG.format(socket=self.bus_socket, policy_dir=policy_dir))
        self.bus_log = os.path.join(busdir, "dbus-daemon.log")
        with open(self.bus_log, "w") as lf:
            self.bus = subprocess.Popen(["dbus-daemon", "--config-file=" + conf, "--nofork",
                                         "--print-address=1"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=lf, start_new_session=True)
        # it prints its address once it listens
        line = self.bus.stdout.readline().decode().strip()
        if not line.startswith("unix:path=" + self.bus_socket):
            raise Failure("dbus-daemon did not start (it said %r; its log: %s)" % (
                line, self.read(self.bus_log)))
        self.bus_address = "unix:path=" + self.bus_socket
        self.client_env = tool_env(dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.bus_address))
        self.client_env.pop("DBUS_SESSION_BUS_ADDRESS", None)

    # -- daemons --

    def server(self, name, expect="serving the D-Bus API as " + BUS_NAME):
        s = Server(self, name)
        self.servers.append(s)  # for teardown, even if it never gets going
        s.start(expect)
        return s

    # -- clients --

    def tool(self, argv, user=None, timeout=CALL_TIMEOUT, env=None, parse=gv_parse):
        if user is not None:
            argv = as_nobody(argv)
        t0 = time.time()
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               env=env or self.client_env, timeout=timeout + 15)
        except subprocess.TimeoutExpired:
            raise Failure("%s: no answer in %ds (a hang)" % (" ".join(argv)[:300], timeout + 15))
        return Reply(argv, p.returncode, p.stdout.decode(errors="replace"),
                     p.stderr.decode(errors="replace"), time.time() - t0, parse)

    def call(self, obj, method, *args, user=None, dest=BUS_NAME, timeout=CALL_TIMEOUT):
        """gdbus call on the bus; method is Interface.Member or a member of
        the Manager (on MANAGER) or of the Volume (elsewhere)."""
        if "." not in method:
            method = (MGR if obj == MANAGER else VOL) + "." + method
        argv = ["gdbus", "call", "--system", "--dest", dest, "--timeout", str(timeout),
                "--object-path", obj, "--method", method] + [gv(a) for a in args]
        return self.tool(argv, user=user, timeout=timeout)

    def send(self, obj, method, *args, user=None, dest=BUS_NAME, peer=None):
        """dbus-send, which sends whatever signature it is given; on the
        bus, or (peer: an address) peer-to-peer, which gdbus cannot do."""
        where = ["--peer=" + peer] if peer else ["--system", "--dest=" + dest]
        argv = ["dbus-send"] + where + ["--print-reply", "--reply-timeout=%d" % (CALL_TIMEOUT * 1000),
                                        obj, method] + list(args)
        return self.tool(argv, user=user, parse=send_parse)

    def mount(self, vol, options=None, user=None, device=None, mnt=None):
        return self.call(MANAGER, "Mount", device or vol.img, mnt or vol.mnt, options or {}, user=user)

    def get(self, obj, iface, prop, **kw):
        r = self.call(obj, PROPS + ".Get", iface, prop, **kw)
        if not r.ok:
            raise Failure("Get %s.%s on %s: %r" % (iface, prop, obj, r))
        return r.value[0]

    def get_all(self, obj, iface, **kw):
        r = self.call(obj, PROPS + ".GetAll", iface, **kw)
        if not r.ok:
            raise Failure("GetAll %s on %s: %r" % (iface, obj, r))
        return r.value[0]

    def objects(self, peer=None, **kw):
        if peer:
            r = self.send(ROOT, OM + ".GetManagedObjects", peer=peer, **kw)
        else:
            r = self.call(ROOT, OM + ".GetManagedObjects", **kw)
        if not r.ok:
            raise Failure("GetManagedObjects: %r" % r)
        return r.value[0]

    def bus_call(self, method, *args, user=None):
        return self.call("/org/freedesktop/DBus", "org.freedesktop.DBus." + method, *args,
                         user=user, dest="org.freedesktop.DBus")

    def name_owner(self):
        r = self.bus_call("GetNameOwner", BUS_NAME)
        return r.value[0] if r.ok else None

    def mounts(self):
        """Every mount under the case's directory: (mount point, type, source)."""
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                mp = left.split()[4]
                if mp.startswith(os.path.realpath(self.env.tmp) + "/"):
                    out.append((mp, right.split()[0], right.split()[1]))
        return sorted(out)

    def snapshot(self):
        """What a refused call must leave as it was: the mounts, the objects."""
        return (self.mounts(), self.objects())

    def monitor(self):
        m = Monitor(self)
        self.monitors.append(m)
        return m

    # -- judging --

    def refused(self, reply, want, what, before=None):
        """reply is the error want (a name or a tuple of names); nothing changed
        (before: a snapshot()); the daemon still answers."""
        wants = want if isinstance(want, tuple) else (want,)
        good = self.chk.ok(not reply.ok and reply.error in wants,
                           "%s: want %s, got %r" % (what, "/".join(wants), reply))
        if before is not None:
            after = self.snapshot()
            good &= self.chk.eq(after, before, "%s: mounts and objects unchanged" % what)
        for s in self.servers:
            if s.running_expected:
                good &= self.chk.ok(s.proc.poll() is None, "%s: ocfs2d %s still runs" % (what, s.name))
        return good

    def wait_for(self, cond, what, timeout=10):
        """Wait until cond() holds; a failed check (what) if it never does."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if cond():
                return True
            time.sleep(0.05)
        return self.chk.ok(cond(), what)

    def finish(self, vols):
        """The end of every case: each daemon stops cleanly (its log without
        warnings or sanitizer reports), no volume stays mounted, each is
        fsck-clean."""
        for s in self.servers:
            if s.proc is None:
                continue
            if s.proc.poll() is None:
                s.stop()
            elif not s.judged:
                self.chk.ok(False, "ocfs2d %s died on its own (exit %d)" % (s.name, s.proc.returncode))
        self.wait_for(lambda: self.name_owner() is None, "after the daemons stopped, nobody owns %s" % BUS_NAME)
        self.chk.eq(self.mounts(), [], "nothing left mounted")
        for v in vols:
            v.fsck(self.chk, "at the end of the case")

    def teardown(self):
        for m in self.monitors:
            m.stop()
        for s in self.servers:
            if s.proc is None:
                continue
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
                try:
                    s.proc.wait(30)
                except subprocess.TimeoutExpired:
                    s.proc.kill()
                    s.proc.wait()
            # the last word on every daemon, even when the case broke off
            if not s.judged:
                self.chk.ok(not sanitizer_report(s.log_text()),
                            "ocfs2d %s: a sanitizer report in its log" % s.name)
        if self.bus and self.bus.poll() is None:
            self.bus.terminate()
            self.bus.wait(10)

    @staticmethod
    def read(path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def show_logs(self):
        parts = ["---- dbus-daemon log ----\n" + self.read(self.bus_log)[-5000:]]
        for s in self.servers:
            parts.append("---- ocfs2d %s log (%s) ----\n%s" % (s.name, s.logpath, s.log_text()[-20000:]))
        for m in self.monitors:
            parts.append("---- gdbus monitor ----\n" + m.text()[-5000:])
        return "\n".join(parts)


class Server:
    """ocfs2d -f --server on a control socket of its own, on the case's bus."""

    def __init__(self, ctx, name):
        self.ctx, self.name = ctx, name
        self.control = os.path.join(ctx.env.tmp, name + ".ctl")
        self.address = "unix:path=" + self.control
        self.logpath = os.path.join(ctx.env.tmp, name + ".log")
        self.proc = None
        self.running_expected = False
        self.judged = False  # stop() has judged its exit and log

    def log_text(self):
        return Ctx.read(self.logpath)

    def start(self, expect):
        env = dict(self.ctx.env.daemon_env, DBUS_SYSTEM_BUS_ADDRESS=self.ctx.bus_address)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        argv = [self.ctx.env.daemon, "-f", "--server", "--control", self.control]
        with open(self.logpath, "a") as lf:
            lf.write("=== %s\n" % " ".join(argv))
            lf.flush()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                         stderr=subprocess.STDOUT, start_new_session=True, env=env)
        deadline = time.time() + 20
        while expect not in self.log_text():
            if self.proc.poll() is not None:
                raise Failure("ocfs2d %s exited %d before saying %r" % (self.name, self.proc.returncode, expect))
            if time.time() > deadline:
                raise Failure("ocfs2d %s never said %r" % (self.name, expect))
            time.sleep(0.02)
        self.running_expected = True

    def stop(self):
        """SIGTERM: exit status 0, a log without warnings or sanitizer reports."""
        chk = self.ctx.chk
        self.running_expected = False
        self.judged = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            raise Failure("ocfs2d %s still runs 60 s after SIGTERM" % self.name)
        text = self.log_text()
        chk.eq(rc, 0, "ocfs2d %s: exit status after SIGTERM" % self.name)
        chk.ok(not sanitizer_report(text), "ocfs2d %s: no sanitizer report in its log" % self.name)
        chk.ok("WARNING" not in text and "CRITICAL" not in text,
               "ocfs2d %s: no warnings or criticals in its log" % self.name)
        chk.ok(not os.path.exists(self.control), "ocfs2d %s removed its control socket" % self.name)

    def holds(self, path):
        """Whether the daemon has path open."""
        want = os.path.realpath(path)
        fds = "/proc/%d/fd" % self.proc.pid
        for fd in os.listdir(fds):
            try:
                if os.readlink(os.path.join(fds, fd)) == want:
                    return True
            except OSError:
                pass
        return False


class Monitor:
    """gdbus monitor on the daemon's name: the signals it emits."""

    def __init__(self, ctx):
        self.path = os.path.join(ctx.env.tmp, "monitor%d.txt" % len(ctx.monitors))
        with open(self.path, "w") as f:
            self.proc = subprocess.Popen(["gdbus", "monitor", "--system", "--dest", BUS_NAME],
                                         stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                         env=ctx.client_env, start_new_session=True)
        # its match rules are in once it has looked up the name's owner
        deadline = time.time() + 10
        while "is owned by" not in self.text():
            if time.time() > deadline or self.proc.poll() is not None:
                raise Failure("gdbus monitor did not start: %s" % self.text())
            time.sleep(0.02)

    def text(self):
        return Ctx.read(self.path)

    def signals(self, member):
        """(object, args text) of each signal member seen so far."""
        out = []
        for line in self.text().splitlines():
            m = re.match(r"^(/\S*): ([\w.]+)\.(\w+) (.*)$", line)
            if m and m.group(3) == member:
                out.append((m.group(1), m.group(4)))
        return out

    def wait(self, member, needle, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(needle in a for _, a in self.signals(member)):
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


# ---- what the ocfs2-tools say about a volume ----

def tools_view(img):
    """The properties the API should show, as tunefs.ocfs2 and debugfs.ocfs2 read them."""
    def q(fmt):
        return run(["tunefs.ocfs2", "-Q", fmt, img], check=True)[1]
    rc, stats = run(["debugfs.ocfs2", "-R", "stats", img], check=True)
    bits = re.search(r"Block Size Bits: (\d+)\s+Cluster Size Bits: (\d+)", stats)
    clusters = re.search(r"\bClusters: (\d+)", stats)
    if not bits or not clusters:
        raise Failure("debugfs.ocfs2 stats without sizes:\n" + stats)
    cluster_size = int(q("%T"))
    if cluster_size != 1 << int(bits.group(2)):
        raise Failure("tunefs.ocfs2 and debugfs.ocfs2 disagree on the cluster size")
    incompat = q("%H").split()
    return {
        "Device": os.path.realpath(img),
        "UUID": q("%U").strip(),
        "Label": q("%V").rstrip("\n"),
        "Stack": "local" if "local" in incompat else "o2cb",
        "MaxSlots": int(q("%N")),
        "BlockSize": 1 << int(bits.group(1)),
        "ClusterSize": cluster_size,
        "Size": int(clusters.group(1)) * cluster_size,
    }


# ---- trees written through a mount, read back by rdump ----

def write_file(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_tree(top, seed):
    """A small tree under top: {relative path: bytes, or None for a directory,
    or ("link", target)}."""
    tree = {}
    os.mkdir(top)
    tree["."] = None
    for d in ("a", "a/b", "empty", "sp ace"):
        os.mkdir(os.path.join(top, d))
        tree[d] = None
    sizes = {"tiny": 17, "inline": 2000, "one": 4096, "odd": 123457, "big": 3 * 1024 * 1024 + 5,
             "a/deep": 50000, "a/b/deeper": 9000, "sp ace/x y": 3}
    for name, size in sizes.items():
        data = (seed + name).encode() * (size // (len(seed) + len(name)) + 1)
        data = bytes((x + i) & 0xff for i, x in enumerate(data[:size]))
        write_file(os.path.join(top, name), data)
        tree[name] = data
    os.symlink("a/deep", os.path.join(top, "link"))
    tree["link"] = ("link", "a/deep")
    return tree


def read_tree(top):
    tree = {}
    for dirpath, dirnames, filenames in os.walk(top):
        rel = os.path.relpath(dirpath, top)
        tree[rel] = None
        for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            p = os.path.join(dirpath, n)
            r = os.path.normpath(os.path.join(rel, n))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                tree[r] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                tree[r] = read_file(p)
            else:
                tree[r] = "type 0%o" % stat.S_IFMT(st.st_mode)
    return tree


def compare_trees(chk, got, want, what):
    ok = chk.eq(sorted(got), sorted(want), "%s: names" % what)
    for k in sorted(set(got) & set(want)):
        if got[k] != want[k]:
            ok = chk.ok(False, "%s: %s differs (%d vs %d bytes)" % (
                what, k, len(got[k] or b""), len(want[k] or b""))) and ok
    return ok


def rdump(vol, path):
    """The tree under path on vol's image, as debugfs.ocfs2 rdump gives it back."""
    dest = os.path.join(vol.env.tmp, "rdump-%s-%d" % (vol.name, time.time_ns()))
    os.mkdir(dest)
    rc, out, got = vol.rdump(path, dest)
    if not os.path.isdir(got):
        raise Failure("debugfs.ocfs2 rdump %s made nothing: %s" % (path, out))
    tree = read_tree(got)
    shutil.rmtree(dest)
    return tree


def make_volume(env, name, label=None, geometry=("-b", "4096", "-C", "4096")):
    args = list(geometry) + ["-J", "size=4M"] + (["-L", label] if label else [])
    return env.volume(name, size="96M", mkfs="mkfs", mkfs_args=args)


def mounted_ok(ctx, vol, reply, what):
    """reply is Mount's answer: the volume's object path; it is mounted."""
    want = volume_path(vol.mnt)
    good = ctx.chk.ok(reply.ok and reply.value == (want,), "%s: Mount returns %s: %r" % (what, want, reply))
    good &= ctx.chk.ok(vol.mounted(), "%s: %s is mounted" % (what, vol.mnt))
    if vol.mounted():
        vol.conn = mount_entry(vol.mnt)[1]  # for the watchdog to abort
    return good


def unmounted(vol):
    vol.conn = None


# ====================================================================
# bus: the name, objects, properties, signals; Mount, Reflink, Unmount
# ====================================================================

def case_bus(env, chk):
    ctx = Ctx(env, chk)
    a = make_volume(env, "labelled", label="ocfs2d dbus", geometry=("-b", "2048", "-C", "16384"))
    b = make_volume(env, "plain")
    srv = ctx.server("srv")

    # the name, and who owns it
    owner = ctx.name_owner()
    chk.ok(owner and owner.startswith(":"), "ocfs2d owns %s (owner %r)" % (BUS_NAME, owner))
    r = ctx.bus_call("GetConnectionUnixProcessID", BUS_NAME)
    chk.ok(r.ok and r.value == (srv.proc.pid,), "the owner is our ocfs2d (pid %d): %r" % (srv.proc.pid, r))
    chk.eq(ctx.objects(), {MANAGER: {MGR: {"Version": ctx.version, "Mounts": 0}}},
           "GetManagedObjects of an idle daemon")
    chk.eq(ctx.objects(peer=srv.address), ctx.objects(),
           "the control socket (peer-to-peer) shows the same objects")
    r = ctx.tool(["gdbus", "introspect", "--system", "--dest", BUS_NAME, "--object-path", MANAGER])
    chk.ok(r.ok and "interface %s" % MGR in r.out and re.search(
        r"Mount\(in\s+s device,\s*in\s+s mountpoint,\s*in\s+a\{sv\} options,\s*out\s+o volume\)", r.out),
        "introspection of the Manager shows Mount(s, s, a{sv}) -> o: %r" % r)

    # Mount through the bus: the object, its properties, the signals
    mon = ctx.monitor()
    t0 = time.time()
    r = ctx.mount(a, {"commit": U(7), "options": "noatime,attr_timeout=2.5,acl",
                      "auth.no_user_interaction": True})
    log("Mount over the bus: %.2fs" % (time.time() - t0))
    mounted_ok(ctx, a, r, "Mount a")
    path_a = volume_path(a.mnt)
    chk.ok(mon.wait("InterfacesAdded", "'%s'" % path_a),
           "gdbus monitor saw InterfacesAdded for %s" % path_a)
    added = [s for s in mon.signals("InterfacesAdded") if path_a in s[1]]
    chk.ok(added and added[0][0] == ROOT and "'%s'" % VOL in added[0][1],
           "InterfacesAdded comes from the object manager, with the Volume interface: %r" % added)
    props = ctx.get_all(path_a, VOL)
    want = tools_view(a.img)
    want.update({"MountPoint": os.path.realpath(a.mnt), "Slot": 0, "ReadOnly": False, "State": "mounted",
                 "ClusterName": "", "NodeId": 0})
    chk.eq(want["Label"], "ocfs2d dbus", "tunefs.ocfs2 reads the label mkfs.ocfs2 wrote")
    chk.eq((want["BlockSize"], want["ClusterSize"], want["MaxSlots"], want["Stack"]),
           (2048, 16384, 1, "local"), "the tools read the geometry mkfs.ocfs2 was given")
    for k, v in sorted(want.items()):
        chk.eq(props.get(k), v, "Volume.%s" % k)
    opts = props.get("Options", "").split(",")
    for o in ("rw", "commit=7", "attr_timeout=2.5", "acl", "slot=0"):
        chk.ok(o in opts, "Options %r has %s" % (props.get("Options"), o))
    chk.eq(sorted(props), sorted(["Device", "MountPoint", "UUID", "Label", "Stack", "Slot", "MaxSlots",
                                  "BlockSize", "ClusterSize", "Size", "Options", "ReadOnly", "State",
                                  "ClusterName", "NodeId"]),
           "the Volume's properties are those of the API")
    r = ctx.call(path_a, "ClusterState", {})
    chk.ok(not r.ok and r.error == E + "NotFound",
           "ClusterState of a local volume: NotFound (%r)" % r)
    chk.eq(ctx.get(MANAGER, MGR, "Mounts"), 1, "Manager.Mounts after a mount")
    chk.ok(mon.wait("PropertiesChanged", "'Mounts': <uint32 1>"), "PropertiesChanged for Mounts=1")
    objs = ctx.objects()
    chk.eq(sorted(objs), sorted([MANAGER, path_a]), "GetManagedObjects lists the volume")
    chk.eq(objs.get(path_a, {}).get(VOL), props, "GetManagedObjects and GetAll agree")
    chk.eq(ctx.objects(peer=srv.address), objs, "the control socket shows the same volume")

    # files written through the mount; a reflink through the bus
    tree = write_tree(os.path.join(a.mnt, "top"), "labelled")

    # Statistics: the journal's and the device's counters, which grow
    # with writes and an fsync (a new file's fsync commits its creation
    # and flushes the image)
    stat_keys = ["device_flushes", "fsync_commits", "fsyncs", "journal_checkpoints", "journal_commits",
                 "journal_log_blocks", "journal_times_home", "lock_refreshes", "lock_refreshes_kept"]
    r = ctx.call(path_a, "Statistics", {})
    if chk.ok(r.ok and len(r.value) == 1 and journal_counters(r.value[0]) == stat_keys,
              "Statistics returns the counters: %r" % r):
        before = r.value[0]
        fd = os.open(os.path.join(a.mnt, "synced"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for _ in range(4):
                os.write(fd, b"s" * 65536)
                os.fsync(fd)
        finally:
            os.close(fd)
        r = ctx.call(path_a, "Statistics", {"auth.no_user_interaction": True})
        after = r.value[0] if r.ok and r.value else {}
        log("Statistics before %r, after writes and fsyncs %r" % (before, after))
        for k in ("journal_commits", "journal_log_blocks", "device_flushes"):
            chk.ok(after.get(k, 0) > before[k], "Statistics: %s grew after writes and an fsync (%r -> %r)"
                   % (k, before[k], after.get(k)))
        chk.ok(after.get("device_flushes", 0) - before["device_flushes"] >= 4,
               "Statistics: at least one device flush per fsync of new data (%r -> %r)"
               % (before["device_flushes"], after.get("device_flushes")))
        chk.ok(all(after.get(k, -1) >= before[k] for k in stat_keys), "no counter went down: %r" % after)
    r = ctx.call(path_a, "Statistics", {"reset": True})
    ctx.refused(r, E + "OptionNotPermitted", "Statistics with an unknown option")
    # Status: space, inodes and the journal, as statfs(2) and the image say
    status_keys = ["free_bytes", "free_inodes", "journal", "journal_size", "readonly_reason",
                   "total_bytes", "total_inodes"]
    r = ctx.call(path_a, "Status", {})
    if chk.ok(r.ok and len(r.value) == 1 and sorted(r.value[0]) == status_keys,
              "Status returns its keys: %r" % r):
        st, vfs = r.value[0], os.statvfs(a.mnt)
        chk.eq(st["total_bytes"], vfs.f_blocks * vfs.f_frsize, "Status: total_bytes as statfs")
        chk.ok(0 < st["free_bytes"] < st["total_bytes"], "Status: free_bytes %r" % st)
        chk.ok(st["journal"] in ("clean", "pending") and st["journal_size"] > 0, "Status: the journal %r" % st)
        chk.eq(st["readonly_reason"], "", "Status: nothing turned the volume read-only")
    r = ctx.call(path_a, "Status", {"verbose": True})
    ctx.refused(r, E + "OptionNotPermitted", "Status with an unknown option")
    t0 = time.time()
    r = ctx.call(path_a, "Reflink", "/top/big", "/top/big.reflink", {})
    log("Reflink over the bus: %.2fs" % (time.time() - t0))
    if chk.ok(r.ok and len(r.value) == 1 and isinstance(r.value[0], int) and r.value[0] > 0,
              "Reflink returns the new inode: %r" % r):
        chk.eq(os.stat(os.path.join(a.mnt, "top", "big.reflink")).st_ino, r.value[0],
               "the reflink's inode through the mount")
    chk.eq(read_file(os.path.join(a.mnt, "top", "big.reflink")), tree["big"],
           "the reflink reads the same as its source through the mount")
    r = ctx.call(path_a, "Reflink", "/top/odd", "/top/a", {})
    chk.ok(r.ok, "Reflink into a directory: %r" % r)
    chk.eq(read_file(os.path.join(a.mnt, "top", "a", "odd")), tree["odd"],
           "the reflink made into a directory")
    # copy on write: changing the copy leaves the source
    with open(os.path.join(a.mnt, "top", "big.reflink"), "r+b") as f:
        f.seek(1 << 20)
        f.write(b"written over the reflink")
    copy = bytearray(tree["big"])
    copy[1 << 20:(1 << 20) + 24] = b"written over the reflink"
    tree["big.reflink"] = bytes(copy)
    tree["a/odd"] = tree["odd"]
    chk.eq(read_file(os.path.join(a.mnt, "top", "big")), tree["big"], "the source after writing its reflink")
    compare_trees(chk, read_tree(os.path.join(a.mnt, "top")), tree, "the tree through the mount")

    # a second daemon cannot take the name; the first keeps serving
    srv2 = ctx.server("second", expect="cannot own " + BUS_NAME)
    chk.eq(ctx.name_owner(), owner, "the name stays with the first daemon")
    chk.eq(ctx.get(MANAGER, MGR, "Mounts"), 1, "the first daemon answers on the bus")
    chk.eq(ctx.objects(peer=srv2.address), {MANAGER: {MGR: {"Version": ctx.version, "Mounts": 0}}},
           "the second daemon serves its own control socket")
    r = ctx.mount(b)
    mounted_ok(ctx, b, r, "Mount b while a second daemon runs")
    write_file(os.path.join(b.mnt, "f"), b"on b")
    r = ctx.call(volume_path(b.mnt), "Unmount", {})
    chk.ok(r.ok and not b.mounted(), "Unmount b: %r" % r)
    unmounted(b)
    srv2.stop()
    chk.eq(ctx.name_owner(), owner, "the name stays with the first daemon after the second stopped")

    # Unmount returns only once the volume is closed, and after its object
    # is gone: a client subscribed to InterfacesRemoved reads that signal
    # before the answer (the bus keeps one sender's messages in order)
    chk.ok(srv.holds(a.img), "the daemon has the image open while mounted")
    raw = RawClient(ctx.bus_socket)
    err, _ = raw.wait(raw.send("/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                               "org.freedesktop.DBus",
                               ["type='signal',sender='%s',interface='%s',member='InterfacesRemoved'"
                                % (BUS_NAME, OM)]))
    chk.eq(err, None, "AddMatch for InterfacesRemoved")
    t0 = time.time()
    before = []
    err, _ = raw.wait(raw.send(path_a, VOL, "Unmount", BUS_NAME, [{}]), signals=before)
    log("Unmount over the bus: %.2fs" % (time.time() - t0))
    raw.close()
    # nothing waited for: all of this holds as soon as the call returns
    closed = (not a.mounted(), "%s: unmounted from %s (clean)" % (os.path.realpath(a.img), os.path.realpath(a.mnt))
              in srv.log_text(), not srv.holds(a.img))
    chk.eq(err, None, "Unmount over a bare connection")
    # the volume's object goes, then the Unmount's job (it completed), then the answer
    chk.ok(len(before) == 2 and before[0] == ("InterfacesRemoved", path_a)
           and before[1][0] == "InterfacesRemoved" and re.match(re.escape(ROOT) + r"/jobs/\d+$", before[1][1]),
           "InterfacesRemoved of the volume, then of the unmount's job, arrive before Unmount's answer: %r"
           % before)
    log("signals before the answer: %r" % before)
    chk.eq(closed, (True, True, True), "when Unmount returns: (not mounted, clean close logged, image closed)")
    unmounted(a)
    chk.ok(mon.wait("InterfacesRemoved", "'%s'" % path_a), "gdbus monitor saw InterfacesRemoved")
    chk.ok(mon.wait("PropertiesChanged", "'State': <'unmounting'>"), "State went through 'unmounting'")
    # the object is gone before Unmount answers (no waiting here)
    chk.eq(sorted(ctx.objects()), [MANAGER], "GetManagedObjects as soon as Unmount returns")
    chk.eq(ctx.get(MANAGER, MGR, "Mounts"), 0, "Manager.Mounts after the unmount")
    a.fsck(chk, "after Unmount over the bus")
    compare_trees(chk, rdump(a, "/top"), tree, "debugfs.ocfs2 rdump /top after the unmount")

    # the other volume read-only; its empty label
    r = ctx.mount(b, {"ro": True})
    mounted_ok(ctx, b, r, "Mount b read-only")
    props = ctx.get_all(volume_path(b.mnt), VOL)
    want = tools_view(b.img)
    want.update({"MountPoint": os.path.realpath(b.mnt), "ReadOnly": True, "State": "mounted"})
    for k, v in sorted(want.items()):
        chk.eq(props.get(k), v, "read-only volume: Volume.%s" % k)
    chk.eq(props.get("Label"), "", "an unlabelled volume's Label")
    chk.ok(props.get("Options", "").split(",")[:1] == ["ro"], "Options of a ro mount: %r" % props.get("Options"))
    r = ctx.call(volume_path(b.mnt), "Statistics", {})
    chk.ok(r.ok and r.value and journal_counters(r.value[0]) and
           {v for k, v in r.value[0].items() if not k.startswith("requests_")} == {0},
           "Statistics of a read-only volume: all zero but the requests served (%r)" % r)
    r = ctx.call(volume_path(b.mnt), "Status", {})
    chk.ok(r.ok and r.value and r.value[0].get("journal") == "clean" and r.value[0].get("free_bytes", 0) > 0,
           "Status of a read-only volume: %r" % r)
    try:
        write_file(os.path.join(b.mnt, "x"), b"x")
        chk.ok(False, "writing to the read-only mount succeeded")
    except OSError as e:
        chk.eq(e.errno, errno.EROFS, "writing to the read-only mount")
    r = ctx.call(volume_path(b.mnt), "Reflink", "/f", "/g", {})
    ctx.refused(r, E + "ReadOnly", "Reflink on a read-only volume")
    chk.ok(not os.path.exists(os.path.join(b.mnt, "g")), "the refused Reflink made nothing")
    r = ctx.call(volume_path(b.mnt), "Unmount", {})
    chk.ok(r.ok and not b.mounted(), "Unmount of the read-only volume: %r" % r)
    unmounted(b)
    # b's path was removed once already (its first unmount): wait for the second
    ctx.wait_for(lambda: len([1 for _, a_ in mon.signals("InterfacesRemoved")
                              if "'%s'" % volume_path(b.mnt) in a_]) >= 2,
                 "InterfacesRemoved for b, once per unmount")
    mon.stop()
    # (the monitor follows the name's owner: the second daemon is not heard)
    chk.eq(len([s for s in mon.signals("InterfacesAdded") if "/volumes/" in s[1]]), 3,
           "InterfacesAdded once per mount (a, b, b read-only)")
    chk.eq(len([s for s in mon.signals("InterfacesRemoved") if "/volumes/" in s[1]]), 3,
           "InterfacesRemoved once per unmount")
    ctx.finish([a, b])


# ====================================================================
# args: hostile and wrong arguments
# ====================================================================

def case_args(env, chk):
    ctx = Ctx(env, chk)
    v = make_volume(env, "args")
    w = make_volume(env, "other")
    ctx.server("srv")
    t = env.tmp
    before = ctx.snapshot()

    def bad_mount(args, want, what, **kw):
        r = ctx.call(MANAGER, "Mount", *args, **kw)
        ctx.refused(r, want, what, before)
        # and the next good call is served
        chk.eq(ctx.get(MANAGER, MGR, "Version"), ctx.version, "%s: the daemon answers afterwards" % what)

    # wrong signatures: the bus carries them, GDBus refuses them
    for sig, args in (("(ss)", ["string:" + v.img, "string:" + v.mnt]),
                      ("(ssu)", ["string:" + v.img, "string:" + v.mnt, "uint32:0"]),
                      ("(sss)", ["string:" + v.img, "string:" + v.mnt, "string:ro"]),
                      ("()", [])):
        r = ctx.send(MANAGER, MGR + ".Mount", *args)
        ctx.refused(r, INVALID_ARGS, "Mount%s with dbus-send" % sig, before)
    r = ctx.send(MANAGER, MGR + ".Mount", "string:" + v.img, "string:" + v.mnt, "dict:string:string:ro,true")
    ctx.refused(r, INVALID_ARGS, "Mount with a{ss} options", before)

    # paths
    name256 = "n" * 256
    long_path = "/" + "/".join(["d" * 200] * 25)
    for dev, mnt, what in (("args.img", v.mnt, "a relative device"),
                           (v.img, "args.mnt", "a relative mount point"),
                           ("", v.mnt, "an empty device"),
                           (v.img, "", "an empty mount point"),
                           ("/tmp/" + name256, v.mnt, "a device with a 256-byte name"),
                           (v.img, t + "/" + name256, "a mount point with a 256-byte name"),
                           (long_path, v.mnt, "a 5000-byte device path"),
                           (v.img, long_path, "a 5000-byte mount point"),
                           (v.img, ("/" + "d" * 255) * 16, "a 4096-byte mount point")):
        bad_mount([dev, mnt, {}], E + "InvalidArgument", "Mount with %s" % what)
    # the limits are where the API says: a 255-byte name is looked up
    bad_mount([t + "/" + "n" * 255, v.mnt, {}], E + "NotFound", "Mount of a missing device with a 255-byte name")
    bad_mount([(("/" + "d" * 255) * 16)[:-1], v.mnt, {}], E + "NotFound",
              "Mount of a missing device with a 4095-byte path")

    # options
    for opts, want, what in (
            ({"bogus": True}, E + "OptionNotPermitted", "an unknown option"),
            ({"rw": True}, E + "OptionNotPermitted", "a flag's negation as a key"),
            ({"force": True}, E + "OptionNotPermitted", "Unmount's option"),
            ({"commit": "5"}, INVALID_ARGS, "commit as a string"),
            ({"ro": "true"}, INVALID_ARGS, "ro as a string"),
            ({"ro": U(1)}, INVALID_ARGS, "ro as a number"),
            ({"threads": Typed("int32", 4)}, INVALID_ARGS, "threads as an int32"),
            ({"slot": Typed("uint64", 0)}, INVALID_ARGS, "slot as a uint64"),
            ({"entry_timeout": U(1)}, INVALID_ARGS, "entry_timeout as a number"),
            ({"options": U(1)}, INVALID_ARGS, "options as a number"),
            ({"auth.no_user_interaction": "yes"}, INVALID_ARGS, "auth.no_user_interaction as a string"),
            ({"commit": U(0)}, E + "InvalidArgument", "commit 0"),
            ({"commit": U(3601)}, E + "InvalidArgument", "commit 3601"),
            ({"threads": U(65)}, E + "InvalidArgument", "threads 65"),
            ({"threads": U(0)}, E + "InvalidArgument", "threads 0"),
            ({"slot": U(255)}, E + "InvalidArgument", "slot 255"),
            ({"poll": U(100001)}, E + "InvalidArgument", "poll 100001"),
            ({"entry_timeout": -1.0}, E + "InvalidArgument", "entry_timeout -1.0"),
            ({"attr_timeout": 86400.5}, E + "InvalidArgument", "attr_timeout 86400.5"),
            ({"entry_timeout": float("inf")}, E + "InvalidArgument", "entry_timeout inf"),
            ({"entry_timeout": float("nan")}, E + "InvalidArgument", "entry_timeout nan"),
            ({"options": "ro,bogus"}, E + "InvalidArgument", "an unknown option in the string"),
            ({"options": "commit=abc"}, E + "InvalidArgument", "commit=abc in the string"),
            ({"options": "commit=-1"}, E + "InvalidArgument", "commit=-1 in the string"),
            ({"options": "ro=1"}, E + "InvalidArgument", "a flag with a value in the string"),
            ({"options": "acl,noxattr"}, E + "InvalidArgument", "acl,noxattr in the string"),
            ({"acl": True, "xattr": False}, E + "InvalidArgument", "acl with noxattr, typed"),
            ({"options": "noxattr", "acl": True}, E + "InvalidArgument", "noxattr in the string, acl typed")):
        bad_mount([v.img, v.mnt, opts], want, "Mount with %s" % what)

    # what is not there, or not a volume
    bad_mount([t + "/missing.img", v.mnt, {}], E + "NotFound", "Mount of a missing device")
    bad_mount([v.img, t + "/missing.mnt", {}], E + "NotFound", "Mount on a missing mount point")
    notvol = os.path.join(t, "zeros.img")
    with open(notvol, "wb") as f:
        f.truncate(64 << 20)
    r = ctx.mount(v, device=notvol)
    ctx.refused(r, tuple(E + x for x in ("Failed", "InvalidArgument", "NotFound")), "Mount of zeros", before)
    log("Mount of a device that is not OCFS2: %s" % r.error)
    r = ctx.mount(v, mnt=v.img)
    ctx.refused(r, tuple(E + x for x in ("Failed", "InvalidArgument")), "Mount on a file", before)
    log("Mount on a file: %s" % r.error)

    # a good call after all that
    r = ctx.mount(v, {"options": "commit=3", "threads": U(64), "entry_timeout": 0.0})
    mounted_ok(ctx, v, r, "Mount after the refused calls")
    path_v = volume_path(v.mnt)
    chk.eq(ctx.get(path_v, VOL, "State"), "mounted", "State after the mount")
    tree = write_tree(os.path.join(v.mnt, "top"), "args")
    mid = ctx.snapshot()

    # in use: the mount point (however spelled), the device
    for mnt, what in ((v.mnt, "its own path"), (v.mnt + "/", "a trailing slash"),
                      (t + "//" + os.path.basename(v.mnt), "a double slash"),
                      (os.path.join(t, "..", os.path.basename(t), os.path.basename(v.mnt)), "a '..'")):
        r = ctx.mount(w, mnt=mnt)
        ctx.refused(r, E + "AlreadyMounted", "Mount on a mount point in use, by %s" % what, mid)
    os.mkdir(os.path.join(t, "elsewhere"))
    r = ctx.mount(v, mnt=os.path.join(t, "elsewhere"))
    ctx.refused(r, E + "DeviceBusy", "Mount of a device in use on another mount point", mid)

    # Quota's and SetQuota's arguments (this volume keeps no quotas: Failed, saying so)
    T = lambda n: Typed("uint64", n)  # noqa: E731
    for method, opts, want, what in (
            ("Quota", {}, E + "Failed", "a volume without quotas"),
            ("Quota", {"type": "group"}, E + "Failed", "group quotas of a volume without them"),
            ("Quota", {"type": "users"}, E + "InvalidArgument", "an unknown type"),
            ("Quota", {"type": U(0)}, INVALID_ARGS, "type as a number"),
            ("Quota", {"id": U(5)}, E + "OptionNotPermitted", "an id"),
            ("SetQuota", {}, E + "InvalidArgument", "nothing to set"),
            ("SetQuota", {"id": U(5)}, E + "InvalidArgument", "an id without limits"),
            ("SetQuota", {"id": U(5), "block_soft": T(1), "block_hard": T(2), "inode_soft": T(3)},
             E + "InvalidArgument", "three limits of four"),
            ("SetQuota", {"block_soft": T(1), "block_hard": T(2), "inode_soft": T(3), "inode_hard": T(4)},
             E + "InvalidArgument", "limits without an id"),
            ("SetQuota", {"id": U(0xffffffff), "block_soft": T(1), "block_hard": T(2), "inode_soft": T(3),
                          "inode_hard": T(4)}, E + "InvalidArgument", "id 4294967295"),
            ("SetQuota", {"id": U(5), "block_soft": U(1), "block_hard": T(2), "inode_soft": T(3),
                          "inode_hard": T(4)}, INVALID_ARGS, "a limit as uint32"),
            ("SetQuota", {"block_grace": U(5)}, E + "InvalidArgument", "one grace period of two"),
            ("SetQuota", {"block_grace": U(5), "inode_grace": U(5)}, E + "Failed",
             "grace periods of a volume without quotas"),
            ("SetQuota", {"bogus": True}, E + "OptionNotPermitted", "an unknown option")):
        r = ctx.call(path_v, method, opts)
        ctx.refused(r, want, "%s with %s" % (method, what), mid)
    # Unmount's and Reflink's arguments
    for opts, want, what in (({"bogus": True}, E + "OptionNotPermitted", "an unknown option"),
                             ({"force": "yes"}, INVALID_ARGS, "force as a string"),
                             ({"force": U(1)}, INVALID_ARGS, "force as a number"),
                             ({"ro": True}, E + "OptionNotPermitted", "a mount option")):
        r = ctx.call(path_v, "Unmount", opts)
        ctx.refused(r, want, "Unmount with %s" % what, mid)
    r = ctx.send(path_v, VOL + ".Unmount", "string:force")
    ctx.refused(r, INVALID_ARGS, "Unmount(s) with dbus-send", mid)
    r = ctx.send(path_v, VOL + ".Unmount")
    ctx.refused(r, INVALID_ARGS, "Unmount() with dbus-send", mid)
    for src, dst, opts, want, what in (
            ("top/big", "/top/copy", {}, E + "InvalidArgument", "a relative source"),
            ("/top/big", "top/copy", {}, E + "InvalidArgument", "a relative destination"),
            ("", "/top/copy", {}, E + "InvalidArgument", "an empty source"),
            ("/top/big", "/" + name256, {}, E + "InvalidArgument", "a 256-byte name"),
            ("/top/big", long_path, {}, E + "InvalidArgument", "a 5000-byte destination"),
            ("/top/big", "/top/copy", {"force": True}, E + "OptionNotPermitted", "an option"),
            ("/top/big", "/top/copy", {"auth.no_user_interaction": U(1)}, INVALID_ARGS,
             "auth.no_user_interaction as a number"),
            ("/top/missing", "/top/copy", {}, E + "NotFound", "a missing source"),
            ("/top/missing/x", "/top/copy", {}, E + "NotFound", "a source under a missing directory"),
            ("/top/big", "/top/nodir/copy", {}, E + "NotFound", "a destination under a missing directory")):
        r = ctx.call(path_v, "Reflink", src, dst, opts)
        ctx.refused(r, want, "Reflink with %s" % what, mid)
        chk.ok(not os.path.exists(os.path.join(v.mnt, "top", "copy")), "Reflink with %s made nothing" % what)
    r = ctx.send(path_v, VOL + ".Reflink", "string:/top/big", "string:/top/copy")
    ctx.refused(r, INVALID_ARGS, "Reflink(ss) with dbus-send", mid)
    # existing names and directories: an error, nothing overwritten
    odd = read_file(os.path.join(v.mnt, "top", "odd"))
    r = ctx.call(path_v, "Reflink", "/top/big", "/top/odd", {})
    ctx.refused(r, E + "Exists", "Reflink onto an existing file", mid)
    log("Reflink onto an existing file: %s" % r.error)
    chk.eq(read_file(os.path.join(v.mnt, "top", "odd")), odd, "the existing file after the refused reflink")
    r = ctx.call(path_v, "Reflink", "/top/a", "/top/a2", {})
    ctx.refused(r, tuple(E + x for x in ("Failed", "InvalidArgument")), "Reflink of a directory", mid)
    log("Reflink of a directory: %s" % r.error)
    chk.ok(not os.path.exists(os.path.join(v.mnt, "top", "a2")), "Reflink of a directory made nothing")

    # a busy volume: DeviceBusy and still mounted; force detaches it cleanly
    busy = open(os.path.join(v.mnt, "top", "odd"), "rb")
    r = ctx.call(path_v, "Unmount", {})
    ctx.refused(r, E + "DeviceBusy", "Unmount of a busy volume")
    chk.ok(v.mounted(), "still mounted after the refused Unmount")
    ctx.wait_for(lambda: ctx.get(path_v, VOL, "State") == "mounted", "State back to mounted after DeviceBusy")
    chk.eq(ctx.snapshot(), mid, "mounts and objects after the refused Unmount")
    chk.eq(read_file(os.path.join(v.mnt, "top", "a", "deep")), tree["a/deep"],
           "the volume still serves after the refused Unmount")
    r = ctx.call(path_v, "Unmount", {"force": False})
    ctx.refused(r, E + "DeviceBusy", "Unmount of a busy volume with force false", mid)
    r = ctx.call(path_v, "Unmount", {"force": True, "auth.no_user_interaction": True})
    chk.ok(r.ok and not v.mounted(), "Unmount with force: %r" % r)
    unmounted(v)
    chk.ok(not os.path.exists(os.path.join(v.mnt, "top")), "the forced Unmount detached the volume")
    # the open file: an error, or what the kernel has cached (ocfs2d keeps
    # the page cache across opens), never anything else
    try:
        got = busy.read()
        chk.eq(got, odd, "the open file after the forced Unmount, from the page cache")
    except OSError as e:
        chk.ok(e.errno in (errno.ENOTCONN, errno.EIO, errno.ECONNABORTED),
               "the open file after the forced Unmount: %s" % e)
    try:
        busy.close()
    except OSError:
        pass
    v.fsck(chk, "after the forced Unmount")
    ctx.wait_for(lambda: ctx.snapshot() == before, "mounts and objects after the forced Unmount", 5)

    # the object is gone: an error at once, not a hang
    for method, args in (("Unmount", [{}]), ("Reflink", ["/top/big", "/top/copy", {}]),
                         (PROPS + ".Get", [VOL, "State"])):
        r = ctx.call(path_v, method, *args, timeout=10)
        chk.ok(not r.ok and r.took < 5, "%s on a volume that has gone: an error in %.1fs: %r" % (method, r.took, r))
        log("%s on a volume that has gone: %s in %.2fs" % (method, r.error, r.took))
    r = ctx.call(VOLUMES + "/never_2dmounted", "Unmount", {}, timeout=10)
    chk.ok(not r.ok and r.took < 5, "Unmount of an object that never was: %r" % r)

    # Mounts racing for one mount point: one wins, the others are refused
    imgs = [v, w] + [make_volume(env, "race%d" % i) for i in range(2)]
    race = os.path.realpath(os.path.join(t, "race.mnt"))
    os.mkdir(race)
    # the Mounts of a round go out together, each on a connection of its
    # own as separate clients' would: GDBus runs each on a thread of its own
    clients = [RawClient(ctx.bus_socket) for _ in imgs]
    for rnd in range(4):
        serials = [c.send(MANAGER, MGR, "Mount", BUS_NAME, [vol.img, race, {}])
                   for c, vol in zip(clients, imgs)]
        results = [Reply.raw("Mount %s" % vol.img, c.wait(sn)) for c, vol, sn in zip(clients, imgs, serials)]
        wins = [r for r in results if r.ok]
        on_race = [m for m in ctx.mounts() if m[0] == race]
        good = chk.eq(len(wins), 1, "round %d of Mounts racing for one mount point: one succeeds: %r"
                      % (rnd, results))
        good &= chk.ok(all(r.error == E + "AlreadyMounted" for r in results if not r.ok),
                       "round %d: the others get AlreadyMounted: %r" % (rnd, results))
        good &= chk.eq(len(on_race), 1, "round %d: one FUSE mount on the mount point: %r" % (rnd, on_race))
        good &= chk.eq(ctx.get(MANAGER, MGR, "Mounts"), len(on_race), "round %d: Manager.Mounts" % rnd)
        r = ctx.call(volume_path(race), "Unmount", {})
        good &= chk.ok(r.ok, "round %d: Unmount the winner: %r" % (rnd, r))
        # what a lost race left mounted the API does not show: clear it, so
        # that finish() judges the volumes rather than these leftovers
        for _ in range(len(imgs)):
            if not mount_entry(race):
                break
            subprocess.run(["umount", race], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        chk.eq(ctx.mounts(), [], "round %d: nothing left mounted" % rnd)
        if not good:
            break
    for c in clients:
        c.close()
    ctx.finish(imgs)


# ====================================================================
# auth: a caller that is not root
# ====================================================================

def case_auth(env, chk):
    ctx = Ctx(env, chk)
    v = make_volume(env, "auth", label="auth")
    w = make_volume(env, "spare")
    srv = ctx.server("srv")
    r = ctx.mount(v)
    mounted_ok(ctx, v, r, "Mount as root")
    path_v = volume_path(v.mnt)
    write_tree(os.path.join(v.mnt, "top"), "auth")
    snap = ctx.snapshot()
    root_view = ctx.objects()

    # who the callers are, to the bus
    r = ctx.bus_call("GetConnectionUnixUser", ctx.name_owner(), user=NOBODY)
    chk.ok(r.ok and r.value == (0,), "uid %d reaches the bus, which says ocfs2d is root's: %r" % (NOBODY, r))

    # reading is open to anyone
    chk.eq(ctx.objects(user=NOBODY), root_view, "GetManagedObjects as uid %d" % NOBODY)
    chk.eq(ctx.get_all(path_v, VOL, user=NOBODY), root_view[path_v][VOL], "GetAll as uid %d" % NOBODY)
    chk.eq(ctx.get(MANAGER, MGR, "Mounts", user=NOBODY), 1, "Manager.Mounts as uid %d" % NOBODY)
    chk.eq(ctx.get(path_v, VOL, "Label", user=NOBODY), "auth", "Volume.Label as uid %d" % NOBODY)
    r = ctx.tool(["gdbus", "introspect", "--system", "--dest", BUS_NAME, "--object-path", path_v],
                 user=NOBODY)
    chk.ok(r.ok and "interface %s" % VOL in r.out and "Unmount(" in r.out,
           "introspection as uid %d: %r" % (NOBODY, r))
    r = ctx.call(path_v, "Statistics", {}, user=NOBODY)
    chk.ok(r.ok and r.value and journal_counters(r.value[0]) == ["device_flushes", "fsync_commits",
                                                                 "fsyncs", "journal_checkpoints",
                                                                 "journal_commits", "journal_log_blocks",
                                                                 "journal_times_home", "lock_refreshes",
                                                                 "lock_refreshes_kept"],
           "Statistics as uid %d (anyone may read the counters): %r" % (NOBODY, r))
    r = ctx.call(path_v, "Status", {}, user=NOBODY)
    chk.ok(r.ok and r.value and "free_bytes" in r.value[0],
           "Status as uid %d (anyone may read it): %r" % (NOBODY, r))
    r = ctx.call(path_v, PROPS + ".Set", VOL, "Label", Typed("variant", "x"), user=NOBODY)
    chk.ok(not r.ok, "Set of a read-only property as uid %d fails: %r" % (NOBODY, r))
    r = ctx.call(path_v, PROPS + ".Set", VOL, "Label", Typed("variant", "x"))
    chk.ok(not r.ok, "Set of a read-only property as root fails: %r" % r)
    chk.eq(ctx.snapshot(), snap, "Set changed nothing")

    # acting is root's: NotAuthorized, and nothing changes
    ua = E + "NotAuthorized"
    r = ctx.mount(w, user=NOBODY)
    ctx.refused(r, ua, "Mount as uid %d" % NOBODY, snap)
    chk.ok(not w.mounted(), "the volume a non-root caller tried to mount is not mounted")
    chk.ok(not srv.holds(w.img), "the daemon did not even open that volume")
    r = ctx.mount(w, {"ro": True, "auth.no_user_interaction": True}, user=NOBODY)
    ctx.refused(r, ua, "Mount ro as uid %d" % NOBODY, snap)
    r = ctx.mount(w, device=os.path.join(env.tmp, "missing.img"), user=NOBODY)
    ctx.refused(r, ua, "Mount of a missing device as uid %d (no peeking at files)" % NOBODY, snap)
    r = ctx.mount(w, mnt=v.mnt, user=NOBODY)
    ctx.refused(r, ua, "Mount on a busy mount point as uid %d" % NOBODY, snap)
    for opts in ({}, {"force": True}):
        r = ctx.call(path_v, "Unmount", opts, user=NOBODY)
        ctx.refused(r, ua, "Unmount %r as uid %d" % (opts, NOBODY), snap)
    chk.eq(ctx.get(path_v, VOL, "State"), "mounted", "State after the refused Unmounts")
    r = ctx.call(path_v, "Reflink", "/top/big", "/top/copy", {}, user=NOBODY)
    ctx.refused(r, ua, "Reflink as uid %d" % NOBODY, snap)
    r = ctx.call(path_v, "SetQuota", {"block_grace": U(5), "inode_grace": U(5)}, user=NOBODY)
    ctx.refused(r, ua, "SetQuota as uid %d" % NOBODY, snap)
    chk.ok(not os.path.exists(os.path.join(v.mnt, "top", "copy")), "the refused Reflink made nothing")
    # to the daemon's unique name: the same answer
    owner = ctx.name_owner()
    r = ctx.call(path_v, "Unmount", {}, user=NOBODY, dest=owner)
    ctx.refused(r, ua, "Unmount as uid %d sent to the unique name %s" % (NOBODY, owner), snap)
    r = ctx.call(MANAGER, "Mount", w.img, w.mnt, {}, user=NOBODY, dest=owner)
    ctx.refused(r, ua, "Mount as uid %d sent to the unique name" % NOBODY, snap)

    # the name is root's (the shipped policy): uid 65534 may not own it
    r = ctx.send("/org/freedesktop/DBus", "org.freedesktop.DBus.RequestName", "string:" + BUS_NAME,
                 "uint32:4", user=NOBODY, dest="org.freedesktop.DBus")
    ctx.refused(r, ACCESS_DENIED, "RequestName %s as uid %d" % (BUS_NAME, NOBODY))
    chk.eq(ctx.name_owner(), owner, "the name's owner after the refused RequestName")
    # while root may ask (and is told it is taken: 3, EXISTS)
    r = ctx.send("/org/freedesktop/DBus", "org.freedesktop.DBus.RequestName", "string:" + BUS_NAME,
                 "uint32:4", dest="org.freedesktop.DBus")
    chk.ok(r.ok and re.search(r"uint32 3\b", r.out), "RequestName as root: EXISTS: %r" % r)
    chk.eq(ctx.name_owner(), owner, "the name's owner after root's RequestName")

    # the control socket (peer-to-peer) is root's: as created...
    st = os.stat(srv.control)
    chk.ok(stat.S_ISSOCK(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) & 0o077 == 0,
           "the control socket is root's alone: mode 0%o uid %d" % (stat.S_IMODE(st.st_mode), st.st_uid))
    cenv = dict(ctx.client_env, OCFS2D_CONTROL=srv.control)
    r = ctx.tool([env.ctl, "mounts"], env=cenv)
    chk.ok(r.ok and os.path.realpath(v.mnt) in r.out, "ocfs2ctl mounts as root on the control socket: %r" % r)
    r = ctx.tool([env.ctl, "stats", "--json", v.mnt], env=cenv, parse=json.loads)
    chk.ok(r.ok and r.value.get("mountpoint") == os.path.realpath(v.mnt) and
           isinstance(r.value.get("journal_commits"), int) and
           isinstance(r.value.get("device_flushes"), int),
           "ocfs2ctl stats --json as root on the control socket: %r" % r)
    r = ctx.tool([env.ctl, "stats", v.mnt], env=cenv, parse=str)
    chk.ok(r.ok and re.search(r"^\s+device_flushes\s+\d+$", r.out, re.M),
           "ocfs2ctl stats as root on the control socket: %r" % r)
    r = ctx.tool([env.ctl, "stats", w.mnt], env=cenv, parse=str)
    chk.ok(r.rc == 1 and "ocfs2ctl: stats: " in r.err and "serves no volume" in r.err,
           "ocfs2ctl stats of a directory nothing is mounted on: %r" % r)

    def nobody_locked_out(what):
        r = ctx.tool([env.ctl, "mounts"], user=NOBODY, env=cenv)
        chk.ok(r.rc == 1 and "ocfs2ctl: mounts: " in r.err and v.mnt not in r.out and
               "Sanitizer" not in r.err, "ocfs2ctl mounts as uid %d %s fails cleanly: %r" % (NOBODY, what, r))
        r = ctx.send(ROOT, OM + ".GetManagedObjects", user=NOBODY, peer=srv.address)
        chk.ok(not r.ok, "GetManagedObjects on the control socket as uid %d %s fails: %r" % (NOBODY, what, r))
        r = ctx.tool([env.ctl, "mount", w.img, w.mnt], user=NOBODY, env=cenv)
        chk.ok(r.rc == 1 and not w.mounted(), "ocfs2ctl mount as uid %d %s fails: %r" % (NOBODY, what, r))

    nobody_locked_out("(socket mode 0%o)" % stat.S_IMODE(st.st_mode))
    # ... and even if its mode let anyone in, the daemon refuses a peer that is not root
    refusals = srv.log_text().count("refused a peer that is not root")
    os.chmod(srv.control, 0o777)
    try:
        nobody_locked_out("(socket mode 0777)")
    finally:
        os.chmod(srv.control, stat.S_IMODE(st.st_mode))
    chk.ok(srv.log_text().count("refused a peer that is not root") > refusals,
           "the daemon logs that it refused the peer")
    chk.eq(ctx.snapshot(), snap, "nothing changed by the callers that are not root")
    r = ctx.tool([env.ctl, "mount", "-o", "commit=9", w.img, w.mnt], env=cenv)
    chk.ok(r.ok and w.mounted(), "ocfs2ctl mount as root on the control socket: %r" % r)
    if w.mounted():
        w.conn = mount_entry(w.mnt)[1]
    chk.ok("commit=9" in ctx.get(volume_path(w.mnt), VOL, "Options").split(","),
           "the bus shows the options of the mount made peer-to-peer")
    chk.eq(ctx.get(MANAGER, MGR, "Mounts"), 2, "the bus sees the mount made on the control socket")
    r = ctx.call(volume_path(w.mnt), "Unmount", {})
    chk.ok(r.ok and not w.mounted(), "Unmount on the bus of what was mounted peer-to-peer: %r" % r)
    unmounted(w)

    # root acts
    r = ctx.call(path_v, "Reflink", "/top/big", "/top/copy", {})
    chk.ok(r.ok and read_file(os.path.join(v.mnt, "top", "copy")) == read_file(os.path.join(v.mnt, "top", "big")),
           "Reflink as root: %r" % r)
    r = ctx.call(path_v, "Unmount", {})
    chk.ok(r.ok and not v.mounted(), "Unmount as root: %r" % r)
    unmounted(v)
    ctx.finish([v, w])


# ====================================================================
# jobs: Format and Check as Job objects; progress, Cancel, errors;
# ocfs2ctl --via-daemon with its progress bar on a terminal
# ====================================================================

JOB = "org.ocfs2d.Daemon1.Job"
JOBS = ROOT + "/jobs/"


def sha256(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def job_completed(ctx, mon, path, timeout=60):
    """The Completed signal of the job at path: (success, message), or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for obj, args in mon.signals("Completed"):
            if obj == path:
                try:
                    return gv_parse(args)
                except (ValueError, IndexError):
                    return (None, args)
        time.sleep(0.05)
    return None


def job_progress(mon, path):
    """Every Progress value the job's PropertiesChanged signals carried."""
    out = []
    for obj, args in mon.signals("PropertiesChanged"):
        if obj == path and JOB in args:
            m = re.search(r"'Progress': <([0-9.e+-]+)>", args)
            if m:
                out.append(float(m.group(1)))
    return out


def run_pty(argv, env, timeout=120):
    """argv on a pseudo-terminal: (exit status, everything it wrote)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    out = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(fd)
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st), out.decode(errors="replace")


def case_jobs(env, chk):
    ctx = Ctx(env, chk)
    srv = ctx.server("srv")
    mon = ctx.monitor()
    img = os.path.join(env.tmp, "fresh.img")
    with open(img, "wb") as f:
        f.truncate(256 << 20)

    # Format: a Job that reports progress, completes and goes away
    r = ctx.call(MANAGER, "Format", img, {"local": True, "label": "by job",
                                          "journal_size": Typed("uint64", 4 << 20)})
    path = r.value[0] if r.ok and r.value else None
    chk.ok(path and path.startswith(JOBS), "Format returns a job object: %r" % r)
    done = job_completed(ctx, mon, path)
    chk.ok(done and done[0] is True and "formatted" in done[1], "the format completes: %r" % (done,))
    prog = job_progress(mon, path)
    chk.ok(prog and all(0 <= p <= 1 for p in prog) and prog == sorted(prog) and prog[-1] == 1.0,
           "the format's Progress grows to 1: %r" % prog)
    ctx.wait_for(lambda: path not in ctx.objects(), "the format's job object is removed")
    rc, out = run([which("fsck.ocfs2"), "-fn", img])
    chk.eq(rc, 0, "fsck.ocfs2 -fn of the volume Format made:\n%s" % out)
    chk.eq(run(["tunefs.ocfs2", "-Q", "%V", img], check=True)[1].strip(), "by job", "the label Format wrote")
    chk.ok("format job" in srv.log_text(), "the daemon logs the job")

    # errors come back named, and nothing starts
    missing = os.path.join(env.tmp, "missing.img")
    for method in ("Format", "Check"):
        snap = ctx.objects()
        ctx.refused(ctx.call(MANAGER, method, missing, {}), E + "NotFound", "%s of a missing device" % method)
        ctx.refused(ctx.call(MANAGER, method, "fresh.img", {}), E + "InvalidArgument",
                    "%s of a relative path" % method)
        ctx.refused(ctx.call(MANAGER, method, img, {"bogus": True}), E + "OptionNotPermitted",
                    "%s with an unknown option" % method)
        ctx.refused(ctx.call(MANAGER, method, img, {"auth.no_user_interaction": "yes"}), INVALID_ARGS,
                    "%s with auth.no_user_interaction of the wrong type" % method)
        ctx.refused(ctx.call(MANAGER, method, img, {}, user=NOBODY), (E + "NotAuthorized", ACCESS_DENIED),
                    "%s as uid %d" % (method, NOBODY))
        chk.eq(ctx.objects(), snap, "%s: refusals start no job" % method)
    ctx.refused(ctx.call(MANAGER, "Format", img, {"local": True}), E + "Exists",
                "Format of a volume without force")
    ctx.refused(ctx.call(MANAGER, "Format", img, {"block_size": U(3000), "force": True}),
                E + "InvalidArgument", "Format with block size 3000")
    ctx.refused(ctx.call(MANAGER, "Format", img, {"type": "bogus", "force": True}),
                E + "InvalidArgument", "Format with an unknown type")
    ctx.refused(ctx.call(MANAGER, "Format", img, {"features": "nosuchfeature", "force": True}),
                E + "InvalidArgument", "Format with an unknown feature")
    ctx.refused(ctx.call(MANAGER, "Format", img, {"block_size": "4k"}), INVALID_ARGS,
                "Format with block_size of the wrong type")
    ctx.refused(ctx.call(MANAGER, "Format", img, {"slots": U(300), "force": True}),
                E + "InvalidArgument", "Format with 300 slots")
    chk.eq(run(["tunefs.ocfs2", "-Q", "%V", img], check=True)[1].strip(), "by job",
           "the refused Formats left the volume alone")

    # a mounted device: DeviceBusy for both, whoever mounted it
    v = make_volume(env, "mounted")
    mounted_ok(ctx, v, ctx.mount(v), "Mount for the busy cases")
    for method in ("Format", "Check"):
        ctx.refused(ctx.call(MANAGER, method, v.img, {"force": True} if method == "Format" else {}),
                    E + "DeviceBusy", "%s of a volume the daemon has mounted" % method)
    r = ctx.call(volume_path(v.mnt), "Unmount", {})
    chk.ok(r.ok, "Unmount after the busy cases: %r" % r)
    unmounted(v)

    # Check of a clean volume
    r = ctx.call(MANAGER, "Check", img, {})
    path = r.value[0] if r.ok and r.value else None
    chk.ok(path and path.startswith(JOBS), "Check returns a job object: %r" % r)
    done = job_completed(ctx, mon, path)
    chk.ok(done and done[0] is True and "clean" in done[1], "the check completes, clean: %r" % (done,))
    r = ctx.call(path, JOB + ".Cancel", {})
    chk.ok(not r.ok, "Cancel of a job that is over fails: %r" % r)

    # a long check, cancelled half-way: it says so and the image is unchanged
    big = env.volume("big", size="512M", mkfs="mkfs", mkfs_args=("-b", "1024", "-C", "4096", "-J", "size=4M"))
    tree = os.path.join(env.tmp, "many")
    os.mkdir(tree)
    for d in range(JOBS_DIRS):
        os.mkdir(os.path.join(tree, "d%d" % d))
        for f in range(300):
            open(os.path.join(tree, "d%d" % d, "f%d" % f), "wb").close()
    t0 = time.time()
    rc, out = run([env.ctl, "put", "-r", big.img, tree, "/many"])
    chk.eq(rc, 0, "ocfs2ctl put of %d files: %s" % (JOBS_DIRS * 300, out))
    log("put %d files: %.1fs" % (JOBS_DIRS * 300, time.time() - t0))
    before = sha256(big.img)
    cancelled = None
    # one connection, no process per call: the check takes a fraction of
    # a second on a warm page cache, a Get and a Cancel well under 1 ms
    raw = RawClient(ctx.bus_socket)
    for attempt in range(3):
        err, path = raw.wait(raw.send(MANAGER, MGR, "Check", BUS_NAME, [big.img, {}]))
        if not chk.ok(not err and path, "Check of the big volume: %r" % ((err, path),)):
            break
        seen = 0.0
        t0 = time.time()
        while time.time() - t0 < 60:
            err, _ = raw.wait(raw.send(path, PROPS, "Get", BUS_NAME, [JOB, "Progress"]))
            if err:
                break
            seen = struct.unpack("<d", raw.body[8:16])[0]  # v: signature "d", padding, the double
            if seen >= 0.25:
                break
        err, _ = raw.wait(raw.send(path, JOB, "Cancel", BUS_NAME, [{}]))
        done = job_completed(ctx, mon, path)
        log("attempt %d: Progress %.3f when cancelled (%s), then %r" % (attempt, seen, err or "ok", done))
        if not err:
            cancelled = (seen, done)
            break
    raw.close()
    if chk.ok(cancelled, "a Cancel reached the check before it ended (3 tries)"):
        seen, done = cancelled
        chk.ok(0 < seen < 1, "the check was cancelled half-way (Progress %.3f)" % seen)
        chk.eq(done, (False, "cancelled"), "the cancelled check completes with success false, \"cancelled\"")
        prog = job_progress(mon, path)
        chk.ok(prog and max(prog) < 1, "the cancelled check's Progress never reached 1: %r" % prog[-3:])
    chk.eq(sha256(big.img), before, "the cancelled check left the image byte-identical")
    ctx.wait_for(lambda: not any(p.startswith(JOBS) for p in ctx.objects()), "no job object is left")

    # ocfs2ctl --via-daemon: a progress bar on a terminal, plain lines otherwise
    cenv = dict(os.environ, OCFS2D_CONTROL=srv.control, OCFS2D=env.daemon, LC_ALL="C")
    rc, out = run_pty([env.ctl, "check", "--via-daemon", big.img], cenv)
    chk.eq(rc, 0, "ocfs2ctl check --via-daemon on a terminal: exit status (%r)" % out[-500:])
    chk.ok("\rChecking [" in out and re.search(r"\[#+\s*\]\s+\d+%", out) and "100%" in out
           and "clean" in out, "ocfs2ctl check --via-daemon draws a progress bar on a terminal: %r" % out[-500:])
    p = subprocess.run([env.ctl, "check", "--via-daemon", big.img], capture_output=True, env=cenv, timeout=120)
    text = p.stdout.decode()
    chk.ok(p.returncode == 0 and "\r" not in text and re.search(r"^check: \d+%$", text, re.M) and "clean" in text,
           "ocfs2ctl check --via-daemon into a pipe: plain lines: %r" % text[-500:])
    p = subprocess.run([env.ctl, "--json", "check", "--via-daemon", big.img], capture_output=True, env=cenv,
                       timeout=120)
    try:
        j = json.loads(p.stdout.decode())
        chk.ok(p.returncode == 0 and j["success"] is True and j["operation"] == "check"
               and j["job"].startswith(JOBS), "check --via-daemon --json: %r" % j)
    except ValueError:
        chk.ok(False, "check --via-daemon --json is not JSON: %r" % p.stdout)
    fmt = os.path.join(env.tmp, "viactl.img")
    with open(fmt, "wb") as f:
        f.truncate(128 << 20)
    rc, out = run_pty([env.ctl, "format", "--via-daemon", "-M", "local", "-J", "size=4M", "-L", "viactl", fmt], cenv)
    chk.ok(rc == 0 and "\rFormatting [" in out and "formatted" in out,
           "ocfs2ctl format --via-daemon on a terminal: %d %r" % (rc, out[-500:]))
    rc2, out2 = run([env.ctl, "format", "--via-daemon", "-M", "local", fmt])
    chk.ok(rc2 == 1 and "force" in out2, "format --via-daemon of a volume without -F is refused: %r" % out2)
    rc2, out2 = run([env.ctl, "format", "--via-daemon", "-F", "-n", fmt])
    chk.ok(rc2 == 0 and "would format" in out2, "format --via-daemon -n: a dry run through the daemon (%r)" % out2)
    rc2, out2 = run([which("fsck.ocfs2"), "-fn", fmt])
    chk.eq(rc2, 0, "fsck.ocfs2 -fn of the volume format --via-daemon made:\n%s" % out2)

    # put -r: a bar on a terminal (bytes and files), plain lines otherwise
    tree = os.path.join(env.tmp, "puttree")
    want = {}
    for d in range(4):
        os.makedirs(os.path.join(tree, "d%d" % d))
        for f in range(25):
            rel = "d%d/f%d" % (d, f)
            want[rel] = os.urandom(4096 * (1 + (d * 25 + f) % 40))
            write_file(os.path.join(tree, rel), want[rel])
    total = sum(len(x) for x in want.values())
    rc, out = run_pty([env.ctl, "put", "-r", fmt, tree, "/pty"], cenv)
    chk.eq(rc, 0, "ocfs2ctl put -r on a terminal: exit status (%r)" % out[-500:])
    chk.ok("\rCopying [" in out and re.search(r"\[#+\s*\]\s+\d+%", out)
           and re.search(r"100%%\s+\S+ MiB of \S+ MiB, %d of %d files" % (len(want), len(want)), out)
           and re.search(r"\s[1-9]\d?%", out),
           "ocfs2ctl put -r draws a progress bar through to 100%%, %d files: %r" % (len(want), out[-600:]))
    p = subprocess.run([env.ctl, "put", "-r", fmt, tree, "/pipe"], capture_output=True, env=cenv, timeout=120)
    text = p.stdout.decode()
    lines = re.findall(r"^put: (\d+)% \((.*)\)$", text, re.M)
    chk.ok(p.returncode == 0 and "\r" not in text and lines and lines[-1][0] == "100"
           and "%d of %d files" % (len(want), len(want)) in lines[-1][1]
           and [int(x) for x, _ in lines] == sorted(int(x) for x, _ in lines),
           "ocfs2ctl put -r into a pipe: plain lines to 100%%: %r" % text[-500:])
    p = subprocess.run([env.ctl, "--json", "put", "-r", fmt, tree, "/json"], capture_output=True, env=cenv, timeout=120)
    try:
        j = json.loads(p.stdout.decode())
        chk.ok(j["files"] == len(want) and j["bytes"] == total, "put -r --json: only the document: %r" % j)
    except ValueError:
        chk.ok(False, "put -r --json prints nothing but JSON: %r" % p.stdout[:300])
    chk.ok(read_file_of(env, fmt, "/pty/d3/f24") == want["d3/f24"], "put -r on a terminal copied the data")
    rc2, out2 = run([which("fsck.ocfs2"), "-fn", fmt])
    chk.eq(rc2, 0, "fsck.ocfs2 -fn after the put -r runs:\n%s" % out2)
    ctx.finish([v, big])


def read_file_of(env, img, path):
    """A file's content on an image, as ocfs2ctl cat gives it."""
    p = subprocess.run([env.ctl, "cat", img, path], capture_output=True, timeout=60)
    return p.stdout if p.returncode == 0 else None


# ====================================================================
# mountjob: Mount and Unmount are Jobs while they work; a mount replaying
# a dirty journal shows its progress and may be cancelled until it mounts
# ====================================================================

# files each dirty volume gets, each fsynced: every one is a few committed
# transactions in the journal (commit=3600: nothing but fsync commits)
MOUNTJOB_FILES = int(os.environ.get("DBUS_MOUNTJOB_FILES", "1500"))
OBJ_MANAGER_MATCH = ("type='signal',interface='org.freedesktop.DBus.ObjectManager',"
                     "member='InterfacesAdded'")


def dirty_volume(env, name):
    """A volume whose journal holds committed transactions a crash left: a
    foreground ocfs2d creates files, fsyncs each, and is SIGKILLed.
    Returns the volume and {relative path: content} of what was fsynced."""
    vol = env.volume(name, size="512M", mkfs="mkfs",
                     mkfs_args=("-b", "4096", "-C", "4096", "-J", "size=128M"))
    vol.mount("commit=3600")
    files = {}
    t0 = time.time()
    for i in range(MOUNTJOB_FILES):
        rel = "d%d/f%d" % (i // 100, i)
        d = os.path.join(vol.mnt, os.path.dirname(rel))
        if i % 100 == 0:
            os.mkdir(d)
        data = ("%s %d;" % (name, i)).encode() * (1 + i % 700)
        fd = os.open(os.path.join(vol.mnt, rel), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        files[rel] = data
    log("%s: %d files written and fsynced in %.1fs" % (name, len(files), time.time() - t0))
    vol.kill()
    return vol, files


def journal_state(vol):
    """The slot's journal file as debugfs.ocfs2 dumps it (its sha256) and
    its inode's flags line: what a replay changes."""
    out = os.path.join(vol.env.tmp, "%s-journal-%d" % (vol.name, time.time_ns()))
    rc, text = run(["debugfs.ocfs2", "-R", "dump //journal:0000 %s" % out, vol.img])
    if rc != 0 or not os.path.exists(out):
        raise Failure("debugfs.ocfs2 could not dump the journal of %s: %s" % (vol.img, text))
    digest = sha256(out)
    os.unlink(out)
    rc, stat_text = run(["debugfs.ocfs2", "-R", "stat //journal:0000", vol.img])
    flags = re.search(r"Journal Flags: ([^\n]*)", stat_text)
    return digest, flags.group(1).strip() if flags else stat_text


def files_ok(chk, vol, files, what):
    """Every fsynced file is there with its content."""
    bad = []
    for rel, data in files.items():
        try:
            if read_file(os.path.join(vol.mnt, rel)) != data:
                bad.append(rel)
        except OSError as e:
            bad.append("%s (%s)" % (rel, e))
    return chk.ok(not bad, "%s: %d of %d fsynced files missing or wrong: %s" % (
        what, len(bad), len(files), bad[:5]))


def job_added(signals, operation):
    """The jobs InterfacesAdded announced for operation: [(path, args text)]."""
    return [(obj, a) for obj, a in signals
            if obj == ROOT and "'Operation': <'%s'>" % operation in a]


def case_mountjob(env, chk):
    ctx = Ctx(env, chk)
    srv = ctx.server("srv")
    mon = ctx.monitor()

    # a dirty journal: Mount replays it as a Job that reports progress
    vol, files = dirty_volume(env, "replayed")
    dirty = journal_state(vol)
    chk.ok("Dirty" in dirty[1], "the killed daemon left the journal dirty: %r" % dirty[1])
    t0 = time.time()
    mounted_ok(ctx, vol, ctx.mount(vol), "Mount of a volume with a dirty journal")
    log("the replaying Mount took %.2fs" % (time.time() - t0))
    added = job_added(mon.signals("InterfacesAdded"), "mount")
    path = None
    if chk.ok(added, "the Mount was shown as a Job (InterfacesAdded with Operation 'mount')"):
        m = re.search(r"objectpath '(%s\d+)'" % re.escape(JOBS), added[-1][1])
        path = m.group(1) if m else None
        chk.ok(path and "'Device': <'%s'>" % vol.img in added[-1][1] and
               "'Cancelable': <true>" in added[-1][1],
               "the mount job: its path, device and Cancelable true: %r" % (added[-1][1],))
    done = job_completed(ctx, mon, path) if path else None
    chk.ok(done and done[0] is True and "mounted on" in done[1], "the mount job completed: %r" % (done,))
    prog = job_progress(mon, path) if path else []
    chk.ok(prog and all(0 <= p <= 1 for p in prog) and prog == sorted(prog) and prog[-1] == 1.0
           and any(0 < p < 1 for p in prog),
           "the mount job's Progress (the replay's) grows through (0, 1) to 1: %r" % prog[:20])
    # past its safe point (the FUSE mount) the job said it may no longer be cancelled
    chk.ok(path and any(o == path and "'Cancelable': <false>" in a for o, a in mon.signals("PropertiesChanged")),
           "the mount job signalled Cancelable false once it mounted")
    ctx.wait_for(lambda: not any(p.startswith(JOBS) for p in ctx.objects()), "the mount job goes away")
    files_ok(chk, vol, files, "after the replaying Mount")
    # Unmount: a Job too, never cancelable
    r = ctx.call(volume_path(vol.mnt), "Unmount", {})
    chk.ok(r.ok, "Unmount: %r" % r)
    unmounted(vol)
    added = job_added(mon.signals("InterfacesAdded"), "unmount")
    if chk.ok(added, "the Unmount was shown as a Job (Operation 'unmount')"):
        chk.ok("'Cancelable': <false>" in added[-1][1], "the unmount job is not cancelable: %r" % (added[-1][1],))
        m = re.search(r"objectpath '(%s\d+)'" % re.escape(JOBS), added[-1][1])
        done = job_completed(ctx, mon, m.group(1)) if m else None
        chk.ok(done and done[0] is True and "unmounted" in done[1], "the unmount job completed: %r" % (done,))
    vol.fsck(chk, "after the replaying Mount and Unmount")

    # a Mount cancelled while it replays: not mounted, the journal as it was;
    # the next Mount replays it all
    cancelled = None
    raw = RawClient(ctx.bus_socket)
    raw.wait(raw.send("/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch",
                      "org.freedesktop.DBus", [OBJ_MANAGER_MATCH]))
    cvols = []
    for attempt in range(3):
        cv, cfiles = dirty_volume(env, "cancelled%d" % attempt)
        cvols.append(cv)
        before = journal_state(cv)
        mserial = raw.send(MANAGER, MGR, "Mount", BUS_NAME, [cv.img, cv.mnt, {}])
        # the job's path: its InterfacesAdded, read while the Mount runs
        jpath = None
        t0 = time.time()
        while jpath is None and time.time() - t0 < 30 and mserial not in raw.replies:
            mtype, reply_to, error, first = raw.message()
            if mtype == 4 and raw.member == "InterfacesAdded" and first and first.startswith(JOBS):
                jpath = first
            elif reply_to is not None:
                raw.replies[reply_to] = (error, first)
        seen = 0.0
        while jpath and time.time() - t0 < 30:
            err, _ = raw.wait(raw.send(jpath, PROPS, "Get", BUS_NAME, [JOB, "Progress"]))
            if err:
                break
            seen = struct.unpack("<d", raw.body[8:16])[0]
            if seen > 0:
                break
        cerr = "no job seen"
        if jpath:
            cerr, _ = raw.wait(raw.send(jpath, JOB, "Cancel", BUS_NAME, [{}]))
        merr, _ = raw.wait(mserial)
        log("attempt %d: Progress %.3f when cancelled (%s); Mount answered %s" % (
            attempt, seen, cerr or "ok", merr or "ok"))
        if not cerr:
            cancelled = (cv, cfiles, before, seen, merr, jpath)
            break
        # the replay won the race: this volume is mounted
        if merr is None:
            r = ctx.call(volume_path(cv.mnt), "Unmount", {})
            chk.ok(r.ok, "Unmount after a lost race: %r" % r)
    raw.close()
    if chk.ok(cancelled, "a Cancel reached a mount while it replayed (3 tries)"):
        cv, cfiles, before, seen, merr, jpath = cancelled
        chk.ok(0 < seen < 1, "the mount was cancelled during its replay (Progress %.3f)" % seen)
        chk.eq(merr, E + "Cancelled", "the cancelled Mount fails with Cancelled")
        done = job_completed(ctx, mon, jpath)
        chk.ok(done and done[0] is False and "cancelled" in done[1],
               "the cancelled mount job completes with success false: %r" % (done,))
        chk.ok(not cv.mounted(), "the cancelled Mount left %s unmounted" % cv.mnt)
        chk.ok(not srv.holds(cv.img), "the daemon let go of the cancelled volume's image")
        after = journal_state(cv)
        chk.eq(after, before, "the cancelled Mount left the journal whole and dirty (its dump and flags)")
        mounted_ok(ctx, cv, ctx.mount(cv), "Mount after the cancelled one")
        files_ok(chk, cv, cfiles, "after the Mount that followed the cancelled one")
        r = ctx.call(volume_path(cv.mnt), "Unmount", {})
        chk.ok(r.ok, "Unmount after the cancelled Mount's successor: %r" % r)
        unmounted(cv)
    ctx.wait_for(lambda: not any(p.startswith(JOBS) for p in ctx.objects()), "no job object is left")
    ctx.finish([vol] + cvols)


# ====================================================================
# formatjob: every ocfs2ctl format option through the daemon's Format;
# a format cancelled before it writes, and one that may no longer be
# ====================================================================

# two sets of options that between them use every option ocfs2ctl format
# has; with the UUID, generation, seeds and time fixed, a format is one
# exact image, so the daemon's must equal the offline one byte for byte
FORMAT_OPTION_SETS = [
    ("128M", ["-b", "2048", "-C", "8192", "-N", "2", "-L", "every option", "-J", "size=5M,block64",
              "-T", "datafiles", "--fs-feature-level", "max-compat",
              "--fs-features=sparse,unwritten,noinline-data", "-M", "local",
              "-U", "0123456789abcdef0123456789ABCDEF", "--generation", "12345",
              "--dx-seed", "1,2,3", "--time", "1700000000"], ["60000"],
     "every option|0123456789ABCDEF0123456789ABCDEF|8192|2", 2048),
    ("256M", ["-b", "4096", "-C", "4096", "-N", "4", "-J", "size=4M,block32",
              "--fs-feature-level", "max-features", "-M", "cluster", "--cluster-stack", "pcmk",
              "--cluster-name", "viajob", "-U", "11111111-2222-3333-4444-555555555555",
              "--generation", "7", "--dx-seed", "9,8,7", "--time", "1600000000",
              "--no-backup-super", "-T", "mail"], [],
     "|11111111222233334444555555555555|4096|4", 4096),
]


def has_data(path):
    """Whether a sparse image holds any data (SEEK_DATA finds some)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 0, os.SEEK_DATA)
        return True
    except OSError as e:
        if e.errno == errno.ENXIO:
            return False
        raise
    finally:
        os.close(fd)


def sparse_image(env, name, size):
    path = os.path.join(env.tmp, name)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def case_formatjob(env, chk):
    ctx = Ctx(env, chk)
    srv = ctx.server("srv")
    mon = ctx.monitor()
    cenv = dict(os.environ, OCFS2D_CONTROL=srv.control, OCFS2D=env.daemon, LC_ALL="C")

    # every option: the daemon's volume is the offline one, and sound
    for i, (size, opts, operands, want, bsize) in enumerate(FORMAT_OPTION_SETS):
        off = sparse_image(env, "offline%d.img" % i, int(size[:-1]) << 20)
        via = sparse_image(env, "via%d.img" % i, int(size[:-1]) << 20)
        rc, out = run([env.ctl, "format", "-q"] + opts + [off] + operands)
        chk.eq(rc, 0, "offline ocfs2ctl format with option set %d: %s" % (i, out))
        rc, out = run([env.ctl, "format", "--via-daemon"] + opts + [via] + operands, env=cenv)
        chk.ok(rc == 0 and "formatted" in out, "format --via-daemon with option set %d: %d %r" % (i, rc, out))
        chk.eq(sha256(via), sha256(off), "option set %d: the daemon's volume is the offline one, byte for byte" % i)
        rc, out = run([which("fsck.ocfs2"), "-fn", via])
        chk.eq(rc, 0, "fsck.ocfs2 -fn of option set %d's volume:\n%s" % (i, out))
        rc, q = run(["tunefs.ocfs2", "-Q", "%V|%U|%T|%N", via])
        chk.eq(q.strip(), want, "option set %d: label, UUID, cluster size, slots as tunefs.ocfs2 reads them" % i)
        chk.eq(tools_view(via)["BlockSize"], bsize, "option set %d: the block size debugfs.ocfs2 reads" % i)
    rc, stats = run(["debugfs.ocfs2", "-R", "stats", os.path.join(env.tmp, "via1.img")])
    chk.ok("Cluster stack: pcmk" in stats and "Cluster name: viajob" in stats,
           "the cluster stack and name the daemon wrote, as debugfs.ocfs2 reads them")
    # a dry run writes nothing and says what it would make
    dry = sparse_image(env, "dry.img", 128 << 20)
    rc, out = run([env.ctl, "format", "--via-daemon", "-n", "-M", "local", "-N", "3", dry], env=cenv)
    chk.ok(rc == 0 and "would format" in out and "3 slots" in out,
           "format --via-daemon -n says what it would make: %d %r" % (rc, out))
    chk.ok(not has_data(dry), "format --via-daemon -n wrote nothing")

    # bad values: refused before any job, the error naming the option
    img = sparse_image(env, "bad.img", 128 << 20)
    snap = ctx.objects()
    for opts, want, name in (
            ({"uuid": "not-hex"}, E + "InvalidArgument", "uuid"),
            ({"uuid": "0123"}, E + "InvalidArgument", "uuid"),
            ({"dx_seed": Typed("text", "@au [1, 2]")}, E + "InvalidArgument", "dx_seed"),
            ({"dx_seed": "1,2,3"}, INVALID_ARGS, "dx_seed"),
            ({"volume_size": Typed("uint64", 1 << 40)}, E + "InvalidArgument", "volume_size"),
            ({"time": Typed("uint64", 1 << 62)}, E + "InvalidArgument", "time"),
            ({"journal64": "yes"}, INVALID_ARGS, "journal64"),
            ({"generation": "1"}, INVALID_ARGS, "generation"),
            ({"dry_run": U(1)}, INVALID_ARGS, "dry_run"),
            ({"slots": U(256)}, E + "InvalidArgument", "slots"),
            ({"label": "x" * 64}, E + "InvalidArgument", "label")):
        r = ctx.call(MANAGER, "Format", img, opts)
        ctx.refused(r, want, "Format with a bad %s (%r)" % (name, opts))
        chk.ok(name in r.err, "the refusal names the option %s: %r" % (name, r.err))
    chk.eq(ctx.objects(), snap, "the refused Formats started no job")
    chk.ok(not has_data(img), "the refused Formats wrote nothing")

    # cancelled before it writes: nothing on the device
    raw = RawClient(ctx.bus_socket)
    opts = {"local": True, "slots": U(1), "cluster_size": U(4096), "journal_size": Typed("uint64", 4 << 20)}

    def start_format(name):
        """A format job on a fresh sparse 1 TiB image: (image, job path or None)."""
        img = sparse_image(env, name, 1 << 40)
        err, path = raw.wait(raw.send(MANAGER, MGR, "Format", BUS_NAME, [img, opts]))
        chk.ok(not err and path, "Format of a 1 TiB image: %r" % ((err, path),))
        return img, None if err else path

    cancelled = None
    for attempt in range(5):
        img, path = start_format("cancel%d.img" % attempt)
        if not path:
            break
        cerr, _ = raw.wait(raw.send(path, JOB, "Cancel", BUS_NAME, [{}]))
        done = job_completed(ctx, mon, path)
        log("cancel attempt %d: Cancel answered %s, the job %r" % (attempt, cerr or "ok", done))
        if not cerr:
            cancelled = (img, path, done)
            break
    if chk.ok(cancelled, "a Cancel reached a format before it wrote (5 tries)"):
        img, path, done = cancelled
        chk.eq(done, (False, "cancelled"), "the cancelled format completes with success false, \"cancelled\"")
        chk.ok(not has_data(img), "the format cancelled before writing wrote nothing")
        chk.ok(not srv.holds(img), "the daemon let go of the cancelled format's device")

    # once it writes, Cancelable is false and Cancel is NotCancelable
    refused = None
    for attempt in range(5):
        img, path = start_format("nocancel%d.img" % attempt)
        if not path:
            break
        cerr = None
        while True:
            err, _ = raw.wait(raw.send(path, PROPS, "Get", BUS_NAME, [JOB, "Cancelable"]))
            if err:
                break  # over already
            if raw.body[4:8] == b"\0\0\0\0":  # v: signature "b", padding, false
                cerr, _ = raw.wait(raw.send(path, JOB, "Cancel", BUS_NAME, [{}]))
                break
        done = job_completed(ctx, mon, path)
        log("write attempt %d: Cancel answered %s, the job %r" % (attempt, cerr, done))
        if cerr:
            refused = (img, path, cerr, done)
            break
    raw.close()
    if chk.ok(refused, "a Cancel reached a format while it wrote (5 tries)"):
        img, path, cerr, done = refused
        chk.eq(cerr, E + "NotCancelable", "Cancel of a format that writes")
        chk.ok(done and done[0] is True and "formatted" in done[1], "the format went on to its end: %r" % (done,))
        changed = [a for o, a in mon.signals("PropertiesChanged") if o == path and "'Cancelable': <false>" in a]
        chk.ok(changed, "the job signalled Cancelable false before it wrote")
        rc, out = run([which("fsck.ocfs2"), "-fn", img])
        chk.eq(rc, 0, "fsck.ocfs2 -fn of the format Cancel could not stop:\n%s" % out)
    ctx.wait_for(lambda: not any(p.startswith(JOBS) for p in ctx.objects()), "no job object is left")
    ctx.finish([])


# ====================================================================
# polkit: callers that are not root, as the polkit authority decides
# ====================================================================

POLKITD = "/usr/lib/polkit-1/polkitd"
POLKIT_ACTIONS = "/usr/share/polkit-1/actions"
POLKIT_RULES = "/etc/polkit-1/rules.d"
OUR_ACTIONS = os.path.join(HERE, "..", "..", "packaging", "polkit", "org.ocfs2d.Daemon1.policy")
# polkitd's own bus policy, as its package installs it
POLKIT_BUS_POLICY = "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"


def case_polkit(env, chk):
    """A real polkitd on the case's bus, with the shipped actions and a rule
    of the case's that lets uid 65534 check volumes and nothing else: the
    check runs, the rest is NotAuthorized naming polkit's answer, root
    needs no polkit, and without polkitd every non-root call is refused."""
    if not os.path.exists(POLKITD) or not os.path.exists(POLKIT_BUS_POLICY):
        raise Failure("%s is missing (scripts/setup.sh installs polkitd)" % POLKITD)
    ctx = Ctx(env, chk)
    # the bus lets polkitd (it runs as user polkitd) own the authority's name
    shutil.copy(POLKIT_BUS_POLICY, os.path.join(env.tmp, "bus", "system.d"))
    r = ctx.bus_call("ReloadConfig")
    chk.ok(r.ok, "the bus reloads its policy: %r" % r)
    # polkitd reads actions and rules from fixed places: ours go there for the case
    placed = []
    actions = os.path.join(POLKIT_ACTIONS, "org.ocfs2d.Daemon1.policy")
    if not os.path.exists(actions):  # an installed package's is left alone
        shutil.copy(OUR_ACTIONS, actions)
        placed.append(actions)
    os.makedirs(POLKIT_RULES, exist_ok=True)
    rule = os.path.join(POLKIT_RULES, "49-ocfs2d-test-%d.rules" % os.getpid())
    with open(rule, "w") as f:
        f.write('polkit.addRule(function(action, subject) {\n'
                '    if (subject.user == "nobody" && action.id.indexOf("org.ocfs2d.Daemon1.") == 0)\n'
                '        return action.id == "org.ocfs2d.Daemon1.check" ? polkit.Result.YES\n'
                '                                                       : polkit.Result.NO;\n'
                '});\n')
    placed.append(rule)

    def unplace():
        for path in placed:
            try:
                os.unlink(path)
            except OSError:
                pass
    env.cleanups.append(unplace)
    plog = os.path.join(env.tmp, "polkitd.log")
    penv = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=ctx.bus_address)
    penv.pop("DBUS_SESSION_BUS_ADDRESS", None)
    with open(plog, "w") as lf:
        pk = subprocess.Popen([POLKITD, "--no-debug"], stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                              env=penv, start_new_session=True)

    def stop_polkitd():
        if pk.poll() is None:
            pk.terminate()
            pk.wait(10)
    env.cleanups.append(stop_polkitd)
    env.extra_logs.append(lambda: "---- polkitd log ----\n" + Ctx.read(plog)[-5000:])
    ctx.wait_for(lambda: ctx.bus_call("GetNameOwner", "org.freedesktop.PolicyKit1").ok,
                 "polkitd owns org.freedesktop.PolicyKit1 on the case's bus", timeout=20)
    srv = ctx.server("srv")
    mon = ctx.monitor()
    v = make_volume(env, "pk")
    snap = ctx.snapshot()

    # the rule lets nobody check: the job is theirs, and they may cancel it
    r = ctx.call(MANAGER, "Check", v.img, {"auth.no_user_interaction": True}, user=NOBODY)
    path = r.value[0] if r.ok and r.value else None
    if chk.ok(path and path.startswith(JOBS), "Check as uid %d, which polkit allows: %r" % (NOBODY, r)):
        done = job_completed(ctx, mon, path)
        chk.ok(done and done[0] is True, "the check polkit allowed completes: %r" % (done,))
        chk.ok("started (uid %d)" % NOBODY in srv.log_text(), "the job's starter is uid %d" % NOBODY)
    # the rest polkit refuses, whatever the interaction flag
    ua = E + "NotAuthorized"
    for opts in ({"auth.no_user_interaction": True}, {}):
        r = ctx.mount(v, opts, user=NOBODY)
        ctx.refused(r, ua, "Mount as uid %d, which polkit refuses (%r)" % (NOBODY, opts), snap)
        chk.ok("polkit says no" in r.err, "the refusal says polkit's answer: %r" % r)
    r = ctx.call(MANAGER, "Format", v.img, {"force": True, "auth.no_user_interaction": True}, user=NOBODY)
    ctx.refused(r, ua, "Format as uid %d" % NOBODY, snap)
    v.fsck(chk, "after the refused Format")
    # root needs no polkit
    mounted_ok(ctx, v, ctx.mount(v), "Mount as root with polkit running")
    r = ctx.call(volume_path(v.mnt), "Unmount", {}, user=NOBODY)
    ctx.refused(r, ua, "Unmount as uid %d" % NOBODY)
    r = ctx.call(volume_path(v.mnt), "Unmount", {})
    chk.ok(r.ok, "Unmount as root: %r" % r)
    unmounted(v)
    # without an authority nobody is let in, and says why
    stop_polkitd()
    r = ctx.call(MANAGER, "Check", v.img, {}, user=NOBODY)
    ctx.refused(r, ua, "Check as uid %d without polkitd" % NOBODY)
    chk.ok("no polkit authority" in r.err, "the refusal says there is no polkit to ask: %r" % r)
    ctx.finish([v])


CASES = {"bus": case_bus, "args": case_args, "auth": case_auth, "jobs": case_jobs, "polkit": case_polkit,
         "mountjob": case_mountjob, "formatjob": case_formatjob}

if __name__ == "__main__":
    sys.exit(main(CASES))
