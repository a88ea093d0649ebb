// concord's TensorFlow ops: AsyncOpKernels that hand their tensors to concord's
// process-wide fusion engine and finish when it completes them. Ranks match
// operations by name (the tensor_name attr, else the node name), so the order in
// which TensorFlow's executors run them cannot deadlock. Every op is stateful: a
// collective has effects beyond its output (the other ranks wait for it), so
// grappler must neither constant-fold one whose input is a constant (it would
// run once, at optimisation, and every later call would skip the exchange) nor
// merge or prune it. concord.tensorflow exempts them from tf.function's program
// order (run_unordered there), which would otherwise chain them one after the
// other. No exception crosses into TensorFlow: concord::Error becomes the op's
// error status.
#include <concord/concord.hpp>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

#include "ops_support.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace concord_tf;

REGISTER_OP("ConcordAllreduce")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("reduce_op: {'sum', 'avg', 'min', 'max', 'prod'} = 'sum'")
    .Attr("prescale: float = 1.0")
    .Attr("postscale: float = 1.0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::UnchangedShape)
    .Doc("postscale * (reduce_op over ranks of prescale * tensor), through concord.");

class ConcordAllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordAllreduceOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), name_(name_of(c)) {
    OP_REQUIRES_OK(c, read_reduce_attrs(c, &reduce_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& input = ctx->input(0);
    concord::DataType dtype;
    OP_REQUIRES_OK_ASYNC(ctx, to_dtype(input.dtype(), &dtype), done);
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, output_holding_input(ctx, &output), done);
    guarded(ctx, done, [&] {
      concord::default_engine().enqueue_allreduce(
          name_, {output->data(), static_cast<std::size_t>(output->NumElements()), dtype},
          reduce_.op, reduce_.prescale, reduce_.postscale, finish(ctx, done));
    });
  }

 private:
  std::string name_;
  ReduceAttrs reduce_;
};
REGISTER_KERNEL_BUILDER(Name("ConcordAllreduce").Device(tf::DEVICE_CPU), ConcordAllreduceOp);

REGISTER_OP("ConcordGroupedAllreduce")
    .Attr("T: {half, bfloat16, float, double, int32, int64}")
    .Attr("N: int >= 1")
    .Attr("reduce_op: {'sum', 'avg', 'min', 'max', 'prod'} = 'sum'")
    .Attr("prescale: float = 1.0")
    .Attr("postscale: float = 1.0")
    .Attr("tensor_names: list(string)")
    .Input("tensors: N * T")
    .Output("outputs: N * T")
    .SetIsStateful()
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return tf::Status();
    })
    .Doc("Allreduces N tensors submitted to concord atomically (fused together).");

class ConcordGroupedAllreduceOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordGroupedAllreduceOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, read_reduce_attrs(c, &reduce_));
    OP_REQUIRES_OK(c, c->GetAttr("tensor_names", &names_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(names_.size()) == n,
                      tf::errors::InvalidArgument("concord: ", n, " tensors but ", names_.size(),
                                                  " tensor_names"),
                      done);
    std::vector<concord::TensorView> views;
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& input = ctx->input(i);
      concord::DataType dtype;
      OP_REQUIRES_OK_ASYNC(ctx, to_dtype(input.dtype(), &dtype), done);
      tf::Tensor* output = nullptr;
      OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(i, input.shape(), &output), done);
      if (input.TotalBytes() > 0) std::memcpy(output->data(), input.data(), input.TotalBytes());
      views.push_back({output->data(), static_cast<std::size_t>(output->NumElements()), dtype});
    }
    guarded(ctx, done, [&] {
      concord::default_engine().enqueue_grouped_allreduce(
          names_, views, reduce_.op, reduce_.prescale, reduce_.postscale, finish(ctx, done));
    });
  }

 private:
  ReduceAttrs reduce_;
  std::vector<std::string> names_;
};
REGISTER_KERNEL_BUILDER(Name("ConcordGroupedAllreduce").Device(tf::DEVICE_CPU),
                        ConcordGroupedAllreduceOp);

REGISTER_OP("ConcordBroadcast")
    .Attr("T: {half, bfloat16, float, double, int32, int64, bool, int8, uint8}")
    .Attr("root_rank: int = 0")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::UnchangedShape)
    .Doc("root_rank's tensor on every rank, through concord.");

class ConcordBroadcastOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordBroadcastOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), name_(name_of(c)) {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_));
  }

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& input = ctx->input(0);
    tf::Tensor* output = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, output_holding_input(ctx, &output), done);
    // Broadcast moves bytes: any dtype goes as uint8.
    guarded(ctx, done, [&] {
      concord::default_engine().enqueue_broadcast(
          name_,
          {output->data(), static_cast<std::size_t>(output->TotalBytes()),
           concord::DataType::UInt8},
          root_, finish(ctx, done));
    });
  }

 private:
  std::string name_;
  int root_ = 0;
};
REGISTER_KERNEL_BUILDER(Name("ConcordBroadcast").Device(tf::DEVICE_CPU), ConcordBroadcastOp);

REGISTER_OP("ConcordAllgather")
    .Attr("T: {half, bfloat16, float, double, int32, int64, bool, int8, uint8}")
    .Attr("tensor_name: string = ''")
    .Input("tensor: T")
    .Output("output: T")
    .SetIsStateful()
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      tf::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      return tf::Status();
    })
    .Doc("Every rank's tensor concatenated along dimension 0 (which may differ per rank).");

class ConcordAllgatherOp : public tf::AsyncOpKernel {
 public:
  explicit ConcordAllgatherOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c), name_(name_of(c)) {}

  void ComputeAsync(tf::OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& input = ctx->input(0);
    OP_REQUIRES_ASYNC(ctx, input.dims() >= 1,
                      tf::errors::InvalidArgument("concord: allgather needs rank >= 1"), done);
    // Rows travel as bytes: row_elements counts bytes per row.
    std::size_t row_elements = tf::DataTypeSize(input.dtype());
    for (int d = 1; d < input.dims(); ++d) row_elements *= input.dim_size(d);
    OP_REQUIRES_ASYNC(ctx, row_elements > 0,
                      tf::errors::InvalidArgument("concord: allgather of empty rows"), done);
    const tf::TensorShape shape = input.shape();
    const tf::Tensor input_copy = input;  // keeps the buffer alive
    run_with_outputs(
        ctx, done,
        [this, input_copy, row_elements](concord::Completion completion) {
          return concord::default_engine().enqueue_allgather(
              name_,
              {const_cast<char*>(input_copy.tensor_data().data()), input_copy.TotalBytes(),
               concord::DataType::UInt8},
              row_elements, std::move(completion));
        },
        // Holds input_copy until the engine is done with its buffer.
        [ctx, shape, input_copy](const concord::Handle& h) {
          std::size_t rows = 0;
          for (auto d : h.first_dims()) rows += d;
          return emit_rows(ctx, 0, shape, rows, h.output());
        });
  }

 private:
  std::string name_;
};
REGISTER_KERNEL_BUILDER(Name("ConcordAllgather").Device(tf::DEVICE_CPU), ConcordAllgatherOp);
