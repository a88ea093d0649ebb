// After MPI_Finalize every entry point throws Error(Finalized), and communicators
// created before it are destroyed without touching MPI.
#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

#include <concord/concord.hpp>

#include <optional>

namespace {
std::optional<concord::Communicator> g_before_finalize;

// `call` must throw Error(Finalized), with `named` (unless null) in its message.
template <typename Call>
void check_finalized(Call call, const char* named) {
  try {
    call();
    FAIL("no error");
  } catch (const concord::Error& e) {
    CHECK(e.code() == concord::ErrorCode::Finalized);
    if (named != nullptr) CHECK_THAT(e.what(), Catch::Matchers::Contains(named));
  }
}
}  // namespace

TEST_CASE("allreduce after MPI_Finalize throws Error(Finalized)") {
  float x = 1.0f;
  check_finalized(
      [&] {
        concord::allreduce(&x, &x, 1, concord::DataType::Float32, concord::ReduceOp::Sum,
                           *g_before_finalize);
      },
      "MPI_Finalize");
}

TEST_CASE("Communicator::world() after MPI_Finalize throws Error(Finalized)") {
  check_finalized([] { concord::Communicator::world(); }, nullptr);
}

TEST_CASE("allocate_shared after MPI_Finalize throws Error(Finalized)") {
  check_finalized([] { concord::allocate_shared(4096, *g_before_finalize); }, "allocate_shared");
}

TEST_CASE("an Engine made after MPI_Finalize throws Error(Finalized)") {
  check_finalized([] { concord::Engine engine(*g_before_finalize); }, "Engine");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  g_before_finalize.emplace(MPI_COMM_WORLD);
  MPI_Finalize();
  const concord::test::CatchOutcome outcome = concord::test::run_catch(argc, argv);
  const int failures = outcome.command_line_error != 0 ? 1 : outcome.failures;
  g_before_finalize.reset();  // must not call MPI_Comm_free now
  return failures == 0 ? 0 : 1;
}
