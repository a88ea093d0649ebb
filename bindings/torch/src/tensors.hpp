// How torch tensors and reduce ops become concord's: dtypes, ops, views, and
// the errors for what concord cannot take. Every function here throws a torch
// error (c10::TypeError, c10::ValueError, c10::NotImplementedError) naming the
// call and what was wrong, which torch turns into the matching Python exception.
#pragma once

#include <concord/concord.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace concord_torch {

// concord's dtype for a tensor of `dtype`, where it has one: complex tensors
// as pairs of their real type.
std::optional<concord::DataType> concord_dtype(at::ScalarType dtype);

// The dtype concord reduces a tensor of `dtype` as (concord_dtype, raising
// TypeError where there is none). Complex tensors reduce as
// pairs of their real type (valid for sum and average only, which the caller
// checks through reduce_op_of).
concord::DataType reduce_dtype(at::ScalarType dtype, const char* call);

// result = op over ranks of factor * x: torch's op as concord's. `factor` is
// PREMUL_SUM's, this rank's own (NCCL multiplies each rank's input by its own
// factor, which may differ between ranks): it is applied here, to this rank's
// tensor (premultiplied), before a plain Sum, never handed to concord as a
// prescale, which must agree on every rank.
struct ReduceSpec {
  concord::ReduceOp op = concord::ReduceOp::Sum;
  double factor = 1.0;
};
ReduceSpec reduce_op_of(const c10d::ReduceOp& op, at::ScalarType dtype, const char* call);

// `input`, which must stay as it is, times spec.factor: a new tensor where the
// factor is not 1, else `input` itself.
at::Tensor premultiplied(const at::Tensor& input, const ReduceSpec& spec);

// Elements concord reduces for `t` (twice numel for a complex tensor).
std::size_t reduce_count(const at::Tensor& t);

// Checks every collective's tensors share: dense (not sparse), on the CPU or a
// CUDA device, all on the same device; `what` names the argument in errors.
void check_tensors(const std::vector<at::Tensor>& tensors, const char* call, const char* what);

// The tensor concord works on: `t` itself when it is contiguous, else a
// contiguous copy that `copy_back` writes into `t` after the collective.
struct Staged {
  at::Tensor original;
  at::Tensor dense;
  void copy_back() const {
    if (!dense.is_same(original)) original.copy_(dense);
  }
};
Staged stage(const at::Tensor& t);
// stage(t) for a reduction that writes its result into `t`: where spec has a
// factor (PREMUL_SUM), `dense` is always a copy, t times the factor, so that a
// call that fails (ranks that disagree, say) leaves `t` as it was. On a CUDA
// tensor the product is queued on the current stream, which the engine waits for.
Staged stage_premultiplied(const at::Tensor& t, const ReduceSpec& spec);

// A view of `t` (contiguous) for the engine; CUDA tensors carry the current
// stream of their device, so the engine runs after the work queued on it.
concord::TensorView reduce_view(const at::Tensor& t, const char* call);
// The same bytes as uint8 (any dtype).
concord::TensorView byte_view(const at::Tensor& t);
// A view of `t` (contiguous) for the collectives that only move data
// (broadcast, allgather, all-to-all): in concord_dtype where the tensor's dtype
// has one, so that the engine's cross-rank check of the dtype catches ranks
// passing different dtypes of the same byte size (float32 and int32, say),
// which as bytes would read each other's data as their own; bytes otherwise
// (bool, int16, ...: those concord cannot tell apart).
concord::TensorView wire_view(const at::Tensor& t);
// Elements of wire_view(t) per element of `t`.
std::size_t wire_elements(const at::Tensor& t);

bool is_cuda(const at::Tensor& t);

}  // namespace concord_torch
