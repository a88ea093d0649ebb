// Catch2 under MPI: every rank runs the same test cases in the same order; the
// exit code is non-zero on every rank if any rank saw a failure.
#include "support/catch_session.hpp"

#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  if (outcome.command_line_error != 0) MPI_Abort(MPI_COMM_WORLD, outcome.command_line_error);
  int failures = outcome.failures;
  int any_failures = 0;
  MPI_Allreduce(&failures, &any_failures, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failures == 0 ? 0 : 1;
}
