// The read loop of cross-memory attach (read_process_memory): short reads,
// EINTR and failures through a fake process_vm_readv, and one real read of this
// process's own memory.
#include <catch2/catch.hpp>

#include "transport/peer_reads.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <vector>

#include <unistd.h>

namespace {

using concord::detail::read_process_memory;
using concord::detail::read_process_memory_with;

// What the fake does, call by call: copy at most `most` bytes; or fail with
// errno `error`; or copy nothing (`most` 0, `error` 0).
struct FakeStep {
  std::size_t most;
  int error;
};
std::vector<FakeStep> fake_script;
std::size_t fake_calls = 0;

ssize_t fake_readv(pid_t, const iovec* local, unsigned long local_count, const iovec* remote,
                   unsigned long remote_count, unsigned long) {
  REQUIRE(local_count == 1);
  REQUIRE(remote_count == 1);
  REQUIRE(local->iov_len == remote->iov_len);
  // Past the script: copy everything asked.
  const FakeStep step =
      fake_calls < fake_script.size() ? fake_script[fake_calls] : FakeStep{~std::size_t{0}, 0};
  ++fake_calls;
  if (step.error != 0) {
    errno = step.error;
    return -1;
  }
  const std::size_t n = std::min(step.most, local->iov_len);
  std::memcpy(local->iov_base, remote->iov_base, n);
  return static_cast<ssize_t>(n);
}

std::vector<unsigned char> pattern(std::size_t bytes) {
  std::vector<unsigned char> v(bytes);
  std::iota(v.begin(), v.end(), static_cast<unsigned char>(1));
  return v;
}

int read_through_fake(std::vector<FakeStep> script, const std::vector<unsigned char>& from,
                      std::vector<unsigned char>& to) {
  fake_script = std::move(script);
  fake_calls = 0;
  return read_process_memory_with(fake_readv, 1, to.data(), from.data(), from.size());
}

}  // namespace

TEST_CASE("read_process_memory continues after short reads", "[peer_reads]") {
  const auto from = pattern(1000);
  std::vector<unsigned char> to(from.size());
  // 7 bytes per call until the script runs out, then the rest at once.
  REQUIRE(read_through_fake(std::vector<FakeStep>(50, {7, 0}), from, to) == 0);
  CHECK(to == from);
  CHECK(fake_calls == 51);
}

TEST_CASE("read_process_memory retries EINTR", "[peer_reads]") {
  const auto from = pattern(64);
  std::vector<unsigned char> to(from.size());
  REQUIRE(read_through_fake({{0, EINTR}, {10, 0}, {0, EINTR}}, from, to) == 0);
  CHECK(to == from);
  CHECK(fake_calls == 4);
}

TEST_CASE("read_process_memory reports a failure's errno and a read of nothing", "[peer_reads]") {
  const auto from = pattern(64);
  std::vector<unsigned char> to(from.size());
  CHECK(read_through_fake({{16, 0}, {0, EPERM}}, from, to) == EPERM);
  CHECK(fake_calls == 2);
  // A call that copies nothing without an error would loop for ever: EFAULT.
  CHECK(read_through_fake({{16, 0}, {0, 0}}, from, to) == EFAULT);
  CHECK(fake_calls == 2);
}

TEST_CASE("read_process_memory of nothing makes no call", "[peer_reads]") {
  std::vector<unsigned char> none;
  CHECK(read_through_fake({{0, EPERM}}, none, none) == 0);
  CHECK(fake_calls == 0);
}

TEST_CASE("read_process_memory reads this process's own memory", "[peer_reads]") {
  // Reading oneself needs no ptrace permission (the MPI tests of single copy
  // need the call to work between processes too).
  const auto from = pattern(3 << 20);
  std::vector<unsigned char> to(from.size());
  const int error = read_process_memory(::getpid(), to.data(), from.data(), from.size());
  // A seccomp profile or sandbox may forbid the system call outright; concord
  // then copies instead (the MPI tests check that fallback).
  if (error == ENOSYS || error == EPERM) {
    WARN("process_vm_readv is forbidden here (" << std::strerror(error) << "): not checked");
    return;
  }
  REQUIRE(error == 0);
  CHECK(to == from);
}
