// to_error (engine_core.hpp): exceptions to concord::Error.
#include "engine/engine_core.hpp"

#include <fmt/format.h>

#include <new>
#include <stdexcept>

namespace concord::detail {

Error to_error(const std::exception_ptr& e, int rank, const std::string& context) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return error;
  } catch (const std::bad_alloc& error) {
    return Error(ErrorCode::SystemError, rank,
                 fmt::format("{}: cannot allocate memory ({})", context, error.what()));
  } catch (const std::length_error& error) {
    return Error(ErrorCode::SystemError, rank,
                 fmt::format("{}: cannot allocate memory ({})", context, error.what()));
  } catch (const std::exception& error) {
    return Error(ErrorCode::Internal, rank,
                 fmt::format("{}: unexpected exception: {}", context, error.what()));
  } catch (...) {
    return Error(ErrorCode::Internal, rank, fmt::format("{}: unknown exception", context));
  }
}

bool may_leave_ranks_out_of_step(const Error& error) {
  return error.code() != ErrorCode::InvalidArgument && error.code() != ErrorCode::Mismatch;
}

}  // namespace concord::detail
