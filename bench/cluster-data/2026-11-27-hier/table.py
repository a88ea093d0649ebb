"""Best flat algorithm's time over Hierarchical's, per size, per run and median, with the
library's defaults, placed by the scheduler and with a core per host (run.sh's outputs in
DIR), and how many per-size runs reach the issue's 1.35. The table is 2026-11-25-pieces'.

    python3 table.py DIR REPEATS
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from records import load_script  # noqa: E402

if __name__ == "__main__":
    load_script("2026-11-25-pieces").main(
        sys.argv[1], int(sys.argv[2]), {"default": "scheduler", "default-c": "a core per host"})
