#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""One SQLite writer for bench/bench.py's database rows.

    sqlite_writer.py DB SECONDS START_AT [ID]

Opens DB (made by bench.py, which chose its journal mode: the mode is kept
in the file for WAL, and rollback is SQLite's default), sets
synchronous=FULL, waits until the wall clock reaches START_AT (so that
several writers start together), then commits one small INSERT per
transaction for SECONDS seconds.  Prints one JSON line: {"tx": commits,
"seconds": elapsed, "busy": retries after SQLITE_BUSY}.
"""

import json
import os
import sqlite3
import sys
import time


def main(argv):
    db, seconds, start_at = argv[1], float(argv[2]), float(argv[3])
    ident = int(argv[4]) if len(argv) > 4 else 0
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    con.execute("PRAGMA synchronous=FULL")
    mode = con.execute("PRAGMA journal_mode").fetchone()[0]
    payload = os.urandom(100)
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    tx = busy = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT INTO t(writer, v) VALUES (?, ?)", (ident, payload))
            con.execute("COMMIT")
            tx += 1
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            busy += 1
            if con.in_transaction:
                con.execute("ROLLBACK")
    elapsed = time.monotonic() - t0
    con.close()
    print(json.dumps({"tx": tx, "seconds": round(elapsed, 4), "busy": busy, "mode": mode}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
