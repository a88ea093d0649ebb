// main() for the test programs that need nothing before or after their tests
// (no MPI_Init of their own, no skip check).
#include "support/catch_session.hpp"

int main(int argc, char** argv) {
  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  if (outcome.command_line_error != 0) return outcome.command_line_error;
  return outcome.failures == 0 ? 0 : 1;
}
