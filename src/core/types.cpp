// Names of dtypes, ops and algorithms, both ways.
#include <concord/error.hpp>
#include <concord/types.hpp>

#include <array>
#include <string>
#include <utility>

namespace concord {
namespace {

template <typename Enum, std::size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<DataType, 8> kDataTypeNames{{{DataType::Int8, "int8"},
                                                 {DataType::UInt8, "uint8"},
                                                 {DataType::Int32, "int32"},
                                                 {DataType::Int64, "int64"},
                                                 {DataType::Float16, "float16"},
                                                 {DataType::BFloat16, "bfloat16"},
                                                 {DataType::Float32, "float32"},
                                                 {DataType::Float64, "float64"}}};

constexpr NameTable<ReduceOp, 5> kReduceOpNames{{{ReduceOp::Sum, "sum"},
                                                 {ReduceOp::Prod, "prod"},
                                                 {ReduceOp::Min, "min"},
                                                 {ReduceOp::Max, "max"},
                                                 {ReduceOp::Avg, "avg"}}};

constexpr NameTable<Algorithm, 5> kAlgorithmNames{
    {{Algorithm::Auto, "auto"},
     {Algorithm::Ring, "ring"},
     {Algorithm::RecursiveDoubling, "recursive_doubling"},
     {Algorithm::ReduceScatterAllgather, "reduce_scatter_allgather"},
     {Algorithm::Hierarchical, "hierarchical"}}};

template <typename Enum, std::size_t N>
std::string_view name_of(const NameTable<Enum, N>& table, Enum value) noexcept {
  for (const auto& [v, name] : table) {
    if (v == value) return name;
  }
  return "unknown";
}

template <typename Enum, std::size_t N>
Enum parse(const NameTable<Enum, N>& table, std::string_view name, const char* what) {
  for (const auto& [v, n] : table) {
    if (n == name) return v;
  }
  std::string accepted;
  for (const auto& entry : table) {
    if (!accepted.empty()) accepted += ", ";
    accepted += entry.second;
  }
  throw Error(
      ErrorCode::InvalidArgument, -1,
      std::string("unknown ") + what + " '" + std::string(name) + "' (accepted: " + accepted + ")");
}

}  // namespace

std::string_view to_string(DataType dtype) noexcept {
  return name_of(kDataTypeNames, dtype);
}
std::string_view to_string(ReduceOp op) noexcept {
  return name_of(kReduceOpNames, op);
}
std::string_view to_string(Algorithm algorithm) noexcept {
  return name_of(kAlgorithmNames, algorithm);
}
std::string_view to_string(Device device) noexcept {
  return device == Device::Cuda ? "cuda" : "cpu";
}

DataType parse_data_type(std::string_view name) {
  return parse(kDataTypeNames, name, "dtype");
}
ReduceOp parse_reduce_op(std::string_view name) {
  return parse(kReduceOpNames, name, "op");
}
Algorithm parse_algorithm(std::string_view name) {
  return parse(kAlgorithmNames, name, "algorithm");
}

}  // namespace concord
