// The one translation unit holding Catch2's implementation (see catch_session.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

namespace concord::test {

CatchOutcome run_catch(int argc, char** argv) {
  Catch::Session session;
  CatchOutcome outcome;
  outcome.command_line_error = session.applyCommandLine(argc, argv);
  if (outcome.command_line_error == 0) outcome.failures = session.run();
  return outcome;
}

}  // namespace concord::test
