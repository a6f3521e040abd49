#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Fail if fscore's modules call each other in a cycle.

fscore is meant to be layered: error reporting and block reading at the
bottom, the cache and metadata readers above them, the format modules
above those, open/close on top.  A cycle between two .c files means
neither can be understood (or locked, once cluster locks go in) without
the other, so every cycle except the allowed ones below is a failure.

The graph comes from the linker's view: for each object file in the
library, `nm` lists the global symbols it defines and the ones it leaves
undefined; file A -> file B when A uses a symbol B defines.

Usage: check_layers.py LIBRARY.a|PROGRAM [NM]
       check_layers.py --self-test

A PROGRAM is read through the objects meson keeps beside it (PROGRAM.p/),
so the same check holds the daemon to its layering (docs/ARCHITECTURE.md,
"daemon/, top to bottom").
"""

import os
import subprocess
import sys

# Cycles that are real and stay: each entry is the exact set of files one
# strongly connected component may hold.  Keep this minimal.
#
# The one expected candidate was the allocator <-> journal pair, but the
# linker's view shows none: alloc.c calls journal.c (it logs the bitmaps it
# changes) and journal.c never calls alloc.c (freed clusters reach the
# global bitmap through the truncate log, which alloc.c flushes itself).
# So nothing is allowed; if commit ever has to free space, add exactly
# frozenset({"alloc.c", "journal.c"}) here, with the call that needs it.
ALLOWED_CYCLES = []


def module_of(member):
    """'build/fscore/libo2fs.a.p/super.c.o' -> 'super.c'."""
    base = os.path.basename(member)
    if base.endswith(".o"):
        base = base[:-2]
    return base


def objects_of(target):
    """What nm reads for target: a static library as it is; for a program,
    the object files meson keeps beside it (PROGRAM.p/*.o)."""
    if target.endswith(".a"):
        return [target]
    objdir = target + ".p"
    return sorted(os.path.join(objdir, f) for f in os.listdir(objdir) if f.endswith(".o"))


def read_symbols(target, nm):
    """Map each module to (defined globals, undefined symbols)."""
    out = subprocess.run([nm, "-P", "-A"] + objects_of(target), check=True,
                         capture_output=True, text=True).stdout
    mods = {}
    for line in out.splitlines():
        # "lib.a[member]: name TYPE [value size]", or "file.o: name TYPE ..."
        head, _, rest = line.partition(": ")
        if not rest:
            continue
        member = head.partition("[")[2].rstrip("]") if "[" in head else head
        fields = rest.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        defined, undefined = mods.setdefault(module_of(member), (set(), set()))
        if kind == "U":
            undefined.add(name)
        elif kind.isupper() and kind not in ("N",):
            # upper case: a global the linker can resolve against
            defined.add(name)
    return mods


def build_graph(mods):
    owner = {}
    for mod, (defined, _) in mods.items():
        for sym in defined:
            owner[sym] = mod
    graph = {mod: {} for mod in mods}
    for mod, (_, undefined) in mods.items():
        for sym in undefined:
            dst = owner.get(sym)
            if dst is not None and dst != mod:
                graph[mod].setdefault(dst, []).append(sym)
    return graph


def strongly_connected(graph):
    """Tarjan's algorithm, iterative; returns the components of size > 1."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = set()
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.add(n)
                    if n == node:
                        break
                if len(comp) > 1:
                    comps.append(frozenset(comp))
    return comps


def report(graph, comps):
    """Print each forbidden cycle with the calls that close it; return how many."""
    bad = [c for c in comps if c not in ALLOWED_CYCLES]
    for comp in bad:
        print("cycle among %d files: %s" % (len(comp), " ".join(sorted(comp))))
        for src in sorted(comp):
            for dst in sorted(graph[src]):
                if dst in comp:
                    syms = sorted(graph[src][dst])
                    more = " ..." if len(syms) > 4 else ""
                    print("  %s -> %s: %s%s" % (src, dst, " ".join(syms[:4]), more))
    return len(bad)


def self_test():
    """The detector must see a planted cycle and let an allowed one pass."""
    global ALLOWED_CYCLES
    saved = ALLOWED_CYCLES
    ALLOWED_CYCLES = [frozenset({"alloc.c", "journal.c"})]
    try:
        return self_test_graph()
    finally:
        ALLOWED_CYCLES = saved


def self_test_graph():
    graph = {
        "error.c": {},
        "meta.c": {"error.c": ["o2_corrupt"]},
        "cache.c": {"meta.c": ["o2_read_blocks"]},
        "alloc.c": {"journal.c": ["o2_trans_log"], "cache.c": ["o2_cache_get"]},
        "journal.c": {"alloc.c": ["o2_alloc_free"], "cache.c": ["o2_cache_get"]},
    }
    if report(graph, strongly_connected(graph)) != 0:
        print("self-test: the allowed pair was reported")
        return 1
    # a back edge from the bottom layer up into the cache
    graph["meta.c"]["cache.c"] = ["o2_cache_get"]
    if report(graph, strongly_connected(graph)) != 1:
        print("self-test: a planted cycle went unseen")
        return 1
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    nm = argv[2] if len(argv) == 3 else "nm"
    mods = read_symbols(argv[1], nm)
    if not mods:
        print("no objects found in %s" % argv[1])
        return 1
    graph = build_graph(mods)
    comps = strongly_connected(graph)
    edges = sum(len(v) for v in graph.values())
    print("%d modules, %d file->file call edges" % (len(graph), edges))
    for comp in comps:
        if comp in ALLOWED_CYCLES:
            print("allowed cycle: %s" % " <-> ".join(sorted(comp)))
    bad = report(graph, comps)
    if bad:
        print("FAIL: %d forbidden cycle(s)" % bad)
        return 1
    print("ok: no cycle but the allowed ones")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
