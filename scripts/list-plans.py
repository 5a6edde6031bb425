#!/usr/bin/env python3
"""SQLite's plans for the cards' list filters, on a scratch database of the store bench's shape.

Builds a 100,000-session table with the server's migrations (server/migrations/sqlite), then
prints, for the "in progress" and "reviews due" lists, the plan and time of the query written
plainly and of the one `server/src/store/list.rs` writes (the environment, and for reviews due
the states, as expressions no index serves), and how long Python's own sqlite3 takes to read a
page of 201 rows of every column: the comparison BENCHMARKS.md (store fix 7) cites. Python's
bundled SQLite may be older than the server's; the plans are the planner's, without statistics
in both.

    python3 scripts/list-plans.py [sessions]
"""

import glob
import os
import sqlite3
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN_PROGRESS = "('Approved', 'Activating', 'Active', 'Ending')"
REVIEWABLE = "('Ended', 'Failed')"


def build(path, n):
    """The bench's shape: two thirds Flight (denied, expired, one in 5,000 a failed broken
    glass), a third Ground (withdrawn), the newest 12 live (waiting, or approved on Ground)."""
    db = sqlite3.connect(path)
    for f in sorted(glob.glob(os.path.join(ROOT, "server/migrations/sqlite/*.sql"))):
        db.executescript(open(f).read())
    rows = []
    for i in range(n):
        flight = i % 3 != 0
        if i + 12 >= n:
            state = "PendingApproval" if flight else "Approved"
        elif flight and i % 5000 == 5:
            state = "Failed"
        elif flight:
            state = "Expired" if i % 4 == 0 else "Denied"
        else:
            state = "Withdrawn"
        broken = "x" if state == "Failed" else None
        approver = "bob" if state == "Denied" else None
        requester = "alice" if i % 10 == 0 else "person%d" % (i % 50)
        created = "2026-%02d-01 00:00:00.0+00:00" % (1 + i * 11 // n)
        env = "flight" if flight else "ground"
        rows.append((i.to_bytes(16, "big"), env, env, "payments", "worker-%d" % (i % 97), None,
                     "live", "investigating", None, 30, 0, requester, approver, broken, state,
                     None, None, None, None, 1, created) + (None,) * 9 + (0,) + (None,) * 10)
    columns = len(db.execute("SELECT * FROM breakglass_sessions LIMIT 0").description)
    assert all(len(r) == columns for r in rows), columns
    db.executemany("INSERT INTO breakglass_sessions VALUES (%s)" % ",".join("?" * columns), rows)
    db.commit()
    return db


def timed(db, sql, rounds=20):
    plan = [r[3] for r in db.execute("EXPLAIN QUERY PLAN " + sql)]
    t = time.perf_counter()
    for _ in range(rounds):
        got = db.execute(sql).fetchall()
    return (time.perf_counter() - t) * 1000 / rounds, len(got), plan


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as d:
        db = build(os.path.join(d, "plans.db"), n)
        print("SQLite %s, %d sessions" % (sqlite3.sqlite_version, n))
        page = " ORDER BY id DESC LIMIT 201"
        base = "SELECT * FROM breakglass_sessions WHERE 1 = 1"
        due = " AND glass_broken_by IS NOT NULL AND review_at IS NULL"
        for name, sql in [
            ("in progress, plain", base + " AND environment = 'ground' AND state IN "
             + IN_PROGRESS + page),
            ("in progress, as listed", base + " AND environment || '' = 'ground' AND state IN "
             + IN_PROGRESS + page),
            ("reviews due, plain", base + " AND environment = 'flight'" + due
             + " AND state IN " + REVIEWABLE + page),
            ("reviews due, as listed", base + " AND environment || '' = 'flight'" + due
             + " AND state || '' IN " + REVIEWABLE + page),
        ]:
            ms, rows, plan = timed(db, sql)
            print("  %-24s %8.2f ms  %3d rows  %s" % (name, ms, rows, "; ".join(plan)))
        ms, rows, _ = timed(db, "SELECT * FROM breakglass_sessions" + page, rounds=200)
        print("  Python's sqlite3 reading %d rows of every column: %.2f ms" % (rows, ms))


if __name__ == "__main__":
    main()
