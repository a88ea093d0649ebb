// Elements of any concord dtype as doubles, and their MPI datatypes: what the
// benchmarks need to fill inputs and check results independently of concord.
#pragma once

#include <concord/types.hpp>

#include <mpi.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>

namespace concord::bench {

// Writes `v` (exactly representable in dtype) as one element of dtype.
inline void store_element(std::byte* dst, DataType dtype, double v) {
  switch (dtype) {
    case DataType::Int8: {
      auto x = static_cast<std::int8_t>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::UInt8: {
      auto x = static_cast<std::uint8_t>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::Int32: {
      auto x = static_cast<std::int32_t>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::Int64: {
      auto x = static_cast<std::int64_t>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::Float16: {
      auto x = static_cast<_Float16>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::BFloat16: {  // exact values: the top half of the float
      auto x =
          static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::Float32: {
      auto x = static_cast<float>(v);
      std::memcpy(dst, &x, sizeof x);
      break;
    }
    case DataType::Float64:
      std::memcpy(dst, &v, sizeof v);
      break;
  }
}

// Reads one element of dtype as a double.
inline double load_element(const std::byte* src, DataType dtype) {
  auto read = [&](auto x) {
    std::memcpy(&x, src, sizeof x);
    return x;
  };
  switch (dtype) {
    case DataType::Int8:
      return read(std::int8_t{});
    case DataType::UInt8:
      return read(std::uint8_t{});
    case DataType::Int32:
      return read(std::int32_t{});
    case DataType::Int64:
      return static_cast<double>(read(std::int64_t{}));
    case DataType::Float16:
      return static_cast<double>(read(_Float16{}));
    case DataType::BFloat16:
      return std::bit_cast<float>(static_cast<std::uint32_t>(read(std::uint16_t{})) << 16);
    case DataType::Float32:
      return read(float{});
    case DataType::Float64:
      return read(double{});
  }
  return 0.0;
}

// MPI's operator for op; Avg is measured as MPI_SUM plus a scale.
inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod:
      return MPI_PROD;
    case ReduceOp::Min:
      return MPI_MIN;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return MPI_SUM;
  }
  return MPI_SUM;
}

// MPI's datatype for dtype, if MPI has one.
inline std::optional<MPI_Datatype> mpi_type(DataType dtype) {
  switch (dtype) {
    case DataType::Int8:
      return MPI_INT8_T;
    case DataType::UInt8:
      return MPI_UINT8_T;
    case DataType::Int32:
      return MPI_INT32_T;
    case DataType::Int64:
      return MPI_INT64_T;
    case DataType::Float32:
      return MPI_FLOAT;
    case DataType::Float64:
      return MPI_DOUBLE;
    case DataType::Float16:
#ifdef MPIX_C_FLOAT16
      return MPIX_C_FLOAT16;
#else
      return std::nullopt;
#endif
    case DataType::BFloat16:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace concord::bench
