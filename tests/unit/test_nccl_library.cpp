#include <catch2/catch.hpp>

#include <concord/error.hpp>

#include "transport/nccl_library.hpp"

#include <climits>
#include <cstdlib>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

using Catch::Matchers::Contains;
using concord::Error;
using concord::ErrorCode;
using concord::detail::check_nccl;
using concord::detail::nccl;
using concord::detail::nccl_supports_multi_rank_gpu;
using concord::detail::nccl_version_string;
using concord::detail::NcclLibrary;
using concord::detail::try_nccl;

namespace {

// Runs this test program again with `env` prepended (NAME=value ...), selecting
// the hidden child test; true when it passed. The NCCL library is loaded once per
// process from a configuration parsed once per process, so each load failure
// needs a process of its own.
bool child_passes(const std::string& env) {
  char self[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  const std::string command =
      env + " '" + std::string(self, static_cast<std::size_t>(n)) + "' '[nccl_load_child]'";
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

TEST_CASE("NCCL version codes read in both encodings", "[nccl]") {
  CHECK(nccl_version_string(22809) == "2.28.9");
  CHECK(nccl_version_string(23000) == "2.30.0");
  CHECK(nccl_version_string(20900) == "2.9.0");  // the first of the new encoding
  CHECK(nccl_version_string(21903) == "2.19.3");
  CHECK(nccl_version_string(2708) == "2.7.8");  // before 2.9: major*1000 + minor*100 + patch
  CHECK(nccl_version_string(2406) == "2.4.6");
  CHECK(nccl_version_string(NCCL_VERSION_CODE) == std::to_string(NCCL_MAJOR) + "." +
                                                      std::to_string(NCCL_MINOR) + "." +
                                                      std::to_string(NCCL_PATCH));
}

TEST_CASE("several ranks per GPU need NCCL 2.30", "[nccl]") {
  CHECK_FALSE(nccl_supports_multi_rank_gpu(2708));
  CHECK_FALSE(nccl_supports_multi_rank_gpu(22809));
  CHECK_FALSE(nccl_supports_multi_rank_gpu(22999));
  CHECK(nccl_supports_multi_rank_gpu(23000));
  CHECK(nccl_supports_multi_rank_gpu(30000));
}

// Without a GPU too: ncclGetVersion needs none. Where no NCCL is installed the
// reason must say what was tried and how to point concord at a library.
TEST_CASE("NCCL loads, or the reason names the library", "[nccl]") {
  std::string why;
  const NcclLibrary* lib = try_nccl(&why);
  if (lib != nullptr) {
    CHECK(lib->version >= 20000);
    CHECK_FALSE(lib->path.empty());
    CHECK(lib->get_version != nullptr);
    CHECK(lib->get_unique_id != nullptr);
    CHECK(lib->comm_init_rank != nullptr);
    CHECK(lib->comm_destroy != nullptr);
    CHECK(lib->comm_abort != nullptr);
    CHECK(lib->comm_get_async_error != nullptr);
    CHECK(lib->get_error_string != nullptr);
    CHECK(lib->group_start != nullptr);
    CHECK(lib->group_end != nullptr);
    CHECK(lib->send != nullptr);
    CHECK(lib->recv != nullptr);
    CHECK(lib->all_reduce != nullptr);
    int version = 0;
    CHECK(lib->get_version(&version) == ncclSuccess);
    CHECK(version == lib->version);
    CHECK(&nccl() == lib);
  } else {
    const char* configured = std::getenv("CONCORD_NCCL_LIBRARY");
    const std::string tried =
        configured != nullptr && configured[0] != '\0' ? configured : "libnccl.so.2";
    CHECK_THAT(why, Contains(tried) && Contains("CONCORD_NCCL_LIBRARY"));
    CHECK_THROWS_AS(nccl(), Error);
  }
}

TEST_CASE("NCCL failures throw with NCCL's message", "[nccl]") {
  CHECK_NOTHROW(check_nccl(ncclSuccess, "ncclSend", 3));
  try {
    check_nccl(ncclInvalidArgument, "ncclSend", 3);
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Internal);
    CHECK(e.rank() == 3);
    CHECK_THAT(std::string(e.what()), Contains("ncclSend: "));
    if (const NcclLibrary* lib = try_nccl()) {
      CHECK_THAT(std::string(e.what()), Contains(lib->get_error_string(ncclInvalidArgument)));
    }
  }
}

TEST_CASE("a library that cannot be loaded is named in the error", "[nccl]") {
  CHECK(child_passes("CONCORD_NCCL_LIBRARY=/nonexistent/libnccl.so"));
  // A library that loads but is not NCCL: the first missing symbol is named.
  CHECK(child_passes("CONCORD_NCCL_LIBRARY=libm.so.6 CONCORD_TEST_NCCL_EXPECT=ncclGetVersion"));
}

// Run by the test above in a process of its own, with CONCORD_NCCL_LIBRARY set
// to a library that must fail to load.
TEST_CASE("NCCL load failure (child process)", "[.][nccl_load_child]") {
  const char* configured = std::getenv("CONCORD_NCCL_LIBRARY");
  if (configured == nullptr) return;  // run by hand without the setup: nothing to check
  std::string why;
  CHECK(try_nccl(&why) == nullptr);
  CHECK_THAT(why,
             Contains(std::string("'") + configured + "'") && Contains("CONCORD_NCCL_LIBRARY"));
  if (const char* expect = std::getenv("CONCORD_TEST_NCCL_EXPECT")) {
    CHECK_THAT(why, Contains(expect));
  }
  try {
    nccl();
    FAIL("nccl() did not throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(std::string(e.what()), Contains(configured));
  }
}
