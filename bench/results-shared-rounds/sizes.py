"""Single-copy round sizes on shared buffers, from runs with bench/results-shared-rounds/round.diff:
per size, each round size's % of the same-run roofline (per run → median) and the default's
(1 MiB rounds) time over its time (per run → median; above 1: the round size was faster).

    python3 sizes.py run-1.txt run-2.txt run-3.txt run-4.txt run-5.txt
"""
import pathlib
import sys

# The records' loader and formatting, shared with the other result folders.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "results-rounds"))
import table as rounds_table  # noqa: E402

load, per_run, size_name = rounds_table.load, rounds_table.per_run, rounds_table.size_name

DEFAULT = "concord-shared:auto"
VARIANTS = [("2 MiB", "concord-shared-r2:auto"), ("4 MiB", "concord-shared-r4:auto"),
            ("whole message", "concord-shared-r64:auto")]


def main(files):
    runs = [load(f) for f in files]
    print("| size | 1 MiB rounds (default): % of roofline | "
          + " | ".join(f"{name}: % of roofline | default / {name}" for name, _ in VARIANTS) + " |")
    print("|---:|---|" + "---|---|" * len(VARIANTS))
    for n in sorted(runs[0]):
        row = f"| {size_name(n)} | {per_run([r[n][DEFAULT][1] for r in runs], 0)} |"
        for _, impl in VARIANTS:
            row += (f" {per_run([r[n][impl][1] for r in runs], 0)} |"
                    f" {per_run([r[n][DEFAULT][0] / r[n][impl][0] for r in runs], 2)} |")
        print(row)


if __name__ == "__main__":
    main(sys.argv[1:])
