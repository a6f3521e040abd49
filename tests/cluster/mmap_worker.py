#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One node's side of cluster-mmap: a file of the shared volume mapped
MAP_SHARED, driven line by line on stdin (the test tells each node when
another has stored, as a pipe between two processes would):

  store R N   store round R's pattern of node N through the mapping (no msync)
  check R N   read the file with pread() and through the mapping: both must
              hold round R's pattern of node N
  quit

Each answers one line: "ok", or "bad <what>".
Usage: mmap_worker.py PATH SIZE
"""
import mmap
import os
import sys

PAGE = 4096


def pattern(rnd, node, size):
    """Round rnd of node: every page says who stored it, and when."""
    out = bytearray()
    for p in range(size // PAGE):
        tag = f"round {rnd:05d} node {node} page {p:04d}|".encode()
        out += (tag * (PAGE // len(tag) + 1))[:PAGE]
    return bytes(out)


def main():
    path, size = sys.argv[1], int(sys.argv[2])
    fd = os.open(path, os.O_RDWR)
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        want = pattern(int(words[1]), int(words[2]), size)
        if words[0] == "store":
            # page by page, as a program's stores land
            for p in range(0, size, PAGE):
                m[p:p + PAGE] = want[p:p + PAGE]
            answer = "ok"
        else:
            got_read = os.pread(fd, size, 0)
            got_map = m[:size]
            if got_read != want:
                bad = next(i for i in range(size) if got_read[i:i + 1] != want[i:i + 1])
                answer = f"bad read() at {bad}: {got_read[bad - bad % PAGE:][:40]!r}"
            elif got_map != want:
                bad = next(i for i in range(size) if got_map[i:i + 1] != want[i:i + 1])
                answer = f"bad mapping at {bad}: {got_map[bad - bad % PAGE:][:40]!r}"
            else:
                answer = "ok"
        print(answer, flush=True)
    m.close()
    os.close(fd)


if __name__ == "__main__":
    main()
