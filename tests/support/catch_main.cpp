// main() for the test programs that need nothing before or after their tests
// (no MPI_Init of their own, no skip check).
#include "support/catch_session.hpp"

int main(int argc, char** argv) {
  return concord::test::run_catch(argc, argv).exit_status();
}
