#include "rules.hpp"

#include "settings.hpp"

#include <climits>
#include <cstdint>

namespace concord::mpi_interposer {

const char* to_string(PassReason reason) noexcept {
  switch (reason) {
    case PassReason::Disabled:
      return "interposer off";
    case PassReason::ConcordInternal:
      return "concord internal";
    case PassReason::EmptyOrInvalid:
      return "empty or invalid arguments";
    case PassReason::Datatype:
      return "datatype";
    case PassReason::Op:
      return "op";
    case PassReason::Intercommunicator:
      return "intercommunicator";
    case PassReason::BelowThreshold:
      return "below CONCORD_MPI_INTERPOSE_MIN_BYTES";
    case PassReason::Count:
      break;
  }
  return "?";
}

std::optional<DataType> concord_type(MPI_Datatype datatype) noexcept {
  // Predefined handles are link-time constants in MPICH and addresses of
  // library objects in Open MPI: comparisons work for both, switch does not.
  if (datatype == MPI_FLOAT) return DataType::Float32;
  if (datatype == MPI_DOUBLE) return DataType::Float64;
  if (datatype == MPI_INT || datatype == MPI_INT32_T) return DataType::Int32;
  if (datatype == MPI_LONG) return sizeof(long) == 8 ? DataType::Int64 : DataType::Int32;
  if (datatype == MPI_LONG_LONG || datatype == MPI_INT64_T) return DataType::Int64;
  if (datatype == MPI_INT8_T || datatype == MPI_SIGNED_CHAR) return DataType::Int8;
  if (datatype == MPI_UINT8_T || datatype == MPI_UNSIGNED_CHAR) return DataType::UInt8;
#ifdef MPIX_C_FLOAT16
  if (datatype == MPIX_C_FLOAT16) return DataType::Float16;
#endif
  static_assert(sizeof(int) == 4, "MPI_INT is taken as a 32-bit integer");
  return std::nullopt;
}

std::optional<ReduceOp> concord_op(MPI_Op op) noexcept {
  if (op == MPI_SUM) return ReduceOp::Sum;
  if (op == MPI_PROD) return ReduceOp::Prod;
  if (op == MPI_MIN) return ReduceOp::Min;
  if (op == MPI_MAX) return ReduceOp::Max;
  return std::nullopt;
}

namespace {

// Debian's MPICH 4.0.2 compares MPI_UINT8_T as signed in MIN and MAX
// (max(253, 5) = 5; tests/interposer). concord takes those calls at every size,
// so a threshold set for speed never hands them back to a wrong result.
bool mpi_may_get_wrong(DataType dtype, ReduceOp op) noexcept {
  return dtype == DataType::UInt8 && (op == ReduceOp::Min || op == ReduceOp::Max);
}

}  // namespace

Decision decide(const void* sendbuf, const void* recvbuf, long long count, MPI_Datatype datatype,
                MPI_Op op, MPI_Comm comm) noexcept {
  const Settings& s = settings();
  if (!s.enabled) return {std::nullopt, PassReason::Disabled};
  // MPI_IN_PLACE is a send buffer only: as recvbuf MPI reports MPI_ERR_BUFFER
  // (MPICH and Open MPI), where concord would write through it.
  if (count <= 0 || comm == MPI_COMM_NULL || recvbuf == nullptr || sendbuf == nullptr ||
      recvbuf == MPI_IN_PLACE) {
    return {std::nullopt, PassReason::EmptyOrInvalid};
  }
  const auto cop = concord_op(op);
  if (!cop) return {std::nullopt, PassReason::Op};
  const auto ctype = concord_type(datatype);
  if (!ctype) return {std::nullopt, PassReason::Datatype};
  if (static_cast<unsigned long long>(count) > SIZE_MAX / size_of(*ctype)) {
    return {std::nullopt, PassReason::EmptyOrInvalid};
  }
  const std::size_t bytes = static_cast<std::size_t>(count) * size_of(*ctype);
  if (bytes < s.min_bytes && !mpi_may_get_wrong(*ctype, *cop)) {
    return {std::nullopt, PassReason::BelowThreshold};
  }
  return {Taken{*ctype, *cop, bytes}, PassReason::Count};
}

const char* rules_summary() noexcept {
  return "takes MPI_Allreduce (and MPI_Allreduce_c where MPI has it) on intracommunicators for "
         "MPI_FLOAT, MPI_DOUBLE, MPI_INT, "
         "MPI_INT32_T, MPI_LONG, MPI_LONG_LONG, MPI_INT64_T, MPI_INT8_T, MPI_SIGNED_CHAR, "
         "MPI_UINT8_T, MPI_UNSIGNED_CHAR"
#ifdef MPIX_C_FLOAT16
         ", MPIX_C_FLOAT16"
#endif
         " with MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX (MPI_IN_PLACE too); passes everything else "
         "(other datatypes and ops, user ops, derived datatypes, intercommunicators, "
         "messages below CONCORD_MPI_INTERPOSE_MIN_BYTES) to PMPI_Allreduce";
}

}  // namespace concord::mpi_interposer
