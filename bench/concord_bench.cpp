// concord-bench: OSU-style microbenchmarks of concord against MPI (and NCCL).
//   mpiexec.mpich -n P concord-bench allreduce [options]
#include "allreduce_bench.hpp"
#include "bench_options.hpp"
#include "bench_report.hpp"

#include <concord/concord.hpp>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <climits>
#include <cstdio>
#include <sstream>

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 0;
  CLI::App app{"concord-bench: OSU-style collective benchmarks (run under mpiexec)"};
  try {
    app.require_subcommand(1);
    concord::bench::AllreduceOptions o;
    std::string sizes = "4:4194304";
    std::string dtype = "float32";
    std::string op = "sum";
    std::string algos = "auto";
    std::string impls = "concord";
    int iterations = 0;
    int warmup = -1;
    CLI::App* ar = app.add_subcommand("allreduce", "Allreduce latency and bus bandwidth by size");
    ar->add_option("-m,--message-size", sizes, "MIN:MAX bytes, doubling")->capture_default_str();
    ar->add_option("-i,--iterations", iterations,
                   "Timed iterations per size (default 1000 up to 8 KiB, 100 above)")
        ->check(CLI::PositiveNumber);
    ar->add_option("-x,--warmup", warmup,
                   "Warm-up iterations per size (default 100 up to 8 KiB, 10 above)")
        ->check(CLI::NonNegativeNumber);
    ar->add_flag("-f,--full", o.full_stats, "Print min/max latency and iterations");
    ar->add_flag("-c,--validate", o.validate, "Check every result against a reference");
    ar->add_option("-T,--type", dtype,
                   "int8, uint8, int32, int64, float16, bfloat16, float32, float64")
        ->capture_default_str();
    ar->add_option("-o,--op", op, "sum, prod, min, max, avg")->capture_default_str();
    ar->add_option("--algo", algos,
                   "concord algorithm(s), comma list: auto, ring, recursive_doubling, "
                   "reduce_scatter_allgather, hierarchical")
        ->capture_default_str();
    ar->add_option("--impl", impls, "Comma list of concord, mpi, nccl; run interleaved")
        ->capture_default_str();
    ar->add_option("--json", o.json_path, "Also write one JSON record per (impl, size) here");
    app.parse(argc, argv);

    std::tie(o.min_bytes, o.max_bytes) = concord::bench::parse_size_range(sizes);
    if (iterations > 0) o.iterations = iterations;
    if (warmup >= 0) o.warmup = warmup;
    o.dtype = concord::parse_data_type(dtype);
    o.op = concord::parse_reduce_op(op);
    if (!concord::is_supported(o.dtype, o.op)) {
      throw std::invalid_argument(fmt::format("-o {} is not defined for -T {}", op, dtype));
    }
    o.algorithms.clear();
    for (const std::string& a : split_list(algos))
      o.algorithms.push_back(concord::parse_algorithm(a));
    o.impls = split_list(impls);
    if (o.algorithms.empty() || o.impls.empty())
      throw std::invalid_argument("--algo and --impl need a value");
    if (o.max_bytes / concord::size_of(o.dtype) > INT_MAX) {
      throw std::invalid_argument("-m: MAX is more elements than MPI_Allreduce takes (INT_MAX)");
    }

    concord::Communicator comm = concord::Communicator::world();
    bool header_done = false;
    auto results = concord::bench::run_allreduce_bench(
        o, comm, [&](const std::vector<concord::bench::Measurement>& row) {
          if (!header_done) {
            concord::bench::print_header(o, comm.size(), row);
            header_done = true;
          }
          concord::bench::print_rows(o, row);
          if (isatty(fileno(stderr))) {
            fmt::print(stderr, "\r[{} of {} bytes done]", row[0].bytes, o.max_bytes);
            if (row[0].bytes * 2 > o.max_bytes) fmt::print(stderr, "\n");
          }
        });
    if (rank == 0 && !o.json_path.empty()) {
      concord::bench::write_json(o.json_path, o, comm.size(), results);
    }
    for (const auto& m : results) {
      if (m.validated == false) status = 3;
    }
    if (status != 0 && rank == 0) fmt::print(stderr, "concord-bench: validation FAILED\n");
  } catch (const CLI::ParseError& e) {
    // Only rank 0 prints help or the parse error; every rank exits alike.
    status = rank == 0 ? app.exit(e) : e.get_exit_code();
  } catch (const std::exception& e) {
    if (rank == 0) fmt::print(stderr, "concord-bench: error: {}\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
