// The public Engine, the default engine and Handle, over EngineCore.
#include "engine/engine_core.hpp"

#include <concord/engine.hpp>

#include <fmt/format.h>

#include <mutex>

namespace concord {

Engine::Engine(const Communicator& comm, const EngineOptions& options)
    : core_(std::make_unique<detail::EngineCore>(comm, options)) {}

Engine::~Engine() = default;

void Engine::shutdown() {
  core_->shutdown();
}

void Engine::abort() noexcept {
  core_->abort();
}
int Engine::rank() const {
  return core_->rank();
}
int Engine::size() const {
  return core_->size();
}

namespace {
std::shared_ptr<detail::Work> make_work(const std::string& name, TensorView tensor,
                                        detail::Signature sig, Completion done) {
  auto w = std::make_shared<detail::Work>();
  w->name = name;
  w->tensor = tensor;
  sig.dtype = tensor.dtype;
  sig.device = tensor.device;
  w->sig = sig;
  w->done = std::move(done);
  return w;
}
}  // namespace

Handle Engine::enqueue_allreduce(const std::string& name, TensorView tensor, ReduceOp op,
                                 double prescale, double postscale, Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Allreduce;
  sig.op = op;
  sig.count = tensor.count;
  sig.prescale = prescale;
  sig.postscale = postscale;
  return core_->submit({make_work(name, tensor, sig, std::move(done))}).front();
}

std::vector<Handle> Engine::enqueue_grouped_allreduce(const std::vector<std::string>& names,
                                                      const std::vector<TensorView>& tensors,
                                                      ReduceOp op, double prescale,
                                                      double postscale, Completion done) {
  if (names.size() != tensors.size()) {
    throw Error(ErrorCode::InvalidArgument, rank(),
                fmt::format("Engine: grouped allreduce with {} names but {} tensors", names.size(),
                            tensors.size()));
  }
  // One completion for the group: the last tensor to finish reports the first error.
  struct Group {
    std::mutex mutex;
    std::size_t remaining;
    std::optional<Error> error;
    Completion done;
  };
  std::shared_ptr<Group> group;
  if (done) {
    group = std::make_shared<Group>();
    group->remaining = names.size();
    group->done = std::move(done);
  }
  std::vector<std::shared_ptr<detail::Work>> works;
  for (std::size_t i = 0; i < names.size(); ++i) {
    detail::Signature sig;
    sig.kind = detail::WorkKind::Allreduce;
    sig.op = op;
    sig.count = tensors[i].count;
    sig.prescale = prescale;
    sig.postscale = postscale;
    Completion each;
    if (group) {
      each = [group](const Error* error) {
        bool last = false;
        {
          std::lock_guard lock(group->mutex);
          if (error != nullptr && !group->error) group->error = *error;
          last = --group->remaining == 0;
        }
        if (last) group->done(group->error ? &*group->error : nullptr);
      };
    }
    works.push_back(make_work(names[i], tensors[i], sig, std::move(each)));
  }
  std::vector<Handle> handles = core_->submit(std::move(works), /*whole_group=*/true);
  // No tensor to complete it: an empty group is complete at once.
  if (names.empty() && group) group->done(nullptr);
  return handles;
}

Handle Engine::enqueue_broadcast(const std::string& name, TensorView tensor, int root,
                                 Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Broadcast;
  sig.count = tensor.count;
  sig.root = root;
  return core_->submit({make_work(name, tensor, sig, std::move(done))}).front();
}

Handle Engine::enqueue_allgather(const std::string& name, TensorView tensor,
                                 std::size_t row_elements, Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Allgather;
  sig.count = row_elements;
  auto w = make_work(name, tensor, sig, std::move(done));
  if (row_elements != 0) w->first_dim = tensor.count / row_elements;
  return core_->submit({w}).front();
}

Handle Engine::enqueue_alltoall(const std::string& name, TensorView tensor,
                                std::size_t row_elements, std::vector<std::size_t> send_rows,
                                Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Alltoall;
  sig.count = row_elements;
  auto w = make_work(name, tensor, sig, std::move(done));
  if (row_elements != 0) w->first_dim = tensor.count / row_elements;
  const auto ranks = static_cast<std::size_t>(size());
  // A count that is not whole rows is validate()'s error to name; its rows split
  // evenly or not say nothing about it.
  if (send_rows.empty() && row_elements != 0 && tensor.count % row_elements == 0) {
    // Horovod's default: an even split, which must exist.
    if (w->first_dim % ranks != 0) {
      throw Error(ErrorCode::InvalidArgument, rank(),
                  fmt::format("Engine: tensor '{}': alltoall without send_rows splits the {} rows "
                              "evenly, but {} ranks do not divide them",
                              name, w->first_dim, ranks));
    }
    send_rows.assign(ranks, w->first_dim / ranks);
  }
  w->send_rows.assign(send_rows.begin(), send_rows.end());
  return core_->submit({w}).front();
}

Handle Engine::enqueue_reducescatter(const std::string& name, TensorView tensor,
                                     std::size_t row_elements, ReduceOp op, double prescale,
                                     double postscale, Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Reducescatter;
  sig.op = op;
  sig.count = tensor.count;
  sig.row_elements = row_elements;
  sig.prescale = prescale;
  sig.postscale = postscale;
  return core_->submit({make_work(name, tensor, sig, std::move(done))}).front();
}

Handle Engine::enqueue_join(Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Join;
  return core_->submit({make_work(detail::kJoinName, TensorView{}, sig, std::move(done))}).front();
}

namespace {
std::mutex default_mutex;
// Never destroyed by a static destructor (those run after MPI_Finalize, and
// possibly on a thread the engine owns): shutdown_default_engine() deletes it,
// at the latest from the exit handler default_engine() registers.
Engine* default_instance = nullptr;
bool default_shut_down = false;

void shutdown_default_engine_at_exit() noexcept {
  try {
    // The application finalized MPI itself with the engine still running (it
    // should have called shutdown_default_engine() first): a shutdown would
    // talk MPI again, so the engine is left as it is.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    shutdown_default_engine();
  } catch (...) {
    // Exiting anyway; an exception here would end in std::terminate.
  }
}
}  // namespace

Engine& default_engine() {
  std::lock_guard lock(default_mutex);
  if (default_shut_down) {
    throw Error(ErrorCode::Shutdown, -1, "default_engine: the engine was shut down");
  }
  if (!default_instance) {
    auto engine = std::make_unique<Engine>(Communicator::world());
    // When concord initialised MPI, Communicator::world() has registered
    // MPI_Finalize to run at exit by now; exit handlers run in reverse order, so
    // this one shuts the engine down before MPI is finalized.
    static const bool registered = std::atexit(shutdown_default_engine_at_exit) == 0;
    (void)registered;
    default_instance = engine.release();
  }
  return *default_instance;
}

void shutdown_default_engine() {
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard lock(default_mutex);
    default_shut_down = true;
    if (default_instance == nullptr) return;
    if (default_instance->core_->on_engine_thread()) {
      // From one of its completion callbacks: it cannot join (or delete) itself.
      // Stop it now; the next call from another thread (at the latest the exit
      // handler) joins and deletes it.
      default_instance->core_->shutdown();
      return;
    }
    engine.reset(std::exchange(default_instance, nullptr));
  }
  engine.reset();  // shutdown() and join, outside the lock
}

void Handle::wait() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::wait on an empty handle");
  std::unique_lock lock(work_->mutex);
  work_->cv.wait(lock, [&] { return work_->complete; });
  if (work_->error) throw *work_->error;
}

bool Handle::test() const {
  if (!work_) return false;
  std::lock_guard lock(work_->mutex);
  return work_->complete;
}

namespace {
// Waits until the work's results are set (also from inside its own completion
// callback, which runs before the handle reports completion).
void wait_results(detail::Work& work) {
  std::unique_lock lock(work.mutex);
  work.cv.wait(lock, [&] { return work.results_ready; });
  if (work.error) throw *work.error;
}
}  // namespace

const std::vector<std::byte>& Handle::output() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::output on an empty handle");
  wait_results(*work_);
  return work_->output;
}

const std::vector<std::size_t>& Handle::first_dims() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::first_dims on an empty handle");
  wait_results(*work_);
  return work_->first_dims;
}

}  // namespace concord
