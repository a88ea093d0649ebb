// Run at 2 ranks with a small CONCORD_TRANSPORT_TIMEOUT_S (T) by
// engine_negotiation_timeout.cmake (mode `stopped`) and directly (mode `slow`).
//
// stopped: rank 1 stops itself (SIGSTOP) while its engine is up, so it is alive
// but takes no part in negotiation: a dead link looks the same from rank 0.
// Rank 0's next allreduce must fail with ErrorCode::Timeout naming rank 1, within
// T of rank 1 going quiet plus a margin; a later submit must fail the same way,
// and destroying the engine must not hang on the abandoned request. Rank 0
// prints its verdict and rank 1's pid, then SIGKILLs rank 1 (mpiexec then ends
// the job); the script checks the verdict and that the job ended.
//
// slow: rank 1's application sleeps 2T before it submits; rank 0's allreduce
// waits that long in negotiation and must still succeed with the right sum (the
// engines keep cycling while the application is busy elsewhere).
#include <concord/concord.hpp>

#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// T as the test's environment sets it (read here, not from the library).
double deadline_s() {
  const char* v = std::getenv("CONCORD_TRANSPORT_TIMEOUT_S");
  return v != nullptr ? std::atof(v) : 0.0;
}

int fail(const std::string& why) {
  std::printf("negotiation-timeout-test: FAIL: %s\n", why.c_str());
  std::fflush(stdout);
  return 1;
}

bool contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

// A thrown concord::Error's code and text, or "no error".
struct Outcome {
  bool failed = false;
  concord::ErrorCode code = concord::ErrorCode::Internal;
  std::string message;
};

template <typename F>
Outcome outcome_of(F&& f) {
  try {
    f();
  } catch (const concord::Error& e) {
    return {true, e.code(), e.what()};
  }
  return {};
}

// What rank 0 checks of each error: Timeout, naming rank 1, the cause and the variable.
std::string check_timeout(const Outcome& o, const char* what) {
  if (!o.failed) return std::string(what) + " did not fail";
  if (o.code != concord::ErrorCode::Timeout)
    return std::string(what) + ": not Timeout: " + o.message;
  if (!contains(o.message, "waiting on rank 1 in the engine's negotiation") ||
      !contains(o.message, "the peer may have died or its network link gone down") ||
      !contains(o.message, "CONCORD_TRANSPORT_TIMEOUT_S")) {
    return std::string(what) + ": unexpected message: " + o.message;
  }
  return {};
}

int run_stopped(concord::Communicator& comm, double t) {
  std::vector<int> pids(2);
  int mine = static_cast<int>(getpid());
  MPI_Allgather(&mine, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  auto engine = std::make_unique<concord::Engine>(comm);
  float warm = 1.0f;  // the engines are up and agree: 1 + 1
  engine->enqueue_allreduce("warm", {&warm, 1}, concord::ReduceOp::Sum).wait();
  if (warm != 2.0f) return fail("the warm-up allreduce gave " + std::to_string(warm));
  // Rank 1 stops only after rank 0 entered this barrier: from here on rank 0's
  // engine waits on a peer that will never answer.
  const auto quiet_from = Clock::now();
  MPI_Barrier(MPI_COMM_WORLD);
  if (comm.rank() == 1) {
    std::raise(SIGSTOP);  // rank 0 kills it; it never runs again
    return 0;
  }
  std::printf("peer-pid=%d\n", pids[1]);
  std::fflush(stdout);
  float data = 1.0f;
  const Outcome first = outcome_of([&] {
    engine->enqueue_allreduce("after", {&data, 1}, concord::ReduceOp::Sum).wait();
  });
  const double waited = seconds_since(quiet_from);
  const Outcome later = outcome_of([&] {
    engine->enqueue_allreduce("later", {&data, 1}, concord::ReduceOp::Sum).wait();
  });
  const auto teardown = Clock::now();
  engine.reset();
  const double teardown_s = seconds_since(teardown);
  std::printf("waited=%.2f teardown=%.2f\nmessage: %s\n", waited, teardown_s,
              first.message.c_str());
  std::string why = check_timeout(first, "the allreduce");
  if (why.empty()) why = check_timeout(later, "the later submit");
  // The deadline counts from the start of the exchange rank 1 never joined,
  // within a cycle (1 ms) of the barrier: not before T, not long after.
  const double margin = 3.0;
  if (why.empty() && (waited < t - 0.5 || waited > t + margin)) {
    why = "the timeout took " + std::to_string(waited) + " s; the deadline is " +
          std::to_string(t) + " s";
  }
  if (why.empty() && teardown_s > margin) why = "destroying the engine took too long";
  if (why.empty())
    std::printf("negotiation-timeout-test: PASS\n");
  else
    fail(why);
  std::fflush(stdout);
  kill(static_cast<pid_t>(pids[1]), SIGKILL);  // mpiexec ends the job
  for (;;) pause();
}

int run_slow(concord::Communicator& comm, double t) {
  concord::Engine engine(comm);
  const double sleep_s = 2 * t;
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
  double data = comm.rank() + 1.0;
  const Outcome o = outcome_of([&] {
    engine.enqueue_allreduce("slow", {&data, 1, concord::DataType::Float64}, concord::ReduceOp::Sum)
        .wait();
  });
  const double waited = seconds_since(start);
  if (o.failed) return fail("rank " + std::to_string(comm.rank()) + ": " + o.message);
  if (data != 3.0) return fail("the sum is " + std::to_string(data) + ", not 1 + 2");
  // Rank 0 really waited past the deadline in negotiation.
  if (comm.rank() == 0 && waited < sleep_s - 0.1) {
    return fail("rank 0 waited only " + std::to_string(waited) + " s");
  }
  std::printf("rank %d: waited %.2f s past a %.1f s deadline: PASS\n", comm.rank(), waited, t);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  concord::Communicator comm = concord::Communicator::world();
  const double t = deadline_s();
  if (comm.size() != 2 || t <= 0)
    return fail("run at 2 ranks with CONCORD_TRANSPORT_TIMEOUT_S > 0");
  if (mode == "stopped") return run_stopped(comm, t);
  if (mode == "slow") return run_slow(comm, t);
  return fail("mode must be `stopped` or `slow`");
}
