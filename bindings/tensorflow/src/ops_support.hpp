// What concord's TensorFlow ops share: dtype and error mapping, op names, and
// the guard that keeps exceptions out of TensorFlow.
#pragma once

#include <concord/concord.hpp>

#include "tensorflow/core/framework/op_kernel.h"

#include <cstring>
#include <string>
#include <utility>

namespace tf = tensorflow;

namespace concord_tf {

inline tf::Status to_dtype(tf::DataType t, concord::DataType* out) {
  switch (t) {
    case tf::DT_HALF:
      *out = concord::DataType::Float16;
      return tf::Status();
    case tf::DT_BFLOAT16:
      *out = concord::DataType::BFloat16;
      return tf::Status();
    case tf::DT_FLOAT:
      *out = concord::DataType::Float32;
      return tf::Status();
    case tf::DT_DOUBLE:
      *out = concord::DataType::Float64;
      return tf::Status();
    case tf::DT_INT32:
      *out = concord::DataType::Int32;
      return tf::Status();
    case tf::DT_INT64:
      *out = concord::DataType::Int64;
      return tf::Status();
    default:
      return tf::errors::InvalidArgument("concord: unsupported dtype ", tf::DataTypeString(t));
  }
}

inline tf::Status to_status(const concord::Error& e) {
  switch (e.code()) {
    case concord::ErrorCode::InvalidArgument:
    case concord::ErrorCode::Mismatch:
      return tf::errors::InvalidArgument(e.what());
    case concord::ErrorCode::Timeout:
      return tf::errors::DeadlineExceeded(e.what());
    case concord::ErrorCode::Shutdown:
      return tf::errors::Cancelled(e.what());
    default:
      return tf::errors::Internal(e.what());
  }
}

inline std::string name_of(tf::OpKernelConstruction* c) {
  std::string name;
  if (!c->GetAttr("tensor_name", &name).ok() || name.empty()) name = c->def().name();
  return name;
}

// Runs `enqueue` (which may throw concord::Error); on a throw, fails the op.
template <typename F>
void guarded(tf::OpKernelContext* ctx, const tf::AsyncOpKernel::DoneCallback& done, F&& enqueue) {
  try {
    enqueue();
  } catch (const concord::Error& e) {
    ctx->SetStatus(to_status(e));
    done();
  } catch (const std::exception& e) {
    ctx->SetStatus(tf::errors::Internal("concord: ", e.what()));
    done();
  }
}

inline concord::Completion finish(tf::OpKernelContext* ctx, tf::AsyncOpKernel::DoneCallback done) {
  return [ctx, done = std::move(done)](const concord::Error* error) {
    if (error != nullptr) ctx->SetStatus(to_status(*error));
    done();
  };
}

// Output 0 holding input 0's values, for in-place collectives: the input's own
// buffer when TensorFlow can forward it, else a copy.
inline tf::Status output_holding_input(tf::OpKernelContext* ctx, tf::Tensor** output) {
  const tf::Tensor& input = ctx->input(0);
  TF_RETURN_IF_ERROR(ctx->forward_input_or_allocate_output({0}, 0, input.shape(), output));
  if ((*output)->data() != input.data() && input.TotalBytes() > 0) {
    std::memcpy((*output)->data(), input.data(), input.TotalBytes());
  }
  return tf::Status();
}

inline concord::ReduceOp parse_op(const std::string& op) {
  return concord::parse_reduce_op(op);
}

// The attributes every reducing op has: result = postscale * (op of prescale * x).
struct ReduceAttrs {
  concord::ReduceOp op = concord::ReduceOp::Sum;
  float prescale = 1.0f;
  float postscale = 1.0f;
};

inline tf::Status read_reduce_attrs(tf::OpKernelConstruction* c, ReduceAttrs* out) {
  std::string op;
  TF_RETURN_IF_ERROR(c->GetAttr("reduce_op", &op));
  try {
    out->op = parse_op(op);
  } catch (const concord::Error& e) {
    return to_status(e);
  }
  TF_RETURN_IF_ERROR(c->GetAttr("prescale", &out->prescale));
  return c->GetAttr("postscale", &out->postscale);
}

}  // namespace concord_tf
