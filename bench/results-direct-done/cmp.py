import sys, statistics, collections
def load(path):
    rows = collections.defaultdict(dict)
    for line in open(path):
        p = line.split()
        if len(p) >= 5 and p[0].isdigit():
            rows[int(p[0])][p[3]] = float(p[1])
    return rows
def pr(v): return ' / '.join(f'{x:.2f}' for x in v) + f' -> {statistics.median(v):.2f}'
d, n_runs, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
for m in ['mpich', 'ompi']:
    runs = [load(f'{d}/{m}-{r}.txt') for r in range(1, n_runs + 1)]
    print(m)
    for n in sorted(runs[0]):
        o = [r[n][old] / r[n][new] for r in runs]
        mp = [r[n]['mpi'] / r[n][new] for r in runs]
        print(f'{n:>9} old/new {pr(o)}   mpi/new {pr(mp)}   new us {statistics.median(r[n][new] for r in runs):.2f}')
