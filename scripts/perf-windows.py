#!/usr/bin/env python3
"""What the machine ran during a figure's slowest samples (e2e/benches/relay/tail.rs).

    scripts/perf-windows.py DIR/NAME [TOP]

reads DIR/NAME.perf.data (perf record -a, CLOCK_REALTIME stamps) and each DIR/NAME.SET.windows
(start, end in CLOCK_REALTIME seconds, duration in ms), and prints, for each set: the CPU
samples taken inside its windows by process and by function, as shares, next to the same
shares over the whole profile. A process or function whose share inside the slow windows is
well above its share overall is what the tail waited on; two idle CPUs inside the windows mean
the wait was not for a CPU.

A process is named by the program most of its user-space samples ran in (the binary, not the
thread: every tokio runtime names its threads alike).
"""
import collections
import glob
import re
import subprocess
import sys

LINE = re.compile(
    r"^\s*(?P<comm>.+?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<time>\d+\.\d+):"
    r"\s+(?:\S+\s+)?(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$"
)


def samples(perf_data):
    out = subprocess.run(
        ["perf", "script", "-i", perf_data, "-F", "comm,pid,tid,cpu,time,ip,sym,dso", "--ns"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            rows.append(m.groupdict())
    return rows


def program(dso):
    name = dso.rsplit("/", 1)[-1]
    if name.startswith("[") or ".so" in name:
        return None
    return name


def names(rows):
    """pid -> the program most of its user-space samples ran in, else its thread's name."""
    seen = collections.defaultdict(collections.Counter)
    for r in rows:
        p = program(r["dso"])
        if p:
            seen[r["pid"]][p] += 1
    named = {pid: c.most_common(1)[0][0] for pid, c in seen.items()}
    for r in rows:
        named.setdefault(r["pid"], "idle" if r["pid"] == "0" else r["comm"])
    return named


def shares(rows, key):
    c = collections.Counter(key(r) for r in rows)
    total = sum(c.values()) or 1
    return {k: v / total for k, v in c.items()}, total


def report(title, inside, everything, key, top):
    mine, n = shares(inside, key)
    base, _ = shares(everything, key)
    print(f"  {title} ({n} samples inside the windows):")
    for k, v in sorted(mine.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {100 * v:5.1f} %  (overall {100 * base.get(k, 0):5.1f} %)  {k}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    base = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    rows = samples(base + ".perf.data")
    if not rows:
        sys.exit(f"{base}.perf.data holds no samples perf script could read")
    named = names(rows)
    for r in rows:
        r["t"] = float(r["time"])
        r["proc"] = named[r["pid"]]
    t0, t1 = rows[0]["t"], rows[-1]["t"]
    print(f"{base}.perf.data: {len(rows)} samples over {t1 - t0:.1f} s")
    for path in sorted(glob.glob(base + ".*.windows")):
        windows = []
        for line in open(path):
            parts = line.split()
            if len(parts) == 3:
                windows.append((float(parts[0]), float(parts[1]), float(parts[2])))
        inside = [r for r in rows if any(a <= r["t"] <= b for a, b, _ in windows)]
        missed = sum(1 for a, b, _ in windows if not t0 <= a <= t1)
        span = sum(b - a for a, b, _ in windows)
        print(f"\n{path}: {len(windows)} windows, {1000 * span:.1f} ms in all"
              + (f", {missed} outside the profile" if missed else ""))
        for a, b, ms in windows:
            w = [r for r in rows if a <= r["t"] <= b]
            c = collections.Counter(r["proc"] for r in w).most_common(3)
            print(f"  {ms:8.3f} ms: " + ", ".join(f"{p} {n}" for p, n in c))
        report("by process", inside, rows, lambda r: r["proc"], top)
        report("by function", inside, rows, lambda r: f'{r["proc"]}: {r["sym"]}', top)


if __name__ == "__main__":
    main()
