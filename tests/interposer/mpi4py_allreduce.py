"""comm.Allreduce of numpy arrays from mpi4py, checked against numpy; run under
mpiexec with libconcord_mpi preloaded (the verbose report then shows the calls
taken). Prints 'skipped: ...' and exits 77 where mpi4py or numpy is missing (both
come with scripts/install-python, which CI runs after the first ctest stage) or
mpi4py was built for another MPI than EXPECT_MPI (MPICH or OpenMPI)."""
import os
import sys

try:
    import mpi4py
    import numpy as np
except ImportError as e:
    print(f"skipped: mpi4py test: mpi4py or numpy is not installed ({e})")
    sys.exit(77)


def linked_mpi_flavor():
    """The MPI mpi4py's extension links, from its file (importing it under another MPI's
    libmpi, which the preload brings in, crashes in its module init)."""
    folder = os.path.dirname(mpi4py.__file__)
    for name in os.listdir(folder):
        if name.startswith("MPI.") and name.endswith(".so"):
            with open(os.path.join(folder, name), "rb") as f:
                image = f.read()
            if b"libmpich.so" in image:
                return "MPICH"
            if b"libmpi.so.40" in image:
                return "OpenMPI"
    return "other"


expected = os.environ.get("EXPECT_MPI", "")
flavor = linked_mpi_flavor()
if expected and flavor != expected:
    print(f"skipped: mpi4py is built for {flavor}, this build uses {expected}")
    sys.exit(77)

from mpi4py import MPI  # noqa: E402  (only once the flavour matches)

version = MPI.Get_library_version()
if expected and ("Open MPI" in version) != (expected == "OpenMPI"):
    print(f"skipped: mpi4py reports {version.splitlines()[0]}, this build uses {expected}")
    sys.exit(77)

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = 0


def check(name, got, want):
    global failures
    if not np.array_equal(got, want):
        failures += 1
        print(f"FAIL rank {rank}: {name}: got {got[:5]}..., expected {want[:5]}...", flush=True)


def ranks_data(dtype, count, r):
    i = np.arange(count)
    return ((i * 7 + r * 13) % 11).astype(dtype)


for dtype in (np.float32, np.float64, np.int32, np.int64, np.int8, np.uint8):
    for count in (1, 1000, 100000):
        for op_name, op, fold in (("SUM", MPI.SUM, np.add), ("MAX", MPI.MAX, np.maximum),
                                  ("MIN", MPI.MIN, np.minimum)):
            mine = ranks_data(dtype, count, rank)
            want = ranks_data(dtype, count, 0)
            for r in range(1, size):
                want = fold(want, ranks_data(dtype, count, r))
            out = np.empty_like(mine)
            comm.Allreduce(mine, out, op=op)
            check(f"{np.dtype(dtype).name} {op_name} {count}", out, want)
            comm.Allreduce(MPI.IN_PLACE, mine, op=op)
            check(f"{np.dtype(dtype).name} {op_name} {count} in place", mine, want)

# uint8 MAX over the signed boundary (MPICH 4.0.2 alone gets this wrong).
mine = np.array([253 if rank == 0 else 5], dtype=np.uint8)
out = np.empty_like(mine)
comm.Allreduce(mine, out, op=MPI.MAX)
check("uint8 MAX 253 vs 5", out, np.array([253 if size > 0 else 5], dtype=np.uint8))

# A split communicator, freed again.
sub = comm.Split(rank % 2, rank)
x = np.full(64, rank, dtype=np.float64)
sub.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
check("split SUM", x, np.full(64, sum(r for r in range(size) if r % 2 == rank % 2), np.float64))
sub.Free()

total = comm.allreduce(failures)  # pickled: an object allreduce, not MPI_Allreduce on numbers
if rank == 0:
    print(f"mpi4py_allreduce: {size} ranks, {flavor}: {total} failed checks", flush=True)
sys.exit(0 if total == 0 else 1)
