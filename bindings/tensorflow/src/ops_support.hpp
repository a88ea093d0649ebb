// What concord's TensorFlow ops share: dtype and error mapping, op names, the
// guard that keeps exceptions out of TensorFlow, and the completion of ops whose
// outputs the engine's handle holds.
#pragma once

#include <concord/concord.hpp>

#include "tensorflow/core/framework/op_kernel.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

using Emit = std::function<tf::Status(const concord::Handle&)>;
using Enqueue = std::function<concord::Handle(concord::Completion)>;

// Enqueues with a completion that, once the engine is done, hands the handle to
// `emit` (which allocates and fills the outputs) and finishes the op.
inline void run_with_outputs(tf::OpKernelContext* ctx, const tf::AsyncOpKernel::DoneCallback& done,
                             const Enqueue& enqueue, Emit emit) {
  struct State {
    std::atomic<bool> stored{false};
    concord::Handle handle;
  };
  auto state = std::make_shared<State>();
  guarded(ctx, done, [&] {
    state->handle = enqueue([ctx, done, state, emit](const concord::Error* error) {
      if (error != nullptr) {
        ctx->SetStatus(to_status(*error));
        done();
        return;
      }
      // The completion may run before enqueue() has returned the handle.
      while (!state->stored.load()) std::this_thread::yield();
      try {
        tf::Status s = emit(state->handle);
        if (!s.ok()) ctx->SetStatus(s);
      } catch (const concord::Error& e) {
        ctx->SetStatus(to_status(e));
      } catch (const std::exception& e) {
        ctx->SetStatus(tf::errors::Internal("concord: ", e.what()));
      }
      done();
    });
    state->stored = true;
  });
}

// `shape` with `rows` as its first dimension, filled from `bytes`.
inline tf::Status emit_rows(tf::OpKernelContext* ctx, int index, tf::TensorShape shape,
                            std::size_t rows, const std::vector<std::byte>& bytes) {
  shape.set_dim(0, static_cast<tf::int64>(rows));
  tf::Tensor* out = nullptr;
  TF_RETURN_IF_ERROR(ctx->allocate_output(index, shape, &out));
  if (out->TotalBytes() != bytes.size()) {
    return tf::errors::Internal("concord: the engine returned ", bytes.size(),
                                " bytes for an output of ", out->TotalBytes());
  }
  if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
  return tf::Status();
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
