#include "common/bench_report.hpp"

#include <concord/version.hpp>

#include "concord_commit.h"  // generated at build time: CONCORD_COMMIT

#include <fmt/format.h>
#include <mpi.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>

namespace concord::bench {
namespace {
// OSU micro-benchmarks: sizes left-aligned in 10 columns, values in 18 with 2 decimals.
constexpr int kSizeWidth = 10;
constexpr int kFieldWidth = 18;

std::string label(const Measurement& m) {
  return m.impl.starts_with("concord") ? m.impl + ":" + m.algorithm : m.impl;
}

// The Impl column is as wide as the longest label, so the ratio column after it
// never runs into it; the ratio column is as wide as its header.
int impl_width(const std::vector<Measurement>& row) {
  std::size_t width = std::string_view("Impl").size();
  for (const Measurement& m : row) width = std::max(width, label(m).size());
  return static_cast<int>(width);
}
std::string ratio_header(const std::vector<Measurement>& row) {
  return "ratio(/" + label(row[0]) + ")";
}
// With --impl ...,roofline: the roofline of the same size, same run.
const Measurement* roofline_of(const std::vector<Measurement>& row) {
  for (const Measurement& m : row) {
    if (m.impl == "roofline") return &m;
  }
  return nullptr;
}
constexpr std::string_view kRooflineHeader = "%roofline";
}  // namespace

void print_header(const AllreduceOptions& o, int ranks, const std::vector<Measurement>& first_row) {
  std::string impls;
  for (const Measurement& m : first_row) impls += (impls.empty() ? "" : ", ") + label(m);
  fmt::print("# concord-bench allreduce: {} ranks, dtype {}, op {}{}{}\n", ranks,
             to_string(o.dtype), to_string(o.op), o.validate ? ", validated" : "",
             o.ordinary_buffers ? ", ordinary buffers (malloc, 4 KiB pages, not pre-touched)" : "");
  fmt::print("# Implementations, interleaved size by size: {}\n", impls);
  print_columns(o, first_row);
}

void print_columns(const AllreduceOptions& o, const std::vector<Measurement>& first_row) {
  std::string header =
      fmt::format("{:<{}}{:>{}}", "# Size", kSizeWidth, "Avg Latency(us)", kFieldWidth);
  if (o.full_stats) {
    header += fmt::format("{:>{}}{:>{}}{:>{}}", "Min Latency(us)", kFieldWidth, "Max Latency(us)",
                          kFieldWidth, "Iterations", kFieldWidth);
  }
  header += fmt::format("{:>{}}", "busbw(GB/s)", kFieldWidth);
  if (o.validate) header += fmt::format("{:>{}}", "Validation", kFieldWidth);
  if (first_row.size() > 1) {
    header += fmt::format("  {:<{}}  {}", "Impl", impl_width(first_row), ratio_header(first_row));
    if (roofline_of(first_row)) header += fmt::format("  {}", kRooflineHeader);
  } else {
    header += "  Impl";
  }
  fmt::print("{}\n", header);
  std::fflush(stdout);
}

void print_rows(const AllreduceOptions& o, const std::vector<Measurement>& row) {
  for (const Measurement& m : row) {
    std::string line = fmt::format("{:<{}}{:>{}.2f}", m.bytes, kSizeWidth, m.avg_us, kFieldWidth);
    if (o.full_stats) {
      line += fmt::format("{:>{}.2f}{:>{}.2f}{:>{}}", m.min_us, kFieldWidth, m.max_us, kFieldWidth,
                          m.iterations, kFieldWidth);
    }
    line += fmt::format("{:>{}.2f}", m.busbw_gbps, kFieldWidth);
    if (m.validated) line += fmt::format("{:>{}}", *m.validated ? "Pass" : "FAIL", kFieldWidth);
    if (row.size() > 1) {
      // Time relative to the first implementation's (1.00 on its own line).
      const int ratio_width = static_cast<int>(ratio_header(row).size());
      line += fmt::format("  {:<{}}  {:>{}.2f}", label(m), impl_width(row),
                          m.avg_us / row[0].avg_us, ratio_width);
      // "% of roofline": the same-run copy's time over this implementation's.
      if (const Measurement* roof = roofline_of(row)) {
        line += fmt::format("  {:>{}.1f}", 100.0 * roof->avg_us / m.avg_us,
                            static_cast<int>(kRooflineHeader.size()));
      }
    } else {
      line += fmt::format("  {}", label(m));
    }
    fmt::print("{}\n", line);
  }
  std::fflush(stdout);
}

namespace {

// Where a record was measured, so that a JSON file can be traced without the
// shell history: host, MPI library, concord version and commit.
nlohmann::json provenance() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(library, &length);
  std::string mpi(library, static_cast<std::size_t>(std::max(length, 0)));
  mpi = mpi.substr(0, mpi.find('\n'));  // the first line names library and version
  return {{"host", host},
          {"mpi_library", mpi},
          {"concord_version", CONCORD_VERSION_STRING},
          {"commit", CONCORD_COMMIT}};
}

// Which memory a record's implementation ran on: the device, the node's shared heap
// (the *-shared impls), or the host buffers --buffers chose.
std::string buffers_of(const AllreduceOptions& o, std::string_view impl) {
  if (o.device == Device::Cuda) return "device";
  if (impl.ends_with("-shared")) return "shared-heap";
  return o.ordinary_buffers ? "ordinary" : "thp";
}

// One measurement's record, before the run's context and tags.
nlohmann::json record_of(const Measurement& m, const AllreduceOptions& o, int ranks,
                         const nlohmann::json& where) {
  return {{"impl", m.impl},
          {"algorithm", m.algorithm.empty() ? nlohmann::json() : nlohmann::json(m.algorithm)},
          {"dtype", std::string(to_string(o.dtype))},
          {"op", std::string(to_string(o.op))},
          {"ranks", ranks},
          {"bytes", m.bytes},
          {"count", m.count},
          {"avg_us", m.avg_us},
          {"min_us", m.min_us},
          {"max_us", m.max_us},
          {"iterations", m.iterations},
          {"warmup", m.warmup},
          {"busbw_gbps", m.busbw_gbps},
          {"validated", m.validated ? nlohmann::json(*m.validated) : nlohmann::json()},
          {"device", o.device == Device::Cuda ? "cuda" : "cpu"},
          {"buffers", buffers_of(o, m.impl)},
          {"host", where["host"]},
          {"mpi_library", where["mpi_library"]},
          {"concord_version", where["concord_version"]},
          {"commit", where["commit"]}};
}

// What DeviceBench::context() adds on device runs.
constexpr std::string_view kDeviceFields[] = {"gpu",      "ranks_per_gpu",    "nccl_version",
                                              "nccl_env", "ranks_concurrent", "probe_meeting_us"};

}  // namespace

bool is_record_field(std::string_view key) {
  const nlohmann::json record = record_of(Measurement{}, AllreduceOptions{}, 1, provenance());
  return record.contains(key) || std::find(std::begin(kDeviceFields), std::end(kDeviceFields),
                                           key) != std::end(kDeviceFields);
}

void write_json(const std::string& path, const AllreduceOptions& o, int ranks,
                const std::vector<Measurement>& all, const nlohmann::json& context) {
  nlohmann::json records = nlohmann::json::array();
  const nlohmann::json where = provenance();
  for (const Measurement& m : all) {
    nlohmann::json record = record_of(m, o, ranks, where);
    for (const auto& [key, value] : context.items()) record[key] = value;
    for (const auto& [key, value] : o.tags) record[key] = value;
    records.push_back(std::move(record));
  }
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--json: cannot write " + path);
  out << records.dump(1) << "\n";
}

}  // namespace concord::bench
