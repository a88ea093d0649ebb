"""Table of run.sh's outputs: fused / flat and per-tensor MPI / fused, per run and
median, for large tensors packed and alone (or, named by the second argument, whatever
the records' third name field varies: 2026-11-27-bert-shapes passes "shape").
    python3 bench/cluster-data/2026-11-25-in-place/table.py OUTDIR [THIRD_COLUMN]"""
import pathlib
import re
import statistics
import sys

out = pathlib.Path(sys.argv[1])
config_column = sys.argv[2] if len(sys.argv) > 2 else "large tensors"
runs = {}  # (link, model, config) -> [(fused/flat, mpi/fused, fused ms)]
for f in sorted(out.glob("*-*-*-*.txt")):
    link, model, config, r = f.stem.rsplit("-", 3)
    text = f.read_text()
    m = re.search(r"# fused/flat = ([\d.]+), mpi-per-tensor/fused = ([\d.]+)", text)
    fused = re.search(r"^\s*\d+\s+([\d.]+)\s.*\sfused\s", text, re.M)
    if not m or not fused:
        sys.exit(f"{f}: no result line (the run failed?)")
    runs.setdefault((link, model, config), []).append(
        (int(r), float(m[1]), float(m[2]), float(fused[1]) / 1000))
print(f"| link | model | {config_column} | fused / flat, per run → median |"
      " per-tensor MPI / fused, per run → median | fused ms, median |")
print("|---|---|---|---|---|---:|")
for (link, model, config), rs in sorted(runs.items()):
    rs.sort()
    cell = lambda k: " / ".join(f"{x[k]:.2f}" for x in rs) + \
        f" → {statistics.median(x[k] for x in rs):.2f}"
    print(f"| {link} | {model} | {config} | {cell(1)} | {cell(2)} |"
          f" {statistics.median(x[3] for x in rs):.1f} |")
