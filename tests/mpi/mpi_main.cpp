// Catch2 under MPI: every rank runs the same test cases in the same order; the
// exit code is non-zero on every rank if any rank saw a failure.
#include "support/catch_session.hpp"

#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // The engine and Hierarchical's network thread need it; below it the tests
  // would quietly cover less than they say.
  if (provided != MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "rank %d: the tests need MPI_THREAD_MULTIPLE; this MPI gives level %d\n",
                 rank, provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  if (outcome.command_line_error != 0) MPI_Abort(MPI_COMM_WORLD, outcome.command_line_error);
  int failures = outcome.failures;
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failures == 0 ? 0 : 1;
}
