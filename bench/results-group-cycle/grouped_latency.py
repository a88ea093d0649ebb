"""Time of one concord.grouped_allreduce of the Fashion-MNIST CNN's eight gradient
tensors (57 k floats, the example's model), as a training step issues it: median and
90th percentile over 400 calls after 50 untimed ones. Run under mpiexec; rank 0 prints.
    mpiexec.mpich -n 2 -bind-to core python3 bench/results-group-cycle/grouped_latency.py"""
import time

import numpy as np

import concord

SHAPES = [(3, 3, 1, 16), (16,), (3, 3, 16, 32), (32,), (800, 64), (64,), (64, 10), (10,)]
arrays = [np.ones(s, np.float32) for s in SHAPES]
names = [f"grad{i}" for i in range(len(arrays))]
for _ in range(50):
    concord.grouped_allreduce(arrays, names=names)
times = []
for _ in range(400):
    t = time.perf_counter()
    concord.grouped_allreduce(arrays, names=names)
    times.append(time.perf_counter() - t)
if concord.rank() == 0:
    print(f"grouped_allreduce: median {np.median(times) * 1e6:.0f} us, "
          f"p90 {np.percentile(times, 90) * 1e6:.0f} us")
