// The c10d calls concord does not implement: each raises NotImplementedError
// naming the call and what to use instead.
#include "backend.hpp"

namespace concord_torch {

namespace {
[[noreturn]] void unsupported(const char* call, const char* instead) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "concord: ", call,
                              " is not supported by the concord backend; ", instead);
}
constexpr const char* kOtherBackend =
    "make a group with another backend for it (dist.new_group(backend=\"gloo\"))";
}  // namespace

c10::intrusive_ptr<c10d::Work> ConcordBackend::reduce(std::vector<at::Tensor>&,
                                                      const c10d::ReduceOptions&) {
  unsupported("reduce", "all_reduce gives every rank the result");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
    const c10d::AllgatherOptions&) {
  unsupported("allgather_coalesced", "use all_gather_into_tensor on each tensor");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::gather(std::vector<std::vector<at::Tensor>>&,
                                                      std::vector<at::Tensor>&,
                                                      const c10d::GatherOptions&) {
  unsupported("gather", "all_gather gives every rank the result");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::scatter(std::vector<at::Tensor>&,
                                                       std::vector<std::vector<at::Tensor>>&,
                                                       const c10d::ScatterOptions&) {
  unsupported("scatter", kOtherBackend);
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::alltoall(std::vector<at::Tensor>&,
                                                        std::vector<at::Tensor>&,
                                                        const c10d::AllToAllOptions&) {
  unsupported("all_to_all (lists of tensors)", "use all_to_all_single");
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::send(std::vector<at::Tensor>&, int, int) {
  unsupported("send", kOtherBackend);
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::recv(std::vector<at::Tensor>&, int, int) {
  unsupported("recv", kOtherBackend);
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recv (any source)", kOtherBackend);
}

}  // namespace concord_torch
