// concord's errors as torch's: what a failed collective raises in Python.
#pragma once

#include <concord/error.hpp>

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace concord_torch {

// A collective's failure (asynchronous, through its Work and Future): bad
// arguments that only the other ranks could see (a mismatch) raise ValueError;
// everything else DistBackendError, as torch's own backends do.
inline std::exception_ptr work_error(const concord::Error& e) {
  if (e.code() == concord::ErrorCode::Mismatch || e.code() == concord::ErrorCode::InvalidArgument) {
    return std::make_exception_ptr(C10_BUILD_ERROR(ValueError, e.what()));
  }
  return std::make_exception_ptr(C10_BUILD_ERROR(DistBackendError, e.what()));
}

// The same, thrown at once: for errors found while enqueueing.
[[noreturn]] inline void throw_torch_error(const concord::Error& e) {
  std::rethrow_exception(work_error(e));
}

}  // namespace concord_torch
