// The point-to-point vocabulary algorithms are written in. A transport moves bytes
// between ranks of one group; it knows nothing of collectives.
#pragma once

#include <cstddef>
#include <cstdint>

namespace concord::detail {

// A pending send or receive. Move-only in spirit: complete it with wait() once.
struct Request {
  static constexpr std::size_t kNone = SIZE_MAX;
  std::size_t slot = kNone;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Start moving `bytes` bytes to/from `peer`. Messages between one pair with the
  // same tag arrive in the order they were started. The buffer belongs to the
  // transport until wait() returns.
  virtual Request isend(int peer, const void* buf, std::size_t bytes, int tag) = 0;
  virtual Request irecv(int peer, void* buf, std::size_t bytes, int tag) = 0;
  virtual void wait(Request& request) = 0;
  // Completes every request still pending.
  virtual void wait_all() = 0;

  void send(int peer, const void* buf, std::size_t bytes, int tag) {
    Request r = isend(peer, buf, bytes, tag);
    wait(r);
  }
  void recv(int peer, void* buf, std::size_t bytes, int tag) {
    Request r = irecv(peer, buf, bytes, tag);
    wait(r);
  }
  // Exchange with possibly different peers, without deadlock.
  void sendrecv(int dst, const void* send_buf, std::size_t send_bytes, int src, void* recv_buf,
                std::size_t recv_bytes, int tag) {
    Request r = irecv(src, recv_buf, recv_bytes, tag);
    Request s = isend(dst, send_buf, send_bytes, tag);
    wait(r);
    wait(s);
  }
};

}  // namespace concord::detail
