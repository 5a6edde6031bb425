#!/usr/bin/env python3
"""Renders the benchmarks' figures (JSON lines written by e2e/src/bench.rs) as a Markdown table,
and checks that the table is whole.

    scripts/bench-table.py REPORT            the table
    scripts/bench-table.py REPORT --check    the table, then exit 1 naming every row that is
                                             missing, unregistered, reported twice, or whose
                                             baseline, value or ratio is zero, infinite or NaN
    scripts/bench-table.py --self-test       the check's own tests (scripts/bench.sh runs them)
    scripts/bench-table.py --agree PREV LAST exit 1, naming each row, unless every row of two
                                             runs of a bench has its ratio within 5 % of the
                                             other's (scripts/bench.sh runs a bench again
                                             until two runs in a row agree)
    scripts/bench-table.py --annotate PREV LAST --runs N
                                             LAST's rows as JSON lines, each with its spread
                                             from PREV and the runs it took

FIGURES below is the one list of the rows a run must produce: a bench that adds a figure
registers it there, or the check fails on its rows. The check judges no time; a zero, an
infinity or a NaN is never a measurement but a bench that measured nothing (an empty window,
a baseline left at a constant 0, a division by it).
"""
import argparse
import json
import math
import sys

# Figure id -> (its stats, how many sizes in the full run, how many in the short run). Every
# size of a figure carries every one of its stats. The sizes are the benches' own
# (`bench::sizes` in e2e/benches/); a bench that changes how many it measures changes them here.
FIGURES = {
    # e2e/benches/relay.rs
    "relay-keystroke": (("p50", "p95", "p99"), 3, 3),
    "silent-connections": (("p99",), 1, 1),
    "relay-bulk": (("median",), 3, 3),
    "recording-bulk": (("median",), 3, 3),
    "idle-rss": (("total",), 3, 3),
    "idle-cpu": (("mean",), 3, 3),
    "watch-cpu": (("median",), 3, 3),
    "watch-rate": (("median",), 3, 3),
    # e2e/benches/activation.rs
    "activation": (("p50", "p95"), 3, 2),
    # e2e/benches/store.rs
    "store-list-sqlite": (("p99",), 3, 2),
    "store-get-sqlite": (("p99",), 3, 2),
    "store-list-postgres": (("p99",), 3, 2),
    "store-get-postgres": (("p99",), 3, 2),
    # e2e/benches/sweep.rs
    "sweep-pass-sqlite": (("p50",), 2, 1),
    "sweep-pass-postgres": (("p50",), 2, 1),
    # e2e/benches/sse.rs
    "sse-fanout": (("p99",), 4, 3),
    # e2e/benches/frontend.rs
    "page-weight": (("total",), 4, 4),
    "player-seek": (("p50", "max"), 3, 3),
    # e2e/benches/notify.rs
    "notify-change-sqlite": (("median",), 3, 3),
    "notify-change-postgres": (("median",), 3, 3),
    "notify-throughput-sqlite": (("mean",), 1, 1),
    "notify-throughput-postgres": (("mean",), 1, 1),
    # e2e/benches/export.rs
    "export-memory-sqlite": (("peak",), 2, 2),
    "export-memory-postgres": (("peak",), 2, 2),
    # e2e/benches/search.rs
    "search-index-sqlite": (("total",), 3, 2),
    "search-query-sqlite": (("p99",), 3, 2),
    "search-index-postgres": (("total",), 3, 2),
    "search-query-postgres": (("p99",), 3, 2),
    # e2e/benches/replicas.rs
    "replicas-idle-rss": (("total",), 3, 3),
    "replicas-idle-cpu": (("mean",), 3, 3),
    "replicas-keystroke": (("p50", "p99"), 3, 3),
    "replicas-sse": (("p99",), 3, 3),
}

# What e2e/src/bench.rs writes for the numbers JSON has none for; `null` is what reports
# written before it named them hold instead.
NON_FINITE = {"NaN": math.nan, "inf": math.inf, "-inf": -math.inf}


def number(v):
    """The float behind a report's number, NaN for `null` or anything else not a number."""
    if isinstance(v, str):
        return NON_FINITE.get(v, math.nan)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


def fmt(v):
    if v is None:
        return "-"
    v = number(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


# Two runs of a bench agree when each row's ratio is within this much of the other's, relative
# to the larger (issue #36: a figure repeated until two runs agree within 5 %).
AGREE_WITHIN = 0.05


def row_key(r):
    """What names a row across runs: its figure, stat and size, the size without the
    parenthesised note some benches add after it, which holds a measured number ("terminals=1000
    (72.9 KB each)") and so differs from run to run."""
    size = r.get("size")
    if isinstance(size, str):
        size = size.split(" (", 1)[0]
    return (r.get("id"), r.get("stat"), size)


def spread(a, b):
    """How far apart two ratios are, relative to the larger; NaN when either is not a number."""
    a, b = number(a), number(b)
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return math.nan
    top = max(abs(a), abs(b))
    return 0.0 if top == 0 else abs(a - b) / top


def disagreements(prev, last, within=AGREE_WITHIN):
    """Each row on which two runs of a bench do not agree (empty when they do): a ratio more
    than `within` from the other run's, or a row only one of the runs has."""
    before = {row_key(r): r for r in prev}
    found = []
    for r in last:
        p = before.pop(row_key(r), None)
        if p is None:
            found.append(f"{row_name(r)}: not in the previous run")
            continue
        s = spread(p.get("ratio"), r.get("ratio"))
        if not s <= within:
            found.append(
                f"{row_name(r)}: ratio {fmt(p.get('ratio'))}x, then {fmt(r.get('ratio'))}x "
                f"({fmt(100 * s)} % apart)"
            )
    found += [f"{row_name(p)}: not in the last run" for p in before.values()]
    return found


def annotate(prev, last, runs):
    """`last`'s rows, each with `runs` and its `spread` from the same row of `prev`."""
    before = {row_key(r): r for r in prev}
    out = []
    for r in last:
        p = before.get(row_key(r))
        s = spread(p.get("ratio"), r.get("ratio")) if p else math.nan
        out.append(dict(r, runs=runs, spread=None if math.isnan(s) else s))
    return out


def row_name(r):
    return " ".join(str(p) for p in (r.get("id"), r.get("stat"), r.get("size")) if p)


def problems(rows, figures=None):
    """Every reason the rows are not a whole, sound table (empty when they are), each naming
    the row or figure it is about."""
    figures = FIGURES if figures is None else figures
    found = []
    modes = {bool(r.get("short")) for r in rows}
    if len(modes) > 1:
        found.append("the report mixes rows of the short and the full run")
    short = modes == {True}
    # id -> stat -> the sizes it was reported at, in order
    seen = {}
    for r in rows:
        name = row_name(r)
        spec = figures.get(r.get("id"))
        if spec is None:
            found.append(
                f"{name}: not a registered figure (add {r.get('id')!r} to FIGURES in "
                "scripts/bench-table.py)"
            )
            continue
        if r.get("stat") not in spec[0]:
            found.append(
                f"{name}: stat {r.get('stat')!r} not registered for {r['id']} "
                f"(registered: {', '.join(spec[0])})"
            )
        for field in ("baseline", "value", "ratio"):
            v = number(r.get(field))
            if math.isnan(v):
                shown = "missing" if field not in r else "null" if r[field] is None else "NaN"
                found.append(f"{name}: {field} is {shown}")
            elif math.isinf(v):
                found.append(f"{name}: {field} is {fmt(v)}")
            elif v == 0:
                found.append(f"{name}: {field} is zero")
        sizes = seen.setdefault(r["id"], {}).setdefault(r.get("stat"), [])
        if r.get("size") in sizes:
            found.append(f"{name}: reported twice")
        sizes.append(r.get("size"))
    for fid, (stats, full, short_count) in figures.items():
        by_stat = seen.get(fid)
        if not by_stat:
            found.append(f"{fid}: missing (no row)")
            continue
        all_sizes = []
        for sizes in by_stat.values():
            all_sizes += [s for s in sizes if s not in all_sizes]
        for stat in stats:
            for size in all_sizes:
                if size not in by_stat.get(stat, []):
                    found.append(f"{fid} {stat} {size}: missing")
        want = short_count if short else full
        if len(all_sizes) != want:
            found.append(
                f"{fid}: {len(all_sizes)} sizes ({'; '.join(map(str, all_sizes))}), "
                f"{want} registered for the {'short' if short else 'full'} run"
            )
    return found


def read(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not a JSON line ({e}); e2e/src/bench.rs writes one a figure")
    return rows


def table(rows):
    print("| figure | stat | size | baseline | value | unit | ratio | target | verdict | runs, spread |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        verdict = {True: "met", False: "**missed**", None: "-"}[r.get("met")]
        baseline = fmt(r.get("baseline"))
        if r.get("baseline_is"):
            baseline += f" ({r['baseline_is']})"
        runs = "-"
        if r.get("runs"):
            s = r.get("spread")
            runs = f"{r['runs']}, " + ("-" if s is None else f"{fmt(100 * s)} %")
            if s is not None and s > AGREE_WITHIN:
                runs += " (unstable)"
        print(
            f"| {r.get('id')} | {r.get('stat')} | {r.get('size') or '-'} | {baseline} "
            f"| {fmt(r.get('value'))} | {r.get('unit')} | {fmt(r.get('ratio'))}x "
            f"| {r.get('target_text') or '-'} | {verdict} | {runs} |"
        )


def self_test():
    """The check on made-up reports: a whole one passes, and each way of not being whole fails
    naming the row."""
    figures = {
        "a": (("p50", "p99"), 3, 2),
        "b": (("total",), 1, 1),
    }

    def whole(short=True):
        sizes = ["n=1", "n=2"] if short else ["n=1", "n=2", "n=3"]
        rows = [
            {"id": "a", "stat": stat, "size": size, "baseline": 2.0, "value": 3.0,
             "ratio": 1.5, "short": short}
            for size in sizes
            for stat in ("p50", "p99")
        ]
        rows.append({"id": "b", "stat": "total", "size": "page", "baseline": 37.0,
                     "value": 300, "ratio": 8.1, "short": short})
        return rows

    def expect(rows, *wanted):
        got = problems(rows, figures)
        for w in wanted:
            if not any(w in p for p in got):
                raise AssertionError(f"expected a problem with {w!r}, got {got}")
        if not wanted and got:
            raise AssertionError(f"expected none, got {got}")

    expect(whole())
    expect(whole(short=False))
    # A JSON line as e2e/src/bench.rs writes it, read back as the check reads a report.
    expect([json.loads(json.dumps(r)) for r in whole()])

    rows = whole()
    del rows[3]
    expect(rows, "a p99 n=2: missing")
    expect([r for r in whole() if r["id"] != "b"], "b: missing (no row)")
    expect([r for r in whole() if r.get("size") != "n=2"], "a: 1 sizes (n=1), 2 registered for the short run")
    expect(whole(short=True)[:4] + whole(short=False)[6:], "mixes rows")
    expect(whole(short=False)[:4] + whole(short=False)[6:], "a: 2 sizes", "full run")

    for field in ("baseline", "value", "ratio"):
        for bad, shown in [(0.0, "zero"), (0, "zero"), ("inf", "inf"), ("-inf", "-inf"),
                           ("NaN", "NaN"), (None, "null"), (math.inf, "inf"), (math.nan, "NaN")]:
            rows = whole()
            rows[1][field] = bad
            expect(rows, f"a p99 n=1: {field} is {shown}")
        rows = whole()
        del rows[4][field]
        expect(rows, f"b total page: {field} is missing")
    # json.loads accepts the non-standard NaN and Infinity a report from elsewhere may hold.
    rows = whole()
    rows[0] = json.loads(json.dumps(rows[0]).replace("1.5", "Infinity"))
    expect(rows, "a p50 n=1: ratio is inf")

    rows = whole()
    rows.append(dict(rows[0]))
    expect(rows, "a p50 n=1: reported twice")
    rows = whole()
    rows.append({"id": "c", "stat": "p99", "size": "", "baseline": 1, "value": 1, "ratio": 1})
    expect(rows, "c p99: not a registered figure")
    rows = whole()
    rows[4]["stat"] = "p95"
    expect(rows, "b p95 page: stat 'p95' not registered", "b total page: missing")

    # Two runs agree within 5 % on every row, or the rows that do not are named.
    prev = whole()
    last = [dict(r) for r in whole()]
    last[0]["ratio"] = 1.5 * 1.04
    if disagreements(prev, last):
        raise AssertionError(f"4 % apart should agree: {disagreements(prev, last)}")
    last[1]["ratio"] = 1.5 * 1.06
    got = disagreements(prev, last)
    if len(got) != 1 or not got[0].startswith("a p99 n=1: ratio 1.5x, then 1.59x (5.66 % apart)"):
        raise AssertionError(f"6 % apart should not agree: {got}")
    last = [dict(r) for r in whole()]
    last[2]["ratio"] = math.nan
    if not any(g.startswith("a p50 n=2") for g in disagreements(prev, last)):
        raise AssertionError("a NaN ratio never agrees")
    got = disagreements(prev, whole()[1:])
    if got != ["a p50 n=1: not in the last run"]:
        raise AssertionError(f"a row only one run has: {got}")
    got = disagreements(whole()[1:], whole())
    if got != ["a p50 n=1: not in the previous run"]:
        raise AssertionError(f"a row only one run has: {got}")
    # A size's parenthesised note holds a measured number: the same row in both runs.
    prev, last = whole(), [dict(r) for r in whole()]
    prev[0]["size"], last[0]["size"] = "n=1 (72.9 KB each)", "n=1 (58.5 KB each)"
    if disagreements(prev, last):
        raise AssertionError(f"a size's note is not its name: {disagreements(prev, last)}")
    last = [dict(r) for r in whole()]
    last[0]["ratio"] = 3.0
    out = annotate(whole(), last, 3)
    if out[0]["runs"] != 3 or abs(out[0]["spread"] - 0.5) > 1e-9 or out[1]["spread"] != 0.0:
        raise AssertionError(f"annotate: {out[:2]}")
    # An annotated report is still whole, and renders.
    expect(out)

    # The real registry: every figure has stats and a size count for both runs.
    for fid, (stats, full, short) in FIGURES.items():
        if not (stats and full > 0 and short > 0):
            raise AssertionError(f"FIGURES[{fid!r}] registers no row")
    print(f"bench-table.py: self-test passed ({len(FIGURES)} figures registered)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every registered row is there, finite and non-zero")
    ap.add_argument("--self-test", action="store_true", help="test the check itself")
    ap.add_argument("--agree", nargs=2, metavar=("PREV", "LAST"),
                    help="exit 1 unless two runs of a bench agree within 5 %% on every row")
    ap.add_argument("--annotate", nargs=2, metavar=("PREV", "LAST"),
                    help="LAST's rows with their spread from PREV, as JSON lines")
    ap.add_argument("--runs", type=int, default=2, help="with --annotate: the runs it took")
    args = ap.parse_args()
    if args.agree:
        found = disagreements(read(args.agree[0]), read(args.agree[1]))
        for p in found:
            print(f"  not yet within {fmt(100 * AGREE_WITHIN)} %: {p}")
        sys.exit(1 if found else 0)
    if args.annotate:
        for r in annotate(read(args.annotate[0]), read(args.annotate[1]), args.runs):
            print(json.dumps(r))
        return
    if args.self_test:
        self_test()
        if not args.report:
            return
    if not args.report:
        ap.error("a report (JSON lines) is needed")
    rows = read(args.report)
    table(rows)
    if args.check:
        found = problems(rows)
        if found:
            print(f"\nthe figures in {args.report} are not whole:", file=sys.stderr)
            for p in found:
                print(f"  {p}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
