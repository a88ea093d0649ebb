#include "fusion/fusion_bench.hpp"
#include "fusion/fusion_data.hpp"

#include "allreduce/allreduce_bench.hpp"
#include "common/bench_options.hpp"
#include "common/bench_report.hpp"

#include <concord/allreduce.hpp>
#include <concord/communicator.hpp>
#include <concord/engine.hpp>

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string_view>

namespace concord::bench {
namespace {

constexpr const char* kImplNames = "fused, unfused, mpi-per-tensor, flat";

// ---------------------------------------------------------------------------------
// The implementations: each runs one step (every tensor reduced) on the shared arena.

// Gradients in MPI: float32 and float64 only (MPI-4.0 has no 16-bit floats).
std::optional<MPI_Datatype> gradient_mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::Float32:
      return MPI_FLOAT;
    case DataType::Float64:
      return MPI_DOUBLE;
    default:
      return std::nullopt;  // float16, bfloat16: no MPI datatype (MPI-4.0)
  }
}

// MPI has no average: MPI_SUM, then one scale pass, as concord does.
void scale(std::byte* data, std::size_t count, DataType dtype, int ranks) {
  if (dtype == DataType::Float32) {
    auto* f = reinterpret_cast<float*>(data);
    const float s = 1.0f / static_cast<float>(ranks);
    for (std::size_t i = 0; i < count; ++i) f[i] *= s;
  } else {
    auto* d = reinterpret_cast<double*>(data);
    const double s = 1.0 / ranks;
    for (std::size_t i = 0; i < count; ++i) d[i] *= s;
  }
}

struct MpiComm {
  MPI_Comm comm = MPI_COMM_NULL;
  MpiComm() = default;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
};

struct Impl {
  std::string name;
  std::function<void()> step;
  // What `step` uses, made before it is timed: an engine (fused, unfused) or a
  // communicator (mpi-per-tensor); neither for flat.
  std::shared_ptr<Engine> engine;
  std::shared_ptr<MpiComm> mpi;
};

std::string describe_engine(const std::optional<std::size_t>& threshold,
                            const std::optional<double>& cycle_ms) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? fmt::format("{}={}", name, v) : "engine default";
  };
  const std::string t =
      threshold ? fmt::format("{} bytes", *threshold) : env("CONCORD_FUSION_THRESHOLD");
  const std::string c = cycle_ms ? fmt::format("{} ms", *cycle_ms) : env("CONCORD_CYCLE_TIME_MS");
  return fmt::format("fusion threshold {}, cycle time {}, large tensors alone from {}", t, c,
                     env("CONCORD_FUSION_IN_PLACE_BYTES"));
}

// Validates the options (the same on every rank, so all ranks fail alike).
void check_options(const FusionOptions& o) {
  std::set<std::string> seen;
  for (const std::string& name : o.impls) {
    if (name != "fused" && name != "unfused" && name != "mpi-per-tensor" && name != "flat") {
      throw std::invalid_argument(
          fmt::format("--impl: unknown implementation '{}' (accepted: {})", name, kImplNames));
    }
    if (!seen.insert(name).second) {
      throw std::invalid_argument(fmt::format("--impl: '{}' is listed twice", name));
    }
  }
  if (o.impls.empty()) throw std::invalid_argument("--impl needs a value");
  if (o.dtype != DataType::Float32 && o.dtype != DataType::Float16 &&
      o.dtype != DataType::BFloat16 && o.dtype != DataType::Float64) {
    throw std::invalid_argument(fmt::format(
        "-T {}: gradients are float32, float16, bfloat16 or float64", to_string(o.dtype)));
  }
  if (o.op != ReduceOp::Sum && o.op != ReduceOp::Avg) {
    throw std::invalid_argument(
        fmt::format("-o {}: gradients are reduced with sum or avg", to_string(o.op)));
  }
}

struct Stats {
  double avg = 0, min = 0, max = 0;
};

// Over ranks of one per-rank value; complete on rank 0.
Stats over_ranks(double value, MPI_Comm comm, int ranks) {
  Stats s;
  MPI_Reduce(&value, &s.avg, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
  MPI_Reduce(&value, &s.min, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
  MPI_Reduce(&value, &s.max, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
  s.avg /= ranks;
  return s;
}

const Measurement* find(const std::vector<Measurement>& row, std::string_view impl) {
  for (const Measurement& m : row) {
    if (m.impl == impl) return &m;
  }
  return nullptr;
}

// The implementations of --impl that can run with these options: mpi-per-tensor
// needs an MPI datatype for the dtype (skipped, with a note, where there is none)
// and tensors MPI_Allreduce can count.
std::vector<std::string> runnable_impls(const FusionOptions& o, const Model& model, int rank) {
  std::vector<std::string> names;
  for (const std::string& name : o.impls) {
    if (name == "mpi-per-tensor" && !gradient_mpi_type(o.dtype)) {
      if (rank == 0) {
        fmt::print(stderr,
                   "concord-bench fusion: skipping mpi-per-tensor: MPI has no {} datatype\n",
                   to_string(o.dtype));
      }
      continue;
    }
    names.push_back(name);
  }
  if (names.empty()) {
    throw std::invalid_argument(
        fmt::format("--impl: nothing left to run with -T {}", to_string(o.dtype)));
  }
  if (std::count(names.begin(), names.end(), "mpi-per-tensor") != 0) {
    for (const ModelTensor& t : model.tensors) {
      if (t.elements > static_cast<std::size_t>(INT_MAX)) {
        throw std::invalid_argument(fmt::format(
            "--impl mpi-per-tensor: tensor '{}' has more elements than MPI_Allreduce takes",
            t.name));
      }
    }
  }
  return names;
}

// One run of the benchmark on this rank: the model's data, each step's enqueue
// order, the implementations, and the time and validity each accumulates.
class FusionRun {
 public:
  FusionRun(const FusionOptions& o, const Model& model, concord::Communicator& comm)
      : o_(o),
        model_(model),
        comm_(comm),
        rank_(comm.rank()),
        ranks_(comm.size()),
        world_(comm.mpi_comm()),
        data_(model, o, rank_, ranks_),
        order_(model.tensors.size()) {
    for (std::size_t t = 0; t < model.tensors.size(); ++t) views_.push_back(data_.view(t));
    handles_.reserve(model.tensors.size());
  }
  FusionRun(const FusionRun&) = delete;  // the implementations' steps point into it
  FusionRun& operator=(const FusionRun&) = delete;

  // Collective set-up of one implementation, before it is timed: its engine or its
  // MPI communicator, owned by the Impl. Returns its index.
  std::size_t add(const std::string& name) {
    impls_.push_back(make_impl(name));
    seconds_.push_back(0.0);
    valid_.push_back(1);
    return impls_.size() - 1;
  }
  // Shuts down implementation k's engine or frees its communicator.
  void release(std::size_t k) {
    impls_[k].engine.reset();
    impls_[k].mpi.reset();
  }

  // Runs every step of the implementations [first, last).
  void run_steps(std::size_t first, std::size_t last) {
    for (int step = 0; step < o_.warmup + o_.iterations; ++step) {
      std::iota(order_.begin(), order_.end(), std::size_t{0});
      std::mt19937 rng(o_.seed + 1000u * static_cast<unsigned>(rank_) +
                       static_cast<unsigned>(step));
      std::shuffle(order_.begin(), order_.end(), rng);
      for (std::size_t k = first; k < last; ++k) {
        // Alternate the order of the implementations from step to step.
        run_step(step % 2 == 0 ? k : first + last - 1 - k, step);
      }
    }
  }

  // Collective: each implementation's times over ranks (complete on rank 0) and
  // whether every rank's results were right.
  std::vector<Measurement> measurements() const {
    const std::size_t bytes = model_.elements * size_of(o_.dtype);
    std::vector<Measurement> row;
    for (std::size_t k = 0; k < impls_.size(); ++k) {
      const Stats s = over_ranks(seconds_[k] * 1e6 / o_.iterations, world_, ranks_);
      int all_valid = 0;
      MPI_Allreduce(&valid_[k], &all_valid, 1, MPI_INT, MPI_MIN, world_);
      Measurement m;
      m.impl = impls_[k].name;
      m.bytes = bytes;
      m.count = model_.elements;
      m.avg_us = s.avg;
      m.min_us = s.min;
      m.max_us = s.max;
      m.iterations = o_.iterations;
      m.warmup = o_.warmup;
      m.busbw_gbps = ranks_ > 1 ? static_cast<double>(bytes) / (m.avg_us * 1e-6) * 2.0 *
                                      (ranks_ - 1) / ranks_ / 1e9
                                : 0.0;
      if (o_.validate) m.validated = all_valid != 0;
      row.push_back(m);
    }
    return row;
  }

 private:
  void run_step(std::size_t which, int step) {
    data_.fill();
    MPI_Barrier(world_);
    const auto t0 = std::chrono::steady_clock::now();
    impls_[which].step();
    const auto t1 = std::chrono::steady_clock::now();
    if (step >= o_.warmup) seconds_[which] += std::chrono::duration<double>(t1 - t0).count();
    if (o_.validate && valid_[which] != 0 && !data_.check(impls_[which].name, step, rank_)) {
      valid_[which] = 0;
    }
  }

  Impl make_impl(const std::string& name) {
    if (name == "fused") {
      EngineOptions eo;
      eo.fusion_threshold = o_.fusion_threshold;
      eo.cycle_time_ms = o_.cycle_time_ms;
      return engine_impl(name, eo);
    }
    if (name == "unfused") {
      EngineOptions eo;
      eo.fusion_threshold = 0;
      return engine_impl(name, eo);
    }
    if (name == "mpi-per-tensor") return mpi_per_tensor_impl(name);
    return Impl{name,
                [this] {  // flat
                  concord::allreduce(data_.arena(), data_.arena(), model_.elements, o_.dtype, o_.op,
                                     comm_);
                },
                nullptr, nullptr};
  }

  // Every tensor enqueued in this step's order, then waited for.
  Impl engine_impl(const std::string& name, const EngineOptions& eo) {
    auto engine = std::make_shared<Engine>(comm_, eo);
    return Impl{
        name,
        [this, e = engine.get()] {
          handles_.clear();
          for (const std::size_t t : order_) {
            handles_.push_back(e->enqueue_allreduce(model_.tensors[t].name, views_[t], o_.op));
          }
          for (const Handle& h : handles_) h.wait();
        },
        engine, nullptr};
  }

  // One MPI_Allreduce per tensor, in the file's order, on a duplicate of the world.
  Impl mpi_per_tensor_impl(const std::string& name) {
    auto mpi = std::make_shared<MpiComm>();
    MPI_Comm_dup(world_, &mpi->comm);
    const MPI_Datatype type = *gradient_mpi_type(o_.dtype);
    return Impl{name,
                [this, type, c = mpi->comm] {
                  for (const TensorView& v : views_) {
                    MPI_Allreduce(MPI_IN_PLACE, v.data, static_cast<int>(v.count), type, MPI_SUM,
                                  c);
                    if (o_.op == ReduceOp::Avg) {
                      scale(static_cast<std::byte*>(v.data), v.count, o_.dtype, ranks_);
                    }
                  }
                },
                nullptr, mpi};
  }

  const FusionOptions& o_;
  const Model& model_;
  concord::Communicator& comm_;
  int rank_;
  int ranks_;
  MPI_Comm world_;
  Data data_;
  std::vector<TensorView> views_;
  std::vector<std::size_t> order_;  // this step's enqueue order on this rank
  std::vector<Handle> handles_;
  std::vector<Impl> impls_;
  std::vector<double> seconds_;
  std::vector<int> valid_;
};

// Rank 0's report: the header, OSU-style columns and rows, the ratios, the JSON.
void print_report(const FusionOptions& o, const Model& model, int ranks,
                  const std::vector<Measurement>& row) {
  AllreduceOptions report;
  report.full_stats = true;
  report.validate = o.validate;
  report.dtype = o.dtype;
  report.op = o.op;
  std::string names;
  for (const Measurement& m : row) names += (names.empty() ? "" : ", ") + m.impl;
  fmt::print("# concord-bench fusion: model {}, {} tensors, {:.2f} MiB ({} {} elements)\n",
             model.path, model.tensors.size(),
             static_cast<double>(model.elements * size_of(o.dtype)) / (1 << 20), model.elements,
             to_string(o.dtype));
  fmt::print(
      "# {} ranks, op {}{}; {} timed steps after {} warm-up; each rank enqueues every tensor "
      "in its own random order (seed {})\n",
      ranks, to_string(o.op), o.validate ? ", validated" : "", o.iterations, o.warmup, o.seed);
  if (find(row, "fused") != nullptr)
    fmt::print("# fused: {}\n", describe_engine(o.fusion_threshold, o.cycle_time_ms));
  if (find(row, "unfused") != nullptr)
    fmt::print("# unfused: {}\n", describe_engine(std::size_t{0}, std::nullopt));
  fmt::print("# Implementations, {}: {}; Size = model bytes\n",
             o.sequential ? "one after another (--sequential), each engine alone"
                          : "interleaved step by step",
             names);
  print_columns(report, row);
  print_rows(report, row);
  std::string ratios;
  auto ratio = [&](std::string_view a, std::string_view b) {
    const Measurement* x = find(row, a);
    const Measurement* y = find(row, b);
    if (x != nullptr && y != nullptr) {
      ratios += fmt::format("{}{}/{} = {:.2f}", ratios.empty() ? "# " : ", ", a, b,
                            x->avg_us / y->avg_us);
    }
  };
  ratio("fused", "flat");
  ratio("unfused", "fused");
  ratio("mpi-per-tensor", "fused");
  if (!ratios.empty()) fmt::print("{}\n", ratios);
  std::fflush(stdout);
  if (!o.json_path.empty()) write_json(o.json_path, report, ranks, row);
}

int run_fusion(const FusionOptions& o) {
  check_options(o);
  const Model model = load_model(o.model_path);
  concord::Communicator comm = concord::Communicator::world();
  const std::vector<std::string> names = runnable_impls(o, model, comm.rank());
  FusionRun run(o, model, comm);
  if (o.sequential) {
    // One implementation after another, each alone: its engine is created before its
    // warm-up and shut down after its last step.
    for (const std::string& name : names) {
      const std::size_t k = run.add(name);
      run.run_steps(k, k + 1);
      run.release(k);
    }
  } else {
    for (const std::string& name : names) run.add(name);
    run.run_steps(0, names.size());
  }
  const std::vector<Measurement> row = run.measurements();
  if (comm.rank() == 0) print_report(o, model, comm.size(), row);
  for (const Measurement& m : row) {
    if (m.validated == false) {
      if (comm.rank() == 0) fmt::print(stderr, "concord-bench: validation FAILED\n");
      return 3;
    }
  }
  return 0;
}

}  // namespace

int run_fusion_command(FusionArgs& a) {
  a.o.dtype = parse_data_type(a.dtype);
  a.o.op = parse_reduce_op(a.op);
  a.o.impls = split_list(a.impls);
  return run_fusion(a.o);
}

}  // namespace concord::bench
