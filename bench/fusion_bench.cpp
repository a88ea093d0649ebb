#include "fusion_bench.hpp"
#include "elements.hpp"

#include "allreduce_bench.hpp"
#include "bench_options.hpp"
#include "bench_report.hpp"

#include <concord/allreduce.hpp>
#include <concord/communicator.hpp>
#include <concord/engine.hpp>

#include <fmt/format.h>
#include <mpi.h>
#include <CLI/CLI.hpp>

#include <sys/mman.h>
#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace concord::bench {
namespace {

constexpr const char* kImplNames = "fused, unfused, mpi-per-tensor, flat";

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) items.push_back(item);
  return items;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// A positive decimal count, or nullopt.
std::optional<std::size_t> parse_count(std::string_view text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value == 0) return std::nullopt;
  return value;
}

// ---------------------------------------------------------------------------------
// Element values. Inputs are small integers, so every sum is exact in every dtype
// (up to 64 ranks in bfloat16, 512 in float16); the reference is computed here in
// double, from values every rank can derive, never by concord.

// Rank r's element i of tensor t is value_at(7r + j), j = (31t + i) % kPeriod: in
// [-4, 4]. The period is prime so that misplaced data (another tensor, a shifted
// offset) does not match.
constexpr std::size_t kPeriod = 1009;
double value_at(std::size_t x) {
  return static_cast<double>(x % 9) - 4.0;
}

// A repeating pattern, kPeriod elements long, stored in the dtype and long enough that
// any tensor is filled (or compared) with memcpy/memcmp from `phase` onwards in
// chunks of kChunk elements, a multiple of the period.
class Tape {
 public:
  static constexpr std::size_t kChunk = kPeriod * 64;
  Tape(DataType dtype, const std::function<double(std::size_t)>& value)
      : esize_(size_of(dtype)), bytes_((kChunk + kPeriod) * esize_) {
    for (std::size_t j = 0; j < kChunk + kPeriod; ++j) {
      store_element(&bytes_[j * esize_], dtype, value(j % kPeriod));
    }
  }
  void fill(std::byte* dst, std::size_t count, std::size_t phase) const {
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      std::memcpy(dst + done * esize_, &bytes_[phase * esize_], n * esize_);
    }
  }
  // Index of the first element that differs, or count.
  std::size_t mismatch(const std::byte* src, std::size_t count, std::size_t phase) const {
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      if (std::memcmp(src + done * esize_, &bytes_[phase * esize_], n * esize_) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
          if (std::memcmp(src + (done + i) * esize_, &bytes_[(phase + i) * esize_], esize_) != 0)
            return done + i;
        }
      }
    }
    return count;
  }

 private:
  std::size_t esize_;
  std::vector<std::byte> bytes_;
};

// Every tensor at its offset in one arena, back to back, as a framework's gradient
// buffer; `flat` reduces the whole arena.
struct AlignedFree {
  static constexpr std::size_t kAlign = std::size_t{2} << 20;
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
};
using Arena = std::unique_ptr<std::byte[], AlignedFree>;

// 2 MiB-aligned with transparent huge pages, as allreduce_bench's buffers and the
// allocators of training frameworks for large tensors; first touched here.
Arena make_arena(std::size_t bytes) {
  Arena a(static_cast<std::byte*>(
      ::operator new[](std::max<std::size_t>(bytes, 1), std::align_val_t{AlignedFree::kAlign})));
  if (bytes >= AlignedFree::kAlign) ::madvise(a.get(), bytes, MADV_HUGEPAGE);
  std::memset(a.get(), 0, bytes);
  return a;
}

class Data {
 public:
  Data(const Model& model, const FusionOptions& o, int rank, int ranks)
      : model_(model),
        o_(o),
        ranks_(ranks),
        esize_(size_of(o.dtype)),
        sums_(reference_sums(ranks)),
        arena_(make_arena(model.elements * esize_)),
        input_(o.dtype,
               [rank](std::size_t j) { return value_at(7 * static_cast<std::size_t>(rank) + j); }),
        expected_(o.dtype, [this](std::size_t j) { return sums_[j]; }) {
    std::size_t offset = 0;
    for (const ModelTensor& t : model.tensors) {
      offsets_.push_back(offset);
      offset += t.elements;
    }
  }

  std::byte* arena() const { return arena_.get(); }
  TensorView view(std::size_t t) const {
    return {arena_.get() + offsets_[t] * esize_, model_.tensors[t].elements, o_.dtype};
  }

  // This rank's inputs, before every step (the reductions are in place).
  void fill() const {
    for (std::size_t t = 0; t < model_.tensors.size(); ++t)
      input_.fill(arena_.get() + offsets_[t] * esize_, model_.tensors[t].elements, phase(t, 0));
  }

  // Compares every element with the reference; reports the first difference on stderr.
  bool check(const std::string& impl, int step, int rank) const {
    for (std::size_t t = 0; t < model_.tensors.size(); ++t) {
      const std::byte* got = arena_.get() + offsets_[t] * esize_;
      const std::size_t n = model_.tensors[t].elements;
      const std::size_t bad = o_.op == ReduceOp::Avg ? mismatch_avg(got, n, t)
                                                     : expected_.mismatch(got, n, phase(t, 0));
      if (bad != n) {
        double want = sums_[phase(t, bad)];
        if (o_.op == ReduceOp::Avg) want /= ranks_;
        fmt::print(stderr,
                   "concord-bench fusion: rank {}, {}, step {}: tensor '{}' element {} is {}, "
                   "expected {}\n",
                   rank, impl, step, model_.tensors[t].name, bad,
                   load_element(got + bad * esize_, o_.dtype), want);
        return false;
      }
    }
    return true;
  }

 private:
  std::size_t phase(std::size_t t, std::size_t i) const { return (31 * t + i) % kPeriod; }
  // The reference: element j of the pattern summed over all ranks.
  static std::vector<double> reference_sums(int ranks) {
    std::vector<double> sums(kPeriod, 0.0);
    for (std::size_t j = 0; j < kPeriod; ++j) {
      for (int r = 0; r < ranks; ++r) sums[j] += value_at(7 * static_cast<std::size_t>(r) + j);
    }
    return sums;
  }
  // The average need not be representable: allow the dtype's rounding.
  std::size_t mismatch_avg(const std::byte* got, std::size_t n, std::size_t t) const {
    const double eps = o_.dtype == DataType::Float16    ? 1e-3
                       : o_.dtype == DataType::BFloat16 ? 8e-3
                       : o_.dtype == DataType::Float32  ? 1e-6
                                                        : 1e-14;
    std::size_t j = phase(t, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const double want = sums_[j] / ranks_;
      const double v = load_element(got + i * esize_, o_.dtype);
      if (!(std::fabs(v - want) <= eps * std::max(1.0, std::fabs(want)))) return i;
      if (++j == kPeriod) j = 0;
    }
    return n;
  }

  const Model& model_;
  const FusionOptions& o_;
  int ranks_;
  std::size_t esize_;
  std::vector<double> sums_;
  Arena arena_;
  Tape input_;
  Tape expected_;
  std::vector<std::size_t> offsets_;
};

// ---------------------------------------------------------------------------------
// The implementations: each runs one step (every tensor reduced) on the shared arena.

struct Impl {
  std::string name;
  std::function<void()> step;
  std::shared_ptr<void> owner;  // the engine or communicator `step` uses
};

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

std::string describe_engine(const std::optional<std::size_t>& threshold,
                            const std::optional<double>& cycle_ms) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? fmt::format("{}={}", name, v) : "engine default";
  };
  const std::string t =
      threshold ? fmt::format("{} bytes", *threshold) : env("CONCORD_FUSION_THRESHOLD");
  const std::string c = cycle_ms ? fmt::format("{} ms", *cycle_ms) : env("CONCORD_CYCLE_TIME_MS");
  return fmt::format("fusion threshold {}, cycle time {}", t, c);
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

}  // namespace

Model load_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument(
        fmt::format("--model: cannot open '{}': {}", path, std::strerror(errno)));
  }
  Model model;
  model.path = path;
  std::set<std::string> names;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string_view stripped = trim(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    auto fail = [&](const std::string& what) {
      return std::invalid_argument(
          fmt::format("{}:{}: {} (expected name<TAB>shape<TAB>elements, e.g. "
                      "'conv1.weight\t64x3x7x7\t9408')",
                      path, number, what));
    };
    const std::vector<std::string> fields = split(line, '\t');
    if (fields.size() != 3) {
      throw fail(fmt::format("{} field{} where 3 separated by tabs are expected", fields.size(),
                             fields.size() == 1 ? "" : "s"));
    }
    ModelTensor t;
    t.name = std::string(trim(fields[0]));
    t.shape = std::string(trim(fields[1]));
    const std::string_view elements = trim(fields[2]);
    if (t.name.empty()) throw fail("empty tensor name");
    const auto count = parse_count(elements);
    if (!count) throw fail(fmt::format("elements '{}' is not a positive integer", elements));
    t.elements = *count;
    std::size_t product = 1;
    if (!t.shape.empty()) {
      for (const std::string& dim : split(t.shape, 'x')) {
        const auto d = parse_count(dim);
        if (!d || product > std::numeric_limits<std::size_t>::max() / *d) {
          throw fail(fmt::format("shape '{}' is not dimensions like 64x3x7x7", t.shape));
        }
        product *= *d;
      }
      if (t.shape.back() == 'x') {
        throw fail(fmt::format("shape '{}' is not dimensions like 64x3x7x7", t.shape));
      }
    }
    if (product != t.elements) {
      throw fail(fmt::format("shape '{}' has {} elements, not {}", t.shape, product, t.elements));
    }
    if (!names.insert(t.name).second) {
      throw fail(fmt::format("tensor '{}' is listed twice", t.name));
    }
    constexpr std::size_t kMaxElements = std::numeric_limits<std::size_t>::max() / 8;
    if (t.elements > kMaxElements || model.elements > kMaxElements - t.elements) {
      throw fail("the model is too large");
    }
    model.elements += t.elements;
    model.tensors.push_back(std::move(t));
  }
  if (in.bad()) throw std::invalid_argument(fmt::format("--model: cannot read '{}'", path));
  if (model.tensors.empty()) {
    throw std::invalid_argument(fmt::format("{}: no tensors in the model", path));
  }
  return model;
}

namespace {

int run_fusion(const FusionOptions& o) {
  check_options(o);
  const Model model = load_model(o.model_path);
  concord::Communicator comm = concord::Communicator::world();
  const int rank = comm.rank();
  const int p = comm.size();
  MPI_Comm world = comm.mpi_comm();
  const std::size_t esize = size_of(o.dtype);
  const std::size_t bytes = model.elements * esize;
  const std::size_t n = model.tensors.size();

  std::vector<std::string> impl_names;
  for (const std::string& name : o.impls) {
    if (name == "mpi-per-tensor" && !gradient_mpi_type(o.dtype)) {
      if (rank == 0) {
        fmt::print(stderr,
                   "concord-bench fusion: skipping mpi-per-tensor: MPI has no {} datatype\n",
                   to_string(o.dtype));
      }
      continue;
    }
    impl_names.push_back(name);
  }
  if (impl_names.empty()) {
    throw std::invalid_argument(
        fmt::format("--impl: nothing left to run with -T {}", to_string(o.dtype)));
  }
  if (std::count(impl_names.begin(), impl_names.end(), "mpi-per-tensor") != 0) {
    for (const ModelTensor& t : model.tensors) {
      if (t.elements > static_cast<std::size_t>(INT_MAX)) {
        throw std::invalid_argument(fmt::format(
            "--impl mpi-per-tensor: tensor '{}' has more elements than MPI_Allreduce takes",
            t.name));
      }
    }
  }

  Data data(model, o, rank, p);
  std::vector<TensorView> views;
  for (std::size_t t = 0; t < n; ++t) views.push_back(data.view(t));
  std::vector<std::size_t> order(n);  // this step's enqueue order on this rank

  // Collective set-up of one implementation, before it is timed: its engine or its
  // MPI communicator, owned by the Impl.
  std::vector<Handle> handles;
  handles.reserve(n);
  auto engine_impl = [&](const std::string& name, const EngineOptions& eo) {
    auto engine = std::make_shared<Engine>(comm, eo);
    return Impl{name,
                [&, e = engine.get()] {
                  handles.clear();
                  for (const std::size_t t : order) {
                    handles.push_back(e->enqueue_allreduce(model.tensors[t].name, views[t], o.op));
                  }
                  for (const Handle& h : handles) h.wait();
                },
                engine};
  };
  auto make_impl = [&](const std::string& name) -> Impl {
    if (name == "fused") {
      EngineOptions eo;
      eo.fusion_threshold = o.fusion_threshold;
      eo.cycle_time_ms = o.cycle_time_ms;
      return engine_impl(name, eo);
    }
    if (name == "unfused") {
      EngineOptions eo;
      eo.fusion_threshold = 0;
      return engine_impl(name, eo);
    }
    if (name == "mpi-per-tensor") {
      auto mpi = std::make_shared<MpiComm>();
      MPI_Comm_dup(world, &mpi->comm);
      const MPI_Datatype type = *gradient_mpi_type(o.dtype);
      return Impl{name,
                  [&, type, c = mpi->comm] {
                    for (std::size_t t = 0; t < n; ++t) {  // the file's order
                      MPI_Allreduce(MPI_IN_PLACE, views[t].data, static_cast<int>(views[t].count),
                                    type, MPI_SUM, c);
                      if (o.op == ReduceOp::Avg) {
                        scale(static_cast<std::byte*>(views[t].data), views[t].count, o.dtype, p);
                      }
                    }
                  },
                  mpi};
    }
    return Impl{name,
                [&] {  // flat
                  concord::allreduce(data.arena(), data.arena(), model.elements, o.dtype, o.op,
                                     comm);
                },
                nullptr};
  };

  std::vector<Impl> impls;
  std::vector<double> seconds(impl_names.size(), 0.0);
  std::vector<int> valid(impl_names.size(), 1);
  // Runs every step of the implementations [first, last) of `impls`.
  auto run_steps = [&](std::size_t first, std::size_t last) {
    for (int step = 0; step < o.warmup + o.iterations; ++step) {
      std::iota(order.begin(), order.end(), std::size_t{0});
      std::mt19937 rng(o.seed + 1000u * static_cast<unsigned>(rank) + static_cast<unsigned>(step));
      std::shuffle(order.begin(), order.end(), rng);
      for (std::size_t k = first; k < last; ++k) {
        // Alternate the order of the implementations from step to step.
        const std::size_t which = step % 2 == 0 ? k : first + last - 1 - k;
        data.fill();
        MPI_Barrier(world);
        const auto t0 = std::chrono::steady_clock::now();
        impls[which].step();
        const auto t1 = std::chrono::steady_clock::now();
        if (step >= o.warmup) seconds[which] += std::chrono::duration<double>(t1 - t0).count();
        if (o.validate && valid[which] != 0 && !data.check(impls[which].name, step, rank)) {
          valid[which] = 0;
        }
      }
    }
  };
  if (o.sequential) {
    // One implementation after another, each alone: its engine is created before its
    // warm-up and shut down after its last step.
    for (std::size_t k = 0; k < impl_names.size(); ++k) {
      impls.push_back(make_impl(impl_names[k]));
      run_steps(k, k + 1);
      impls.back().owner.reset();
    }
  } else {
    for (const std::string& name : impl_names) impls.push_back(make_impl(name));
    run_steps(0, impls.size());
  }

  std::vector<Measurement> row;
  for (std::size_t k = 0; k < impls.size(); ++k) {
    const Stats s = over_ranks(seconds[k] * 1e6 / o.iterations, world, p);
    int all_valid = 0;
    MPI_Allreduce(&valid[k], &all_valid, 1, MPI_INT, MPI_MIN, world);
    Measurement m;
    m.impl = impls[k].name;
    m.bytes = bytes;
    m.count = model.elements;
    m.avg_us = s.avg;
    m.min_us = s.min;
    m.max_us = s.max;
    m.iterations = o.iterations;
    m.warmup = o.warmup;
    m.busbw_gbps =
        p > 1 ? static_cast<double>(bytes) / (m.avg_us * 1e-6) * 2.0 * (p - 1) / p / 1e9 : 0.0;
    if (o.validate) m.validated = all_valid != 0;
    row.push_back(m);
  }

  if (rank == 0) {
    AllreduceOptions report;
    report.full_stats = true;
    report.validate = o.validate;
    report.dtype = o.dtype;
    report.op = o.op;
    std::string names;
    for (const Impl& impl : impls) names += (names.empty() ? "" : ", ") + impl.name;
    fmt::print("# concord-bench fusion: model {}, {} tensors, {:.2f} MiB ({} {} elements)\n",
               model.path, n, static_cast<double>(bytes) / (1 << 20), model.elements,
               to_string(o.dtype));
    fmt::print(
        "# {} ranks, op {}{}; {} timed steps after {} warm-up; each rank enqueues every tensor "
        "in its own random order (seed {})\n",
        p, to_string(o.op), o.validate ? ", validated" : "", o.iterations, o.warmup, o.seed);
    auto ran = [&](std::string_view impl) {
      return std::find(impl_names.begin(), impl_names.end(), impl) != impl_names.end();
    };
    if (ran("fused"))
      fmt::print("# fused: {}\n", describe_engine(o.fusion_threshold, o.cycle_time_ms));
    if (ran("unfused"))
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
    if (!o.json_path.empty()) write_json(o.json_path, report, p, row);
  }
  for (const Measurement& m : row) {
    if (m.validated == false) {
      if (rank == 0) fmt::print(stderr, "concord-bench: validation FAILED\n");
      return 3;
    }
  }
  return 0;
}

}  // namespace

CLI::App* add_fusion_command(CLI::App& app, FusionArgs& a) {
  CLI::App* fu = app.add_subcommand(
      "fusion",
      "One training step's gradient reduction: every tensor of a model, enqueued by each "
      "rank in its own random order, through the fusion engine and its alternatives");
  fu->add_option("--model", a.o.model_path,
                 "Model file: one tensor per line, name<TAB>shape<TAB>elements; # comments")
      ->required();
  fu->add_option("--impl", a.impls,
                 "Comma list of fused, unfused, mpi-per-tensor, flat; run interleaved step by "
                 "step, ratios relative to the first")
      ->capture_default_str();
  fu->add_option("-i,--iterations", a.o.iterations, "Timed steps")
      ->capture_default_str()
      ->check(CLI::Range(1, INT_MAX));
  fu->add_option("-x,--warmup", a.o.warmup, "Untimed steps first")
      ->capture_default_str()
      ->check(CLI::Range(0, INT_MAX));
  fu->add_flag("-c,--validate", a.o.validate, "Check every element of every step's result");
  fu->add_option("-T,--type", a.dtype, "float32, float16, bfloat16, float64")
      ->capture_default_str();
  fu->add_option("-o,--op", a.op, "sum, avg")->capture_default_str();
  fu->add_option("--seed", a.o.seed,
                 "Enqueue orders: std::mt19937(seed + 1000 * rank + step) shuffles the tensors")
      ->capture_default_str();
  fu->add_option("--fusion-threshold", a.o.fusion_threshold,
                 "Bytes, for fused (default: CONCORD_FUSION_THRESHOLD or the engine's)")
      ->check(CLI::NonNegativeNumber);
  fu->add_option("--cycle-time-ms", a.o.cycle_time_ms,
                 "For fused (default: CONCORD_CYCLE_TIME_MS or the engine's)")
      ->check(CLI::NonNegativeNumber);
  fu->add_flag("--sequential", a.o.sequential,
               "Run the implementations one after another, each with only its own engine "
               "alive, instead of interleaved step by step with every engine alive");
  fu->add_option("--json", a.o.json_path, "Also write one JSON record per implementation here");
  return fu;
}

int run_fusion_command(FusionArgs& a) {
  a.o.dtype = parse_data_type(a.dtype);
  a.o.op = parse_reduce_op(a.op);
  a.o.impls.clear();
  for (const std::string& item : split(a.impls, ',')) {
    if (!item.empty()) a.o.impls.push_back(item);
  }
  return run_fusion(a.o);
}

}  // namespace concord::bench
