// Catch2 under MPI: every rank runs the same test cases in the same order; the
// exit code is non-zero on every rank if any rank saw a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) {
    MPI_Abort(MPI_COMM_WORLD, rc);
  }
  int failures = session.run();
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failures == 0 ? 0 : 1;
}
