#!/usr/bin/env python3
"""Removes the older builds of each test and bench executable in a cargo target directory.

Every source change gives each test binary a new hash, and cargo never removes the old one:
on this machine's small disk, a few runs of the suite left 25 GB of test binaries nobody
would run again. For each executable name (the part before `-<hash>`) in DEPS this keeps the
newest file and removes the others; libraries and build metadata (files with an extension)
are left alone.

    scripts/prune-target.py TARGET/debug/deps
"""

import os
import re
import sys

NAME = re.compile(r"^(?P<stem>.+)-[0-9a-f]{16}$")


def main() -> int:
    deps = sys.argv[1]
    if not os.path.isdir(deps):
        return 0
    newest: dict[str, list[os.DirEntry]] = {}
    for entry in os.scandir(deps):
        m = NAME.match(entry.name)
        if not m or not entry.is_file() or not os.access(entry.path, os.X_OK):
            continue
        newest.setdefault(m.group("stem"), []).append(entry)
    freed = removed = 0
    for entries in newest.values():
        entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
        for old in entries[1:]:
            freed += old.stat().st_size
            os.remove(old.path)
            removed += 1
    print(f"prune-target: removed {removed} older test binaries ({freed / 1e9:.1f} GB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
