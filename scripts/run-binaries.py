#!/usr/bin/env python3
"""Runs test binaries a few at a time, each whole in one process, and reports like cargo test.

The end-to-end binaries share state inside a process (one test control plane, one Hydra, one
guardrail install per binary, kept in statics), so a runner that starts a process per test
(cargo-nextest, which runs the shared and server tests) would boot a control plane for every
test. This runs each binary as cargo test would (its tests in threads, sharing its fixtures),
several binaries at once: they share nothing but the machine's services, which every test
already uses through its own database, bucket, namespace and ports.

Jobs come on standard input, one per line, tab-separated:
    LABEL<TAB>ENV (space-separated NAME=VALUE, or -)<TAB>EXECUTABLE
Each binary runs in --cwd with the arguments after `--` (a test name filter, say). Its output is
printed whole when it ends, so outputs never interleave; the last line is the plain total
`N passed, N failed` over every binary's `test result:` lines, and the exit status is 1 when a
binary failed (or reported no result), else 0.

    scripts/run-binaries.py --jobs 2 --cwd e2e < jobs.tsv -- [TEST ARGS...]
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")


def parse_jobs(lines):
    jobs = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            sys.exit(f"run-binaries: line {n}: want LABEL<TAB>ENV<TAB>EXECUTABLE, got {line!r}")
        label, env, exe = parts
        extra = {}
        if env != "-":
            for kv in env.split():
                name, sep, value = kv.partition("=")
                if not sep:
                    sys.exit(f"run-binaries: line {n}: {kv!r} is not NAME=VALUE")
                extra[name] = value
        jobs.append((label, extra, exe))
    return jobs


def totals(output):
    """The passed/failed/ignored counts of every `test result:` line of one binary's output."""
    passed = failed = ignored = results = 0
    for line in output.splitlines():
        m = RESULT.match(line)
        if m:
            results += 1
            passed += int(m.group(1))
            failed += int(m.group(2))
            ignored += int(m.group(3))
    return passed, failed, ignored, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="binaries at once")
    ap.add_argument("--cwd", default=".", help="working directory of each binary")
    ap.add_argument("args", nargs="*", help="arguments for every binary (after --)")
    opts = ap.parse_args()
    jobs = parse_jobs(sys.stdin)
    if not jobs:
        sys.exit("run-binaries: no jobs on standard input")
    lock = threading.Lock()
    summary = []
    started = time.monotonic()

    def run(job):
        label, extra, exe = job
        env = dict(os.environ, **extra)
        t = time.monotonic()
        proc = subprocess.run(
            [exe, *opts.args],
            cwd=opts.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        took = time.monotonic() - t
        passed, failed, ignored, results = totals(proc.stdout)
        ok = proc.returncode == 0 and results > 0
        with lock:
            verdict = "ok" if ok else f"FAILED (exit {proc.returncode})"
            print(f"\n==> {label}: {verdict} in {took:.0f}s", flush=True)
            print(proc.stdout, end="" if proc.stdout.endswith("\n") else "\n", flush=True)
            summary.append((label, ok, took, passed, failed, ignored))

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        list(pool.map(run, jobs))

    print(f"\n==> {len(summary)} binaries in {time.monotonic() - started:.0f}s ({opts.jobs} at a time)")
    for label, ok, took, passed, failed, ignored in sorted(summary, key=lambda s: -s[2]):
        mark = "ok  " if ok else "FAIL"
        print(f"  {mark} {took:6.0f}s  {passed:4d} passed {failed:3d} failed {ignored:3d} ignored  {label}")
    bad = [s for s in summary if not s[1]]
    passed = sum(s[3] for s in summary)
    failed = sum(s[4] for s in summary) + sum(1 for s in bad if s[4] == 0)
    print(f"{passed} passed, {failed} failed", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
