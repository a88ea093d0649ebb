import sys, statistics, collections
def load(f):
    d=collections.defaultdict(dict)
    for line in open(f):
        p=line.split()
        if len(p)>=6 and p[0].isdigit():
            d[int(p[0])][p[3]]=(float(p[1]), float(p[5]))
    return d
def name(n):
    return f"{n>>20} MiB" if n>=1<<20 else f"{n>>10} KiB" if n>=1024 else f"{n} B"
files=sys.argv[2:]; other=sys.argv[1]
runs=[load(f) for f in files]
copy = 'concord-copy:auto' in runs[0][4]
hdr="| size | concord µs (median) | %s / concord, per run → median |%s concord %% of roofline, per run → median |" % (other, " old copy path / concord, median |" if copy else "")
print(hdr); print("|---:|---:|---|"+("---:|" if copy else "")+"---|")
for n in sorted(runs[0]):
    c=[r[n]['concord:auto'][0] for r in runs]
    m=[r[n]['mpi'][0]/r[n]['concord:auto'][0] for r in runs]
    rf=[r[n]['concord:auto'][1] for r in runs]
    row=f"| {name(n)} | {statistics.median(c):.1f} | {' / '.join(f'{x:.2f}' for x in m)} → {statistics.median(m):.2f} |"
    if copy:
        cp=[r[n]['concord-copy:auto'][0]/r[n]['concord:auto'][0] for r in runs]
        row+=f" {statistics.median(cp):.2f} |"
    row+=f" {' / '.join(f'{x:.0f}' for x in rf)} → {statistics.median(rf):.0f} |"
    print(row)
