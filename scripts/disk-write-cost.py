#!/usr/bin/env python3
"""The kernel's CPU cost of writing new files the way the local recording store does.

Writes TOTAL_MB in 4 MiB files (a recording segment's size), each synced, once through the
page cache and once with O_DIRECT, in a directory on the disk given (default: this
repository's), and prints the system CPU time per MB of each. BENCHMARKS.md ("Relay and
recording", fix 16) quotes it; it is why the store writes large segments with O_DIRECT
(server/src/recording/local/uncached.rs).

    python3 scripts/disk-write-cost.py [DIR] [TOTAL_MB]
"""
import mmap
import os
import resource
import sys
import tempfile

SEGMENT = 4 * 1024 * 1024


def sys_seconds():
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def write_files(directory, count, flags, buf):
    for i in range(count):
        path = os.path.join(directory, f"seg-{i}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o600)
        try:
            os.write(fd, buf)
            os.fsync(fd)
        finally:
            os.close(fd)
    for i in range(count):
        os.unlink(os.path.join(directory, f"seg-{i}"))


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = sys.argv[1] if len(sys.argv) > 1 else here
    total_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    count = max(1, total_mb * 1024 * 1024 // SEGMENT)
    buf = mmap.mmap(-1, SEGMENT)  # page-aligned, as O_DIRECT wants
    buf.write(bytes(range(251)) * (SEGMENT // 251) + bytes(SEGMENT % 251))
    mb = count * SEGMENT / 1e6
    with tempfile.TemporaryDirectory(dir=target) as d:
        for name, flags in (("buffered", 0), ("O_DIRECT", os.O_DIRECT)):
            before = sys_seconds()
            try:
                write_files(d, count, flags, buf)
            except OSError as e:
                print(f"{name}: not possible here ({e})")
                continue
            print(f"{name}: {(sys_seconds() - before) * 1000 / mb:.2f} ms of system CPU per MB "
                  f"({count} files of 4 MiB in {d})")


if __name__ == "__main__":
    main()
