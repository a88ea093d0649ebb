// The exit-hang reproducer: every rank reduces, then rank 0 reaches
// MPI_Finalize a second after the others (as a rank that writes a checkpoint
// does). Over UCX TCP, MPICH 4.0 then hangs in MPI_Finalize in most runs unless
// tests/cluster/mpirun preloads the endpoint-close deadline; run-ci runs it
// with the preload and fails if it does not exit.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mine = rank;
  double sum = 0;
  for (int i = 0; i < 200; ++i) MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double expected = size * (size - 1) / 2.0;
  if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  MPI_Finalize();
  if (sum != expected) {
    std::fprintf(stderr, "rank %d: sum %g, expected %g\n", rank, sum, expected);
    return 1;
  }
  return 0;
}
