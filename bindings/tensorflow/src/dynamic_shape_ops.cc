// The TensorFlow ops whose output shape only the engine knows: alltoall and
// reducescatter (their outputs' first dimension is known once the engine has run
// them), and join. concord.tensorflow calls them, and concord.horovod through it.
// AsyncOpKernels on concord's fusion engine, like concord_ops.cc: usable eagerly
// and inside tf.function.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

#include "ops_support.hpp"

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

using namespace concord_tf;

namespace {

// Elements per row of dimension 0 (the product of the other dimensions).
std::size_t row_elements(const tf::Tensor& t) {
  std::size_t n = 1;
  for (int d = 1; d < t.dims(); ++d) n *= static_cast<std::size_t>(t.dim_size(d));
  return n;
}

tf::Status rows_unknown(tf::shape_inference::InferenceContext* c) {
  tf::shape_inference::ShapeHandle out;
  TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &out));
  TF_RETURN_IF_ERROR(c->ReplaceDim(out, 0, c->UnknownDim(), &out));
  c->set_output(0, out);
  return tf::Status();
}

}  // namespace

REGISTER_OP("ConcordAlltoall")
    .Attr("T: {half, bfloat16, float, double, int32, int64, bool, int8, uint8}")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetIsStateful()
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      TF_RETURN_IF_ERROR(rows_unknown(c));
      c->set_output(1, c->Vector(c->UnknownDim()));
      return tf::Status();
    })
    .Doc(
        "Rows of dimension 0 to every rank: splits[r] rows to rank r (empty: an even split); "
        "returns the rows received in rank order and how many came from each rank.");

class ConcordAlltoallOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordAlltoallOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), name_(name_of(c)) {}

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor input = ctx->input(0);  // a reference: keeps the buffer alive
    const tf::Tensor& splits = ctx->input(1);
    OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                      tf::errors::InvalidArgument("concord: alltoall needs rank >= 1"), done);
    OP_REQUIRES_ASYNC(ctx, splits.dims() == 1,
                      tf::errors::InvalidArgument("concord: alltoall splits must be a vector"),
                      done);
    // Rows travel as bytes.
    const std::size_t row_bytes = row_elements(input) * tf::DataTypeSize(input.dtype());
    OP_REQUIRES_ASYNC(ctx, row_bytes > 0,
                      tf::errors::InvalidArgument("concord: alltoall of empty rows"), done);
    std::vector<std::size_t> send_rows;
    const auto s = splits.flat<tf::int32>();
    for (tf::int64 i = 0; i < s.size(); ++i) {
      OP_REQUIRES_ASYNC(ctx, s(i) >= 0,
                        tf::errors::InvalidArgument("concord: alltoall splits must be >= 0, got ",
                                                    s(i), " at ", i),
                        done);
      send_rows.push_back(static_cast<std::size_t>(s(i)));
    }
    const tf::TensorShape shape = input.shape();
    const std::string& name = name_;
    run_with_outputs(
        ctx, done,
        [&](concord::Completion completion) {
          return concord::default_engine().enqueue_alltoall(
              name,
              {const_cast<char*>(input.tensor_data().data()), input.TotalBytes(),
               concord::DataType::UInt8},
              row_bytes, send_rows, std::move(completion));
        },
        [ctx, shape, input](const concord::Handle& h) {
          const auto& dims = h.first_dims();
          std::size_t rows = 0;
          for (auto d : dims) rows += d;
          TF_RETURN_IF_ERROR(emit_rows(ctx, 0, shape, rows, h.output()));
          tf::Tensor* received = nullptr;
          TF_RETURN_IF_ERROR(ctx->allocate_output(
              1, tf::TensorShape({static_cast<tf::int64>(dims.size())}), &received));
          auto r = received->flat<tf::int32>();
          for (std::size_t i = 0; i < dims.size(); ++i) {
            if (dims[i] > static_cast<std::size_t>(std::numeric_limits<tf::int32>::max())) {
              return tf::errors::InvalidArgument("concord: alltoall: ", dims[i],
                                                 " rows received from rank ", i,
                                                 ": more than the int32 received_splits holds");
            }
            r(i) = static_cast<tf::int32>(dims[i]);
          }
          return tf::Status();
        });
  }

 private:
  std::string name_;
};
REGISTER_KERNEL_BUILDER(Name("ConcordAlltoall").Device(tf::DEVICE_CPU).HostMemory("splits"),
                        ConcordAlltoallOp);

REGISTER_OP("ConcordReducescatter")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("reduce_op: {'sum', 'avg', 'min', 'max', 'prod'} = 'avg'")
    .Attr("prescale: float = 1.0")
    .Attr("postscale: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(rows_unknown)
    .Doc(
        "Reduces over ranks, then this rank keeps its block of dimension 0 (the first "
        "rows % size ranks get one row more).");

class ConcordReducescatterOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordReducescatterOp(tf::OpKernelConstruction* c)
      : AsyncOpKernel(c), name_(name_of(c)) {
    OP_REQUIRES_OK(c, read_reduce_attrs(c, &reduce_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor input = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                      tf::errors::InvalidArgument("concord: reducescatter needs rank >= 1"), done);
    concord::DataType dtype{};
    OP_REQUIRES_OK_ASYNC(ctx, to_dtype(input.dtype(), &dtype), done);
    const std::size_t row = row_elements(input);
    OP_REQUIRES_ASYNC(ctx, row > 0,
                      tf::errors::InvalidArgument("concord: reducescatter of empty rows"), done);
    const tf::TensorShape shape = input.shape();
    run_with_outputs(
        ctx, done,
        [&](concord::Completion completion) {
          return concord::default_engine().enqueue_reducescatter(
              name_,
              {const_cast<char*>(input.tensor_data().data()),
               static_cast<std::size_t>(input.NumElements()), dtype},
              row, reduce_.op, reduce_.prescale, reduce_.postscale, std::move(completion));
        },
        [ctx, shape, input](const concord::Handle& h) {
          const auto me = static_cast<std::size_t>(concord::default_engine().rank());
          return emit_rows(ctx, 0, shape, h.first_dims().at(me), h.output());
        });
  }

 private:
  std::string name_;
  ReduceAttrs reduce_;
};
REGISTER_KERNEL_BUILDER(Name("ConcordReducescatter").Device(tf::DEVICE_CPU),
                        ConcordReducescatterOp);

REGISTER_OP("ConcordJoin")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape)
    .Doc("This rank has no more data: completes once every rank joined; the last to join.");

class ConcordJoinOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordJoinOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {}

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    run_with_outputs(
        ctx, done,
        [](concord::Completion completion) {
          return concord::default_engine().enqueue_join(std::move(completion));
        },
        [ctx](const concord::Handle& h) {
          tf::Tensor* out = nullptr;
          TF_RETURN_IF_ERROR(ctx->allocate_output(0, tf::TensorShape({}), &out));
          const auto& bytes = h.output();
          if (bytes.size() != sizeof(tf::int32)) {
            return tf::errors::Internal("concord: join returned ", bytes.size(), " bytes");
          }
          std::memcpy(out->data(), bytes.data(), sizeof(tf::int32));
          return tf::Status();
        });
  }
};
REGISTER_KERNEL_BUILDER(Name("ConcordJoin").Device(tf::DEVICE_CPU), ConcordJoinOp);
