#!/usr/bin/env python3
"""Memory and throughput of concord.data's readers against loading everything.

    python3 bench/data_readers.py make DIR [--mb 300]      # writes the data set (not committed)
    mpiexec.mpich -n 2 python3 bench/data_readers.py read DIR --format npy --path reader
    mpiexec.mpich -n 2 python3 bench/data_readers.py read DIR --format npy --path load-all

`read` prints one JSON line (rank 0) with every rank's resident memory before
reading (after imports), its peak while reading (VmHWM), the bytes of its share,
and the seconds the read took. "reader" is concord.data.open(...).read();
"load-all" reads the whole data set on every rank (what a script does before the
transparent mode shards it) and keeps the same share. `all DIR` runs every
format and path at 2 ranks, interleaved, --repeat times, and prints a table.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

ROW = 784  # float32 features a sample (an MNIST image's pixels)


def make(d, mb, csv_mb):
    os.makedirs(d, exist_ok=True)
    n = mb * (1 << 20) // (ROW * 4)
    rng = np.random.default_rng(0)
    x = rng.random((n, ROW), dtype=np.float32)
    y = (np.arange(n) % 10).astype(np.uint8)
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)
    np.savez(os.path.join(d, "d.npz"), x=x, y=y)
    head = bytes([0, 0, 0x0D, 2]) + n.to_bytes(4, "big") + ROW.to_bytes(4, "big")
    with open(os.path.join(d, "x-idx2-float"), "wb") as f:
        f.write(head)
        f.write(x.astype(">f4").tobytes())
    with open(os.path.join(d, "x-idx2-float"), "rb") as f, \
            gzip.open(os.path.join(d, "x-idx2-float.gz"), "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g, 16 << 20)
    import h5py
    with h5py.File(os.path.join(d, "d.h5"), "w") as f:
        f.create_dataset("x", data=x, chunks=(256, ROW))
        f.create_dataset("y", data=y)
    rows = csv_mb * (1 << 20) // (ROW * 9)  # about 9 bytes a value as text
    np.savetxt(os.path.join(d, "d.csv"), np.column_stack([x[:rows, :ROW], y[:rows]]),
               fmt="%.6f", delimiter=",", header=",".join([f"f{i}" for i in range(ROW)] + ["y"]),
               comments="")
    print(f"{d}: {n} samples of {ROW} float32 ({mb} MiB); CSV: {rows} samples")


SOURCES = {  # format: (file, open() arguments)
    "npy": ("x.npy", {"label": "y.npy"}),
    "npz": ("d.npz", {"features": "x", "label": "y"}),
    "idx": ("x-idx2-float", {}),
    "idx-gzip": ("x-idx2-float.gz", {"format": "idx"}),
    "hdf5": ("d.h5", {"features": "x", "label": "y"}),
    "csv": ("d.csv", {"label": "y"}),
}


def load_all(fmt, path):
    """The whole data set in memory, as a script loads it without concord.data."""
    if fmt == "npy":
        return np.load(path)
    if fmt == "npz":
        return np.load(path)["x"]
    if fmt in ("idx", "idx-gzip"):
        with (gzip.open if fmt == "idx-gzip" else open)(path, "rb") as f:
            data = f.read()
        return np.frombuffer(data, ">f4", offset=12).reshape(-1, ROW).astype(np.float32)
    if fmt == "hdf5":
        import h5py
        with h5py.File(path, "r") as f:
            return f["x"][:]
    if fmt == "csv":
        return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)[:, :ROW]
    raise ValueError(fmt)


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def read(d, fmt, how):
    import concord
    from concord import data as cdata
    concord.init()
    rank, size = concord.rank(), concord.size()
    name, kwargs = SOURCES[fmt]
    path = os.path.join(d, name)
    concord.barrier()
    before = status_kib("VmRSS")
    start = time.perf_counter()
    if how == "reader":
        x, _ = cdata.open(path, **kwargs).read()
    else:
        x = load_all(fmt, path)[rank::size].copy()
    seconds = time.perf_counter() - start
    concord.barrier()
    row = [before, status_kib("VmHWM"), x.nbytes // 1024, int(seconds * 1e6)]
    rows = concord.allgather(np.array([row], np.int64))
    if rank == 0:
        print(json.dumps({"format": fmt, "path": how, "ranks": size, "file_mib":
                          os.path.getsize(path) / 2**20, "per_rank": [
                              {"rss_before_mib": r[0] / 1024, "peak_mib": r[1] / 1024,
                               "share_mib": r[2] / 1024, "seconds": r[3] / 1e6} for r in rows]}))


def run_all(d, repeat, ranks, formats):
    results = []
    for _ in range(repeat):
        for fmt in formats:
            for how in ("reader", "load-all"):
                p = subprocess.run(["mpiexec.mpich", "-n", str(ranks), sys.executable, __file__,
                                    "read", d, "--format", fmt, "--path", how],
                                   capture_output=True, text=True, check=True)
                results.append(json.loads(p.stdout.strip().splitlines()[-1]))
                print(p.stdout.strip(), flush=True)
    print("\n| format | path | file MiB | share MiB | peak - before, MiB (max rank) | "
          "read s (median) | MB/s (file / slowest rank) |\n|---|---|---:|---:|---:|---:|---:|")
    for fmt in formats:
        for how in ("reader", "load-all"):
            rs = [r for r in results if r["format"] == fmt and r["path"] == how]
            grow = max(max(p["peak_mib"] - p["rss_before_mib"] for p in r["per_rank"]) for r in rs)
            secs = float(np.median([max(p["seconds"] for p in r["per_rank"]) for r in rs]))
            share = rs[0]["per_rank"][0]["share_mib"]
            print(f"| {fmt} | {how} | {rs[0]['file_mib']:.0f} | {share:.0f} | {grow:.0f} | "
                  f"{secs:.2f} | {rs[0]['file_mib'] * 1.048576 / secs:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("--mb", type=int, default=300)
    m.add_argument("--csv-mb", type=int, default=60)
    r = sub.add_parser("read")
    r.add_argument("dir")
    r.add_argument("--format", choices=sorted(SOURCES), required=True)
    r.add_argument("--path", choices=("reader", "load-all"), required=True)
    a = sub.add_parser("all")
    a.add_argument("dir")
    a.add_argument("--repeat", type=int, default=3)
    a.add_argument("--ranks", type=int, default=2)
    a.add_argument("--formats", default=",".join(SOURCES), help="comma-separated")
    args = ap.parse_args()
    if args.cmd == "make":
        make(args.dir, args.mb, args.csv_mb)
    elif args.cmd == "read":
        read(args.dir, args.format, args.path)
    else:
        run_all(args.dir, args.repeat, args.ranks, args.formats.split(","))


if __name__ == "__main__":
    main()
