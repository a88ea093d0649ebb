// Catch2's runner for every test program. Catch2 2 is a single header whose
// implementation a program gets by defining CATCH_CONFIG_MAIN or _RUNNER before
// including it; that one translation unit is the slowest thing the tests compile
// (over a minute under ASan), so it is compiled once, in catch_session.cpp, and
// each program's main() calls it here instead of compiling its own copy.
#pragma once

namespace concord::test {

struct CatchOutcome {
  int command_line_error = 0;  // non-zero: Catch2 rejected the arguments (and said why)
  int failures = 0;            // failed test cases otherwise

  // A single process's exit status: Catch2's for a bad command line, else 1 if
  // any test failed.
  int exit_status() const {
    if (command_line_error != 0) return command_line_error;
    return failures == 0 ? 0 : 1;
  }
};

// Parses Catch2's arguments and, if they are valid, runs the selected tests.
CatchOutcome run_catch(int argc, char** argv);

}  // namespace concord::test
