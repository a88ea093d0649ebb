#!/usr/bin/env python3
"""Same-run ratios from concord-bench text outputs; medians over runs."""
import re, sys, statistics
def parse(path):
    rows = {}
    for line in open(path):
        m = re.match(r'^(\d+)\s+([\d.]+)\s+[\d.]+\s+(?:Pass\s+|FAIL\s+)?(\S+)', line)
        if m:
            rows.setdefault(int(m.group(1)), {})[m.group(3)] = float(m.group(2))
    return rows
mode = sys.argv[1]
runs = [parse(p) for p in sys.argv[2:]]
sizes = sorted(set().union(*[r.keys() for r in runs]))
def col(vals, fmt):
    return ' / '.join(fmt.format(v) for v in vals) + ' | ' + fmt.format(statistics.median(vals))
C='concord:auto'
if mode == 'final':
    print("| bytes | concord µs, median | MPI / concord, per run \\| median | copy path / concord (same run) | % of roofline, concord | % of roofline, copy path |")
    print("|---:|---:|---|---:|---|---:|---|---:|---|---:|")
    for s in sizes:
        rs=[r[s] for r in runs if s in r]
        print(f"| {s} | {statistics.median([r[C] for r in rs]):.1f} | " +
              col([r['mpi']/r[C] for r in rs], '{:.2f}') + ' | ' +
              col([r['concord-copy:auto']/r[C] for r in rs], '{:.2f}') + ' | ' +
              col([100*r['roofline']/r[C] for r in rs], '{:.0f}') + ' | ' +
              col([100*r['roofline']/r['concord-copy:auto'] for r in rs], '{:.0f}') + ' |')
else:
    print("| bytes | concord µs, median | MPI / concord, per run \\| median | % of roofline, per run \\| median |")
    print("|---:|---:|---|---:|---|---:|")
    for s in sizes:
        rs=[r[s] for r in runs if s in r]
        print(f"| {s} | {statistics.median([r[C] for r in rs]):.1f} | " +
              col([r['mpi']/r[C] for r in rs], '{:.2f}') + ' | ' +
              col([100*r['roofline']/r[C] for r in rs], '{:.0f}') + ' |')
