// Element types, reduction operators and algorithm names of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// cudaStream_t is `CUstream_st*`: naming the struct lets the API take CUDA streams
// without making every user include CUDA's headers.
struct CUstream_st;

namespace concord {

// Where a buffer lives. Cuda buffers are device (or managed) memory of the device
// current on the calling thread.
enum class Device { Cpu, Cuda };

// A CUDA stream (cudaStream_t); nullptr is the legacy default stream.
using CudaStream = CUstream_st*;

enum class DataType { Int8, UInt8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
enum class ReduceOp { Sum, Prod, Min, Max, Avg };
enum class Algorithm { Auto, Ring, RecursiveDoubling, ReduceScatterAllgather, Hierarchical };

// Bytes per element of `dtype`.
constexpr std::size_t size_of(DataType dtype) noexcept {
  switch (dtype) {
    case DataType::Int8:
    case DataType::UInt8:
      return 1;
    case DataType::Float16:
    case DataType::BFloat16:
      return 2;
    case DataType::Int32:
    case DataType::Float32:
      return 4;
    case DataType::Int64:
    case DataType::Float64:
      return 8;
  }
  return 0;
}

constexpr bool is_floating_point(DataType dtype) noexcept {
  return dtype == DataType::Float16 || dtype == DataType::BFloat16 || dtype == DataType::Float32 ||
         dtype == DataType::Float64;
}

// Every op is defined on every dtype except Avg, which needs a floating-point type.
constexpr bool is_supported(DataType dtype, ReduceOp op) noexcept {
  return op != ReduceOp::Avg || is_floating_point(dtype);
}

// Lower-case names as used by the benchmark CLI and environment variables
// ("float32", "sum", "recursive_doubling").
std::string_view to_string(DataType dtype) noexcept;
std::string_view to_string(ReduceOp op) noexcept;
std::string_view to_string(Algorithm algorithm) noexcept;
std::string_view to_string(Device device) noexcept;  // "cpu", "cuda"

// Inverse of to_string; throw concord::Error(InvalidArgument) naming the accepted values.
DataType parse_data_type(std::string_view name);
ReduceOp parse_reduce_op(std::string_view name);
Algorithm parse_algorithm(std::string_view name);

}  // namespace concord
