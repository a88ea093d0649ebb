// `concord-bench fusion --model FILE.tsv`: one training step's gradient reduction.
// Every rank enqueues all tensors of a model in its own random order and waits for
// them; the fusion engine (fused and unfused), one MPI_Allreduce per tensor, and one
// flat allreduce of all the bytes (the lower bound) run interleaved step by step.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace concord::bench {

struct ModelTensor {
  std::string name;
  std::string shape;  // as written, e.g. "64x3x7x7"
  std::size_t elements = 0;
};

struct Model {
  std::string path;
  std::vector<ModelTensor> tensors;  // in the file's order
  std::size_t elements = 0;          // sum over the tensors
};

// Reads a model file: one tensor per line, `name<TAB>shape<TAB>elements`, the shape's
// dimensions separated by 'x' (empty for a scalar) and multiplying to `elements`.
// Lines starting with '#' and blank lines are skipped. Throws std::invalid_argument
// naming the file and line of the first malformed line.
Model load_model(const std::string& path);

struct FusionOptions {
  std::string model_path;
  std::vector<std::string> impls{"fused", "unfused", "mpi-per-tensor", "flat"};
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int iterations = 20;
  int warmup = 3;
  bool validate = false;
  // One implementation after another, each engine alone, instead of interleaved step
  // by step with every engine alive (idle engines still run their cycles).
  bool sequential = false;
  unsigned seed = 0;
  std::optional<std::size_t> fusion_threshold;  // for `fused`; unset: the engine's default
  std::optional<double> cycle_time_ms;          // for `fused`; unset: the engine's default
  std::string json_path;
};

// The command line as typed.
struct FusionArgs {
  FusionOptions o;
  std::string impls = "fused,unfused,mpi-per-tensor,flat";
  std::string dtype = "float32";
  std::string op = "sum";
};

// Runs the subcommand (under MPI); returns the exit status (3 when validation failed).
int run_fusion_command(FusionArgs& args);

}  // namespace concord::bench
