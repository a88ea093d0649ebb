#include "tensors.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace concord_torch {

std::optional<concord::DataType> concord_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kComplexFloat:
      return concord::DataType::Float32;
    case at::kDouble:
    case at::kComplexDouble:
      return concord::DataType::Float64;
    case at::kHalf:
      return concord::DataType::Float16;
    case at::kBFloat16:
      return concord::DataType::BFloat16;
    case at::kInt:
      return concord::DataType::Int32;
    case at::kLong:
      return concord::DataType::Int64;
    case at::kChar:
      return concord::DataType::Int8;
    case at::kByte:
      return concord::DataType::UInt8;
    default:
      return std::nullopt;
  }
}

concord::DataType reduce_dtype(at::ScalarType dtype, const char* call) {
  const std::optional<concord::DataType> mine = concord_dtype(dtype);
  TORCH_CHECK_TYPE(mine.has_value(), "concord: ", call, " cannot reduce tensors of dtype ", dtype,
                   "; it reduces float32, float64, float16, bfloat16, complex64, "
                   "complex128, int32, int64, int8 and uint8");
  return *mine;
}

ReduceSpec reduce_op_of(const c10d::ReduceOp& op, at::ScalarType dtype, const char* call) {
  const bool complex = at::isComplexType(dtype);
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return {concord::ReduceOp::Sum, 1.0};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK_VALUE(at::isFloatingType(dtype) || complex, "concord: ", call,
                        ": AVG reduces floating-point tensors only, not ", dtype);
      return {concord::ReduceOp::Avg, 1.0};
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK_VALUE(at::isFloatingType(dtype) || complex, "concord: ", call,
                        ": PREMUL_SUM reduces floating-point tensors only, not ", dtype);
      auto* factor = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK_VALUE(factor != nullptr, "concord: ", call, ": PREMUL_SUM without its factor");
      const double f = factor->tensor_factor.defined() ? factor->tensor_factor.item<double>()
                                                       : factor->double_factor;
      return {concord::ReduceOp::Sum, f};
    }
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
      TORCH_CHECK_VALUE(!complex, "concord: ", call, ": ", dtype,
                        " tensors reduce only with SUM, AVG or PREMUL_SUM");
      return {op.op_ == c10d::ReduceOp::PRODUCT ? concord::ReduceOp::Prod
              : op.op_ == c10d::ReduceOp::MIN   ? concord::ReduceOp::Min
                                                : concord::ReduceOp::Max,
              1.0};
    default:
      break;
  }
  TORCH_CHECK_VALUE(false, "concord: ", call, ": reduce op ", static_cast<int>(op.op_),
                    " (bitwise AND/OR/XOR) is not supported; concord reduces with SUM, AVG, "
                    "PREMUL_SUM, PRODUCT, MIN and MAX");
}

at::Tensor premultiplied(const at::Tensor& input, const ReduceSpec& spec) {
  return spec.factor == 1.0 ? input : input.mul(spec.factor);
}

std::size_t reduce_count(const at::Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  return at::isComplexType(t.scalar_type()) ? 2 * n : n;
}

bool is_cuda(const at::Tensor& t) {
  return t.device().is_cuda();
}

void check_tensors(const std::vector<at::Tensor>& tensors, const char* call, const char* what) {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK_VALUE(t.defined(), "concord: ", call, ": ", what, "[", i, "] is undefined");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "concord: ", call, ": ", what, "[", i, "] is ",
                      t.layout(), "; concord takes dense tensors only");
    TORCH_CHECK_VALUE(t.device().is_cpu() || t.device().is_cuda(), "concord: ", call, ": ", what,
                      "[", i, "] is on ", t.device(), "; concord takes CPU and CUDA tensors");
    TORCH_CHECK_VALUE(t.device() == tensors[0].device(), "concord: ", call, ": ", what, "[", i,
                      "] is on ", t.device(), " but ", what, "[0] on ", tensors[0].device(),
                      "; one call's tensors must share a device");
  }
}

Staged stage(const at::Tensor& t) {
  return Staged{t, t.is_contiguous() ? t : t.contiguous()};
}

Staged stage_premultiplied(const at::Tensor& t, const ReduceSpec& spec) {
  if (spec.factor == 1.0) return stage(t);
  return Staged{t, t.mul(spec.factor).contiguous()};
}

namespace {
concord::TensorView with_device(concord::TensorView view, const at::Tensor& t) {
  if (is_cuda(t)) {
    view.device = concord::Device::Cuda;
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    view.stream = static_cast<concord::CudaStream>(impl->getStream(t.device()).native_handle());
  }
  return view;
}
}  // namespace

concord::TensorView reduce_view(const at::Tensor& t, const char* call) {
  concord::TensorView view;
  view.data = t.data_ptr();
  view.count = reduce_count(t);
  view.dtype = reduce_dtype(t.scalar_type(), call);
  return with_device(view, t);
}

concord::TensorView wire_view(const at::Tensor& t) {
  const std::optional<concord::DataType> dtype = concord_dtype(t.scalar_type());
  if (!dtype) return byte_view(t);
  concord::TensorView view;
  view.data = t.numel() > 0 ? t.data_ptr() : nullptr;
  view.count = reduce_count(t);
  view.dtype = *dtype;
  return with_device(view, t);
}

std::size_t wire_elements(const at::Tensor& t) {
  if (!concord_dtype(t.scalar_type())) return static_cast<std::size_t>(t.element_size());
  return at::isComplexType(t.scalar_type()) ? 2 : 1;
}

concord::TensorView byte_view(const at::Tensor& t) {
  concord::TensorView view;
  view.data = t.numel() > 0 ? t.data_ptr() : nullptr;
  view.count = static_cast<std::size_t>(t.numel()) * t.element_size();
  view.dtype = concord::DataType::UInt8;
  return with_device(view, t);
}

}  // namespace concord_torch
