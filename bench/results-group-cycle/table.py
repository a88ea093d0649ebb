"""Per round: the grouped allreduce's median time before and after, and the CNN's samples/s,
with after / before (run.sh's outputs in DIR), then the medians of the ratios.
    python3 bench/results-group-cycle/table.py DIR REPEATS"""
import re
import statistics
import sys


def read(path):
    text = open(path).read()
    latency = re.search(r"grouped_allreduce: median (\d+) us", text)
    rate = re.findall(r"samples/s (\d+)", text)
    if not latency or not rate:
        sys.exit(f"{path}: no grouped_allreduce or samples/s line (the run failed?)")
    return int(latency[1]), int(rate[-1])


def main(d, repeats):
    print("| round | grouped µs, before → after | before / after | CNN samples/s, before → after"
          " | after / before |")
    print("|---:|---|---:|---|---:|")
    speedups, gains = [], []
    for r in range(1, repeats + 1):
        (lb, sb), (la, sa) = read(f"{d}/before-{r}.txt"), read(f"{d}/after-{r}.txt")
        speedups.append(lb / la)
        gains.append(sa / sb)
        print(f"| {r} | {lb} → {la} | {lb / la:.1f} | {sb} → {sa} | {sa / sb:.2f} |")
    print(f"| median | | {statistics.median(speedups):.1f} | | {statistics.median(gains):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
