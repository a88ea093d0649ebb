// Output of concord-bench: the OSU table on stdout, records as JSON.
#pragma once

#include "allreduce/allreduce_bench.hpp"
#include "common/bench_options.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace concord::bench {

// Header lines: what runs, then OSU's column header (plus busbw and ratios).
void print_header(const AllreduceOptions& o, int ranks, const std::vector<Measurement>& first_row);
// The column header line alone (print_header's last line), for other subcommands
// that print their own title lines before the same table.
void print_columns(const AllreduceOptions& o, const std::vector<Measurement>& first_row);
// One line per implementation of a size: OSU columns, busbw, and for every
// implementation after the first its latency as a ratio to the first's.
void print_rows(const AllreduceOptions& o, const std::vector<Measurement>& row);

// Whether every allreduce record has a field `key` (of its own or of the device's):
// --tag may not name one.
bool is_record_field(std::string_view key);

// One record per measurement; an empty `algorithm` is written as null. Each also
// carries `context`'s fields (what the run found of its device) and the --tag ones.
void write_json(const std::string& path, const AllreduceOptions& o, int ranks,
                const std::vector<Measurement>& all,
                const nlohmann::json& context = nlohmann::json::object());

}  // namespace concord::bench
