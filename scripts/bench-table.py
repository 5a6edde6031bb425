#!/usr/bin/env python3
"""Renders the benchmarks' figures (JSON lines written by e2e/src/bench.rs) as a Markdown table.

With --expect ID..., fails (exit 1) when one of those figures is missing from the file, so the
short mode of scripts/bench.sh catches a benchmark that stopped producing a figure.
"""
import argparse
import json
import sys


def fmt(v):
    if v is None:
        return "-"
    if v == float("inf"):
        return "inf"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--expect", nargs="*", default=[])
    args = ap.parse_args()
    rows = []
    with open(args.report) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    print("| figure | stat | size | baseline | value | unit | ratio | target | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        verdict = {True: "met", False: "**missed**", None: "-"}[r.get("met")]
        baseline = fmt(r["baseline"])
        if r.get("baseline_is"):
            baseline += f" ({r['baseline_is']})"
        print(
            f"| {r['id']} | {r['stat']} | {r['size'] or '-'} | {baseline} | {fmt(r['value'])} "
            f"| {r['unit']} | {fmt(r['ratio'])}x | {r.get('target_text') or '-'} | {verdict} |"
        )
    seen = {r["id"] for r in rows}
    missing = [e for e in args.expect if e not in seen]
    if missing:
        print(f"figures missing from {args.report}: {', '.join(missing)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
