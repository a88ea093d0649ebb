// concord-bench: OSU-style microbenchmarks of concord against MPI (and NCCL).
//   mpiexec.mpich -n P concord-bench allreduce [options]
//   concord-bench memcpy [options]       (the memory-bandwidth roofline; also under mpiexec)
//   mpiexec.mpich -n P concord-bench fusion --model FILE.tsv [options]   (one training step)
//   concord-bench kernels [options]      (the CUDA kernels on one GPU; needs a CUDA build)
// Without mpiexec it runs as a single rank (MPI singleton).
// Every subcommand's command line is declared here, the one file that includes CLI11:
// CLI11 2.1 (Debian 12's) is header-only and adds about 25 s of compile (ASan) to each
// file that includes it. The subcommands' headers hold only their option structs.
#include "allreduce/allreduce_bench.hpp"
#include "common/bench_options.hpp"
#include "common/bench_report.hpp"
#include "fusion/fusion_bench.hpp"
#include "kernels/kernels_bench.hpp"
#include "memcpy/memcpy_bench.hpp"

#include <concord/concord.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

// The allreduce subcommand: its options as typed, then turned into AllreduceOptions.
struct AllreduceArgs {
  concord::bench::AllreduceOptions o;
  std::string sizes = "4:4194304";
  std::string dtype = "float32";
  std::string op = "sum";
  std::string algos = "auto";
  std::string impls = "concord";
  std::string device = "cpu";
  std::string buffers = "thp";
  std::vector<std::string> tags;
  int iterations = 0;
  int warmup = -1;
};

CLI::App* add_allreduce(CLI::App& app, AllreduceArgs& a) {
  CLI::App* ar = app.add_subcommand("allreduce", "Allreduce latency and bus bandwidth by size");
  ar->add_option("-m,--message-size", a.sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  ar->add_option("-i,--iterations", a.iterations,
                 "Timed iterations per size (default 1000 up to 8 KiB, 100 above)")
      ->check(CLI::Range(1, INT_MAX));
  ar->add_option("-x,--warmup", a.warmup,
                 "Warm-up iterations per size (default 100 up to 8 KiB, 10 above)")
      ->check(CLI::Range(0, INT_MAX));
  ar->add_flag("-f,--full", a.o.full_stats, "Print min/max latency and iterations");
  ar->add_flag("-c,--validate", a.o.validate,
               "Check each implementation's result against a serial reference, in calls "
               "before and after the timed ones (timing is the same with or without -c)");
  ar->add_option("-T,--type", a.dtype,
                 "int8, uint8, int32, int64, float16, bfloat16, float32, float64")
      ->capture_default_str();
  ar->add_option("-o,--op", a.op, "sum, prod, min, max, avg")->capture_default_str();
  ar->add_option("--algo", a.algos,
                 "concord algorithm(s), comma list: auto, ring, recursive_doubling, "
                 "reduce_scatter_allgather, hierarchical")
      ->capture_default_str();
  ar->add_option("--impl", a.impls,
                 "Comma list of concord, mpi, concord-copy (concord without single-copy reads), "
                 "concord-engine (host only: through the fusion engine, one grouped enqueue and "
                 "a wait, after copying the input to the output; --algo does not apply), "
                 "concord-shared (concord on buffers from allocate_shared), mpi-shared (MPI on "
                 "them), roofline (host memcpy in to out), roofline-shared (the same on "
                 "allocate_shared buffers), nccl, concord-peer, concord-rounds, concord-staged, "
                 "device-one-shot and device-two-shot (with --device cuda; the last two: the "
                 "device-synchronised kernels alone, one node); run interleaved")
      ->capture_default_str();
  ar->add_option("--device", a.device,
                 "Where the buffers are: cpu, or cuda (GPU local_rank % GPUs; mpi then stages "
                 "through pinned host memory)")
      ->capture_default_str();
  ar->add_option("--buffers", a.buffers,
                 "Host buffers: thp (2 MiB-aligned, transparent huge pages, touched before "
                 "timing, as frameworks' allocators give) or ordinary (malloc'd, 4 KiB pages, "
                 "not touched before the first call, as most applications have them)")
      ->capture_default_str();
  ar->add_option("--json", a.o.json_path, "Also write one JSON record per (impl, size) here");
  ar->add_option("--tag", a.tags,
                 "KEY=VALUE to write into every --json record (repeatable), e.g. --tag mps=on");
  return ar;
}

// --tag KEY=VALUE, each a field of every record: not a field the records have, and
// each key once.
std::vector<std::pair<std::string, std::string>> parse_tags(const std::vector<std::string>& given) {
  std::vector<std::pair<std::string, std::string>> tags;
  for (const std::string& tag : given) {
    const std::size_t eq = tag.find('=');
    if (eq == 0 || eq == std::string::npos) {
      throw std::invalid_argument("--tag: expected KEY=VALUE, not '" + tag + "'");
    }
    const std::string key = tag.substr(0, eq);
    if (concord::bench::is_record_field(key)) {
      throw std::invalid_argument("--tag " + key +
                                  ": the records have a field of that name already");
    }
    // Given twice, the records would keep the last value only, and say nothing.
    for (const auto& [earlier, value] : tags) {
      if (earlier == key) {
        throw std::invalid_argument("--tag " + key + ": given twice ('" + key + "=" + value +
                                    "' and '" + tag + "')");
      }
    }
    tags.emplace_back(key, tag.substr(eq + 1));
  }
  return tags;
}

int run_allreduce(AllreduceArgs& a, int rank) {
  concord::bench::AllreduceOptions& o = a.o;
  std::tie(o.min_bytes, o.max_bytes) = concord::bench::parse_size_range(a.sizes);
  if (a.iterations > 0) o.iterations = a.iterations;
  if (a.warmup >= 0) o.warmup = a.warmup;
  o.dtype = concord::parse_data_type(a.dtype);
  o.op = concord::parse_reduce_op(a.op);
  if (!concord::is_supported(o.dtype, o.op)) {
    throw std::invalid_argument(fmt::format("-o {} is not defined for -T {}", a.op, a.dtype));
  }
  concord::bench::size_steps(o.min_bytes, o.max_bytes, concord::size_of(o.dtype));  // checks -m
  o.algorithms.clear();
  for (const std::string& name : concord::bench::split_list(a.algos))
    o.algorithms.push_back(concord::parse_algorithm(name));
  o.impls = concord::bench::split_list(a.impls);
  if (a.device == "cuda") {
    o.device = concord::Device::Cuda;
  } else if (a.device != "cpu") {
    throw std::invalid_argument("--device: expected cpu or cuda, not '" + a.device + "'");
  }
  if (a.buffers == "ordinary") {
    o.ordinary_buffers = true;
  } else if (a.buffers != "thp") {
    throw std::invalid_argument("--buffers: expected thp or ordinary, not '" + a.buffers + "'");
  }
  if (o.algorithms.empty() || o.impls.empty())
    throw std::invalid_argument("--algo and --impl need a value");
  o.tags = parse_tags(a.tags);
  if (o.device == concord::Device::Cuda &&
      (o.algorithms.size() != 1 || o.algorithms[0] != concord::Algorithm::Auto)) {
    // Rows named concord:<algo> would all run the same device code.
    throw std::invalid_argument(
        "--algo: device buffers take their algorithm from the topology (docs/GPU.md); "
        "--algo applies to --device cpu only");
  }
  if (o.max_bytes / concord::size_of(o.dtype) > INT_MAX) {
    throw std::invalid_argument("-m: MAX is more elements than MPI_Allreduce takes (INT_MAX)");
  }

  concord::Communicator comm = concord::Communicator::world();
  bool header_done = false;
  nlohmann::json context;
  auto results = concord::bench::run_allreduce_bench(
      o, comm,
      [&](const std::vector<concord::bench::Measurement>& row) {
        if (!header_done) {
          concord::bench::print_header(o, comm.size(), row);
          header_done = true;
        }
        concord::bench::print_rows(o, row);
        if (isatty(fileno(stderr))) {
          fmt::print(stderr, "\r[{} of {} bytes done]", row[0].bytes, o.max_bytes);
          if (row[0].bytes * 2 > o.max_bytes) fmt::print(stderr, "\n");
        }
      },
      &context);
  if (rank == 0 && !o.json_path.empty()) {
    concord::bench::write_json(o.json_path, o, comm.size(), results, context);
  }
  int status = 0;
  for (const auto& m : results) {
    if (m.validated == false) status = 3;
  }
  if (status != 0 && rank == 0) fmt::print(stderr, "concord-bench: validation FAILED\n");
  return status;
}

// The memcpy subcommand.
struct MemcpyArgs {
  concord::bench::MemcpyOptions o;
  std::string sizes = "4096:67108864";
  int iterations = 0;
};

CLI::App* add_memcpy(CLI::App& app, MemcpyArgs& a) {
  CLI::App* mc = app.add_subcommand(
      "memcpy", "Memory bandwidth of one core by size (memcpy, float32 a + b): the roofline");
  mc->add_option("-m,--message-size", a.sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  mc->add_option("-i,--iterations", a.iterations,
                 "Timed samples per size, each a batch of calls moving >= 4 MiB; the median "
                 "is reported (default 15)")
      ->check(CLI::Range(1, INT_MAX));
  mc->add_flag("--all-ranks", a.o.all_ranks,
               "Under mpiexec: every rank measures at once (ranks share memory bandwidth); "
               "default: rank 0 alone");
  mc->add_flag("--cma", a.o.cma,
               "Under mpiexec, ranks on one node: also time process_vm_readv of the next "
               "rank's buffer (cross-memory attach, concord's single-copy read); implies "
               "--all-ranks");
  mc->add_option("--json", a.o.json_path, "Also write one JSON record per (kernel, size) here");
  return mc;
}

int run_memcpy(MemcpyArgs& a) {
  std::tie(a.o.min_bytes, a.o.max_bytes) = concord::bench::parse_size_range(a.sizes);
  concord::bench::size_steps(a.o.min_bytes, a.o.max_bytes, sizeof(float));  // checks -m
  if (a.iterations > 0) a.o.iterations = a.iterations;
  concord::bench::run_memcpy_bench(a.o, MPI_COMM_WORLD);
  return 0;
}

CLI::App* add_fusion(CLI::App& app, concord::bench::FusionArgs& a) {
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

CLI::App* add_kernels(CLI::App& app, concord::bench::KernelsArgs& a) {
  CLI::App* k = app.add_subcommand(
      "kernels",
      "concord's CUDA kernels on one GPU: reduce bandwidth vs cudaMemcpyAsync by size, or "
      "(--model) packing a model's gradients with batched_copy vs one memcpy per tensor");
  k->add_option("-m,--message-size", a.sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  k->add_option("-T,--type", a.dtypes,
                "Comma list: int8, uint8, int32, int64, float16, bfloat16, float32, float64 "
                "(--model: the first)")
      ->capture_default_str();
  k->add_option("-o,--op", a.ops, "Comma list: sum, prod, min, max, avg")->capture_default_str();
  k->add_option("-i,--iterations", a.iterations, "Timed samples per measurement (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, INT_MAX));
  k->add_option("-x,--warmup", a.warmup, "Untimed calls before each measurement")
      ->capture_default_str()
      ->check(CLI::Range(0, INT_MAX));
  k->add_option("--offset", a.offset,
                "Elements added to every reduce pointer (1: not 16-byte aligned)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  k->add_option("--model", a.model_path,
                "Model file (name<TAB>shape<TAB>elements per line): time packing its gradients "
                "into one fusion buffer and back instead of reduce");
  k->add_option("--factor", a.factor, "--model: scale factor applied while unpacking")
      ->capture_default_str();
  k->add_option("--json", a.json_path, "Also write one JSON record per measurement here");
  return k;
}

// Waits, at most `bound`, until whoever reads this process's stderr pipe has
// read all of it. Hydra's proxy reads the pipe and the rank's MPI_Abort on
// separate descriptors but forwards both over one connection to mpiexec, which
// exits at the abort: an abort the proxy happens to read first loses the
// message saying why the job ended (seen in CI on a loaded 2-core machine).
// Once the pipe is empty the message is ahead of the abort on that connection.
void wait_until_stderr_is_read(std::chrono::milliseconds bound) {
  struct stat target {};
  if (fstat(STDERR_FILENO, &target) != 0 || !S_ISFIFO(target.st_mode)) return;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  int unread = 0;
  while (ioctl(STDERR_FILENO, FIONREAD, &unread) == 0 && unread > 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// Ends the whole job after a peer timed out. MPI_Abort asks the launcher to
// kill every rank; when the launcher is behind the same dead link it never
// answers, so after a grace period the process exits on its own.
[[noreturn]] void abort_job(int code) {
  std::fflush(stderr);
  std::thread([code] {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    std::_Exit(code);
  }).detach();
  wait_until_stderr_is_read(std::chrono::seconds(2));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  CLI::App app{
      "concord-bench: OSU-style collective benchmarks (under mpiexec, or alone as one "
      "rank)"};
  try {
    app.require_subcommand(1);
    AllreduceArgs allreduce_args;
    MemcpyArgs memcpy_args;
    concord::bench::FusionArgs fusion_args;
    CLI::App* allreduce_cmd = add_allreduce(app, allreduce_args);
    CLI::App* memcpy_cmd = add_memcpy(app, memcpy_args);
    CLI::App* fusion_cmd = add_fusion(app, fusion_args);
    concord::bench::KernelsArgs kernels_args;
    CLI::App* kernels_cmd = add_kernels(app, kernels_args);
    app.parse(argc, argv);
    if (allreduce_cmd->parsed()) status = run_allreduce(allreduce_args, rank);
    if (memcpy_cmd->parsed()) status = run_memcpy(memcpy_args);
    if (fusion_cmd->parsed()) status = concord::bench::run_fusion_command(fusion_args);
    if (kernels_cmd->parsed()) status = concord::bench::run_kernels_command(kernels_args);
  } catch (const CLI::ParseError& e) {
    // Only rank 0 prints help or the parse error; every rank exits alike.
    status = rank == 0 ? app.exit(e) : e.get_exit_code();
  } catch (const concord::Error& e) {
    // A timed-out peer is presumed dead or unreachable: MPI_Finalize would wait
    // for it too, so this rank says why and ends the job.
    if (e.code() == concord::ErrorCode::Timeout) {
      fmt::print(stderr, "concord-bench: error: {}\n", e.what());
      abort_job(3);
    }
    // Every rank says why: an error raised on one rank only (an allocation, a
    // device call) would be lost otherwise. concord's messages name the rank.
    fmt::print(stderr, "concord-bench: error: {}\n", e.what());
    status = 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "concord-bench: rank {}: error: {}\n", rank, e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
