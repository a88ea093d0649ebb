// The engine's negotiation, cycle by cycle: each rank drives its own Negotiator
// and decides in which cycle a name arrives, so races that the engine's timers
// make rare (a late rank's announcement in the very cycle that carries rank 0's
// stall timeout; a joined rank's submission in the cycle its bits stand for zeros)
// happen every time. Every rank runs the same cycles, as the engine thread does.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "core/communicator_state.hpp"
#include "engine/negotiator.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace concord;
using concord::detail::Negotiator;
using concord::detail::StallPolicy;
using concord::detail::Work;
using concord::detail::WorkKind;

namespace {

// An allreduce of `data` named `name`; the negotiator never reads the data.
std::shared_ptr<Work> allreduce_work(const std::string& name, std::vector<float>& data) {
  auto w = std::make_shared<Work>();
  w->name = name;
  w->sig.kind = WorkKind::Allreduce;
  w->sig.count = data.size();
  w->tensor = TensorView{data.data(), data.size(), DataType::Float32};
  return w;
}

std::shared_ptr<Work> join_work() {
  auto w = std::make_shared<Work>();
  w->name = detail::kJoinName;
  w->sig.kind = WorkKind::Join;
  w->sig.dtype = DataType::Int32;
  return w;
}

using Works = std::vector<std::shared_ptr<Work>>;

// A negotiator on its own duplicate of MPI_COMM_WORLD (the engine's control
// communicator): every wait is bounded, so a regression that leaves the ranks out
// of step fails here instead of hanging.
struct Negotiation {
  explicit Negotiation(StallPolicy stall)
      : comm(MPI_COMM_WORLD),
        negotiator(comm.mpi_comm(), comm.rank(), comm.size(), stall, 30, 0,
                   comm.state().abort_signal) {}
  Negotiator::Outcome cycle(Works fresh = {}) { return negotiator.cycle(std::move(fresh), false); }
  Communicator comm;
  Negotiator negotiator;
};

}  // namespace

TEST_CASE("a name its late rank announces in the cycle of rank 0's stall timeout runs everywhere",
          "[engine][negotiator]") {
  // Before, rank 0's "fail this name" record was applied before the late rank's
  // record of the same cycle: the late rank's handle failed too ("ranks [1] did not
  // submit it", on rank 1 that had), and its record then made a new registry entry
  // holding no work. The next time the others submitted the name that entry made it
  // complete, the late rank had nothing to run, and the others' collective hung.
  Communicator world = Communicator::world();
  if (world.size() < 2) return;
  const bool late = world.rank() == world.size() - 1;
  Negotiation n(StallPolicy{60, 0.01});
  std::vector<float> data(4, 1.0f);
  auto first = allreduce_work("x", data);
  Negotiator::Outcome out = n.cycle(late ? Works{} : Works{first});
  CHECK(out.ready.empty());
  // Past the stall timeout: rank 0's monitor decides, at the end of this cycle,
  // to fail the name; the decision travels in the next cycle.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  out = n.cycle();
  CHECK(out.ready.empty());
  CHECK(out.failed.empty());
  // The late rank announces it in that cycle: every rank has submitted it, so it runs.
  auto late_work = allreduce_work("x", data);
  out = n.cycle(late ? Works{late_work} : Works{});
  for (const auto& [work, error] : out.failed) FAIL_CHECK(work->name << ": " << error.what());
  REQUIRE(out.ready.size() == 1);
  CHECK(out.ready[0] == (late ? late_work : first));
  // Nothing is left behind: the others submit it again, the late rank has not, so it
  // waits; then the late rank does, and it runs on every rank in the same cycle.
  auto again = allreduce_work("x", data);
  out = n.cycle(late ? Works{} : Works{again});
  CHECK(out.ready.empty());
  auto late_again = allreduce_work("x", data);
  out = n.cycle(late ? Works{late_again} : Works{});
  REQUIRE(out.ready.size() == 1);
  CHECK(out.ready[0] == (late ? late_again : again));
}

TEST_CASE("a stall timeout fails a name announced in its cycle while another rank is missing",
          "[engine][negotiator]") {
  // Three ranks: rank 0 submits, rank 1 comes in the cycle that carries the
  // timeout, the last rank never: ranks 0 and 1 fail, naming only the last.
  Communicator world = Communicator::world();
  if (world.size() < 3) return;
  const int rank = world.rank();
  const int last = world.size() - 1;
  Negotiation n(StallPolicy{60, 0.01});
  std::vector<float> data(4, 1.0f);
  auto early = allreduce_work("y", data);
  n.cycle(rank == 0 ? Works{early} : Works{});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  n.cycle();
  auto late_work = allreduce_work("y", data);
  Negotiator::Outcome out = n.cycle(rank == 1 ? Works{late_work} : Works{});
  CHECK(out.ready.empty());
  if (rank == last) {
    CHECK(out.failed.empty());
  } else {
    REQUIRE(out.failed.size() == 1);
    CHECK(out.failed[0].first == (rank == 0 ? early : late_work));
    CHECK(out.failed[0].second.code() == ErrorCode::Timeout);
    CHECK_THAT(out.failed[0].second.what(),
               Catch::Matchers::Contains(fmt::format("ranks [{}] did not submit it", last)));
  }
  // The name left the registry on every rank: submitted everywhere now, it runs.
  auto all = allreduce_work("y", data);
  out = n.cycle(Works{all});
  REQUIRE(out.ready.size() == 1);
  CHECK(out.ready[0] == all);
}

TEST_CASE("a joined rank that submits a cached name in the others' cycle contributes its data",
          "[engine][negotiator][join]") {
  // Before, the joined rank's bit for every cached name stood for zeros even where
  // it submitted the name itself in that cycle: the others ran it with its zeros,
  // and its own request was left for the next step.
  Communicator world = Communicator::world();
  if (world.size() < 2) return;
  const bool joiner = world.rank() == world.size() - 1;
  Negotiation n(StallPolicy{60, 0});
  std::vector<float> data(4, 1.0f);
  auto cached = allreduce_work("g", data);
  REQUIRE(n.cycle(Works{cached}).ready.size() == 1);  // agreed by name, cached from now on
  CHECK(n.cycle(joiner ? Works{join_work()} : Works{}).ready.empty());
  auto mine = allreduce_work("g", data);
  Works fresh{mine};
  std::shared_ptr<Work> ran;
  int cycles = 0;
  while (!ran && cycles < 5) {
    ++cycles;
    for (auto& w : n.cycle(std::exchange(fresh, {})).ready) {
      if (w->name == "g") ran = w;
    }
  }
  REQUIRE(ran);
  CHECK(ran == mine);  // its own tensor, not zeros filled in for it
  CHECK_FALSE(ran->filler);
  // In the same cycle on every rank.
  int least = 0, most = 0;
  MPI_Allreduce(&cycles, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&cycles, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(least == most);
}
