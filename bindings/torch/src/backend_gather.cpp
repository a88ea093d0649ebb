// The collectives that gather or scatter (allgather, reduce-scatter, all-to-all)
// and the calls concord does not implement. The engine hands their results back
// as bytes (Handle::output), copied into the output tensors on completion.
#include "backend.hpp"

#include "tensors.hpp"

#include <cstring>
#include <utility>

namespace concord_torch {

namespace {

// The engine gathers and scatters host memory; CUDA tensors take these calls
// through another backend for now.
void host_only(const std::vector<at::Tensor>& tensors, const char* call) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_NOT_IMPLEMENTED(!is_cuda(t), "concord: ", call,
                                " takes CPU tensors only; for CUDA tensors make the group "
                                "with backend=\"cpu:concord,cuda:nccl\"");
  }
}

void copy_bytes(const at::Tensor& dense, const std::byte* from, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dense.data_ptr(), from, bytes);
}

std::size_t bytes_of(const at::Tensor& t) {
  return static_cast<std::size_t>(t.nbytes());
}

// The engine gathers and scatters rows of at least one element.
void not_empty(const at::Tensor& t, const char* call) {
  TORCH_CHECK_VALUE(t.numel() > 0, "concord: ", call,
                    ": empty tensors are not supported (the tensor has shape ", t.sizes(), ")");
}

// all_to_all_single's split sizes of one side ("input" or "output"): one per rank
// of a group of `ranks`, none negative, adding up to that side's `rows`.
void check_split_sizes(const std::vector<int64_t>& splits, int ranks, int64_t rows,
                       const char* side) {
  TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == ranks,
                    "concord: all_to_all_single: ", splits.size(), " ", side,
                    " split sizes for a group of ", ranks);
  int64_t total = 0;
  for (const int64_t n : splits) {
    TORCH_CHECK_VALUE(n >= 0, "concord: all_to_all_single: a negative ", side, " split size");
    total += n;
  }
  TORCH_CHECK_VALUE(total == rows, "concord: all_to_all_single: the ", side,
                    " split sizes add up to ", total, ", the ", side, " has ", rows, " rows");
}

}  // namespace

Step ConcordBackend::allgather_step(at::Tensor input,
                                    std::function<void(const std::vector<std::byte>&)> place,
                                    const char* call, std::string name) {
  const Staged staged = stage(input);
  const concord::TensorView view = wire_view(staged.dense);
  concord::Engine* engine = &this->engine(call);
  Step step;
  step.names = {std::move(name)};
  // One row per rank: a rank's whole tensor, so ranks whose sizes or dtypes
  // (wire_view) differ fail with the engine's mismatch error.
  step.enqueue = [engine, view, staged](const std::vector<std::string>& names,
                                        concord::Completion done) {
    return std::vector<concord::Handle>{
        engine->enqueue_allgather(names[0], view, view.count, std::move(done))};
  };
  step.after = [place = std::move(place)](const std::vector<concord::Handle>& handles) {
    place(handles[0].output());
  };
  return step;
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK_VALUE(inputs.size() == 1 && outputs.size() == 1,
                    "concord: allgather takes one input and one output list per rank");
  TORCH_CHECK_VALUE(static_cast<int>(outputs[0].size()) == size_,
                    "concord: allgather: ", outputs[0].size(), " output tensors for a group of ",
                    size_);
  check_tensors(inputs, "allgather", "input");
  check_tensors(outputs[0], "allgather", "output");
  host_only(inputs, "allgather");
  host_only(outputs[0], "allgather");
  not_empty(inputs[0], "allgather");
  for (const at::Tensor& out : outputs[0]) {
    TORCH_CHECK_VALUE(out.sizes() == inputs[0].sizes() && out.dtype() == inputs[0].dtype(),
                      "concord: allgather: an output tensor is ", out.sizes(), " ", out.dtype(),
                      ", the input ", inputs[0].sizes(), " ", inputs[0].dtype());
  }
  const std::vector<at::Tensor> targets = outputs[0];
  const std::size_t row = bytes_of(inputs[0]);
  std::vector<Step> steps;
  steps.push_back(allgather_step(
      inputs[0],
      [targets, row](const std::vector<std::byte>& gathered) {
        for (std::size_t r = 0; r < targets.size(); ++r) {
          const Staged out = stage(targets[r]);
          copy_bytes(out.dense, gathered.data() + r * row, row);
          out.copy_back();
        }
      },
      "allgather", names_.next("allgather", 1)[0]));
  return launch(c10d::OpType::ALLGATHER, "concord:all_gather", targets, std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::launch_gathers_into(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, const char* call,
    c10d::OpType type, const char* title) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "concord: ", call, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    // Every pair checked before the names are taken.
    check_tensors({inputs[i], outputs[i]}, call, "tensors");
    host_only({inputs[i], outputs[i]}, call);
    not_empty(inputs[i], call);
    TORCH_CHECK_VALUE(
        outputs[i].dtype() == inputs[i].dtype() && outputs[i].numel() == inputs[i].numel() * size_,
        "concord: ", call, ": output ", i, " (", outputs[i].numel(), " ", outputs[i].dtype(),
        ") must hold ", size_, " times input ", i, " (", inputs[i].numel(), " ", inputs[i].dtype(),
        ")");
  }
  const std::vector<std::string> names = names_.next("allgather", inputs.size());
  std::vector<Step> steps;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor target = outputs[i];
    steps.push_back(allgather_step(
        inputs[i],
        [target](const std::vector<std::byte>& gathered) {
          const Staged out = stage(target);
          copy_bytes(out.dense, gathered.data(), gathered.size());
          out.copy_back();
        },
        call, names[i]));
  }
  return launch(type, title, outputs, std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::_allgather_base(at::Tensor& output,
                                                               at::Tensor& input,
                                                               const c10d::AllgatherOptions&) {
  return launch_gathers_into({output}, {input}, "allgather_into_tensor",
                             c10d::OpType::_ALLGATHER_BASE, "concord:all_gather_into_tensor");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  return launch_gathers_into(outputs, inputs, "allgather_into_tensor_coalesced",
                             c10d::OpType::COALESCED, "concord:all_gather_into_tensor_coalesced");
}

void ConcordBackend::check_reducescatter(const at::Tensor& input, const at::Tensor& output,
                                         const c10d::ReduceOp& op, const char* call) const {
  check_tensors({input, output}, call, "tensors");
  host_only({input, output}, call);
  not_empty(output, call);
  TORCH_CHECK_VALUE(output.dtype() == input.dtype() && input.numel() == output.numel() * size_,
                    "concord: ", call, ": the input (", input.numel(), " ", input.dtype(),
                    ") must hold ", size_, " times the output (", output.numel(), " ",
                    output.dtype(), ")");
  reduce_dtype(input.scalar_type(), call);
  reduce_op_of(op, input.scalar_type(), call);
}

Step ConcordBackend::reducescatter_step(at::Tensor input, at::Tensor output,
                                        const c10d::ReduceOp& op, const char* call,
                                        std::string name) {
  const ReduceSpec spec = reduce_op_of(op, input.scalar_type(), call);
  // The caller's input stays as it is: PREMUL_SUM's factor goes into a copy.
  const at::Tensor in = premultiplied(stage(input).dense, spec);
  concord::TensorView view = reduce_view(in, call);
  const std::size_t row_elements = reduce_count(output);
  concord::Engine* engine = &this->engine(call);
  Step step;
  step.names = {std::move(name)};
  // size_ rows of one output each: rank r keeps row r, reduced.
  step.enqueue = [engine, view, row_elements, spec, in](const std::vector<std::string>& names,
                                                        concord::Completion done) {
    return std::vector<concord::Handle>{engine->enqueue_reducescatter(
        names[0], view, row_elements, spec.op, 1.0, 1.0, std::move(done))};
  };
  step.after = [output](const std::vector<concord::Handle>& handles) {
    const Staged out = stage(output);
    const auto& block = handles[0].output();
    copy_bytes(out.dense, block.data(), block.size());
    out.copy_back();
  };
  return step;
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == 1 && inputs.size() == 1,
                    "concord: reduce_scatter takes one output and one input list per rank");
  TORCH_CHECK_VALUE(static_cast<int>(inputs[0].size()) == size_,
                    "concord: reduce_scatter: ", inputs[0].size(), " input tensors for a group of ",
                    size_);
  check_tensors(inputs[0], "reduce_scatter", "input");
  check_tensors(outputs, "reduce_scatter", "output");
  for (const at::Tensor& in : inputs[0]) {
    TORCH_CHECK_VALUE(in.sizes() == outputs[0].sizes() && in.dtype() == outputs[0].dtype(),
                      "concord: reduce_scatter: an input tensor is ", in.sizes(), " ", in.dtype(),
                      ", the output ", outputs[0].sizes(), " ", outputs[0].dtype());
  }
  // The inputs side by side, one row per rank.
  std::vector<at::Tensor> rows;
  for (const at::Tensor& in : inputs[0]) rows.push_back(in.reshape({-1}));
  return launch_reducescatters(outputs, {at::cat(rows)}, opts.reduceOp, "reduce_scatter",
                               c10d::OpType::REDUCE_SCATTER, "concord:reduce_scatter");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::launch_reducescatters(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
    const c10d::ReduceOp& op, const char* call, c10d::OpType type, const char* title) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "concord: ", call, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  // Every pair checked before the names are taken.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_reducescatter(inputs[i], outputs[i], op, call);
  }
  const std::vector<std::string> names = names_.next("reducescatter", inputs.size());
  std::vector<Step> steps;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    steps.push_back(reducescatter_step(inputs[i], outputs[i], op, call, names[i]));
  }
  return launch(type, title, outputs, std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return launch_reducescatters({output}, {input}, opts.reduceOp, "reduce_scatter_tensor",
                               c10d::OpType::_REDUCE_SCATTER_BASE, "concord:reduce_scatter_tensor");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return launch_reducescatters(outputs, inputs, opts.reduceOp, "reduce_scatter_tensor_coalesced",
                               c10d::OpType::COALESCED, "concord:reduce_scatter_tensor_coalesced");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  check_tensors({input, output}, "alltoall_base", "tensors");
  host_only({input, output}, "alltoall_base");
  TORCH_CHECK_VALUE(output.dtype() == input.dtype(), "concord: all_to_all_single: the output is ",
                    output.dtype(), ", the input ", input.dtype());
  // Rows are slices along the first dimension (single elements for a 1-D tensor).
  const int64_t rows = input.dim() == 0 ? 1 : input.size(0);
  std::size_t row_bytes = static_cast<std::size_t>(input.element_size());
  for (int64_t d = 1; d < input.dim(); ++d) row_bytes *= static_cast<std::size_t>(input.size(d));
  TORCH_CHECK_VALUE(row_bytes > 0, "concord: all_to_all_single: rows of no elements (shape ",
                    input.sizes(), ") are not supported");
  std::vector<std::size_t> send_rows;
  if (!input_split_sizes.empty()) {
    check_split_sizes(input_split_sizes, size_, rows, "input");
    send_rows.assign(input_split_sizes.begin(), input_split_sizes.end());
  }
  // What this rank can check of the output before any data moves (what the peers
  // send is checked on arrival): the input's rows, split as given.
  const std::size_t output_bytes = bytes_of(output);
  TORCH_CHECK_VALUE(output_bytes % row_bytes == 0, "concord: all_to_all_single: the output (shape ",
                    output.sizes(), ") is not made of the input's rows of ", row_bytes, " bytes");
  if (!output_split_sizes.empty()) {
    check_split_sizes(output_split_sizes, size_, static_cast<int64_t>(output_bytes / row_bytes),
                      "output");
  }
  const Staged in = stage(input);
  const concord::TensorView view = wire_view(in.dense);
  const std::size_t row_elements =
      row_bytes / static_cast<std::size_t>(input.element_size()) * wire_elements(input);
  concord::Engine* engine = &this->engine("alltoall_base");
  const std::vector<int64_t> expected = output_split_sizes;
  Step step;
  step.names = names_.next("alltoall", 1);
  step.enqueue = [engine, view, row_elements, send_rows, in](const std::vector<std::string>& names,
                                                             concord::Completion done) {
    return std::vector<concord::Handle>{
        engine->enqueue_alltoall(names[0], view, row_elements, send_rows, std::move(done))};
  };
  step.after = [output, expected, row_bytes](const std::vector<concord::Handle>& handles) {
    const auto& received = handles[0].output();
    const auto& from = handles[0].first_dims();
    for (std::size_t r = 0; r < expected.size() && r < from.size(); ++r) {
      TORCH_CHECK_VALUE(static_cast<int64_t>(from[r]) == expected[r],
                        "concord: all_to_all_single: rank ", r, " sent ", from[r],
                        " rows, the output split sizes expect ", expected[r]);
    }
    TORCH_CHECK_VALUE(received.size() == bytes_of(output),
                      "concord: all_to_all_single: ", received.size() / (row_bytes ? row_bytes : 1),
                      " rows arrived for an output of ", output.numel(), " elements");
    const Staged out = stage(output);
    copy_bytes(out.dense, received.data(), received.size());
    out.copy_back();
  };
  std::vector<Step> steps;
  steps.push_back(std::move(step));
  return launch(c10d::OpType::ALLTOALL_BASE, "concord:all_to_all", {output}, std::move(steps));
}

}  // namespace concord_torch
