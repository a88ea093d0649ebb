// concord._torch: makes ConcordBackend objects for torch.distributed
// (concord/torch/__init__.py registers the backend with them) and shuts the
// live ones down at exit, before concord finalizes MPI.
#include "backend.hpp"

#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

std::mutex registry_mutex;
std::vector<c10::weak_intrusive_ptr<concord_torch::ConcordBackend>> live_backends;

c10::intrusive_ptr<c10d::Backend> new_backend(int rank, int size,
                                              const std::vector<int64_t>& world_ranks,
                                              double timeout_s, const std::string& group_name) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1e3));
  auto backend = c10::make_intrusive<concord_torch::ConcordBackend>(rank, size, world_ranks,
                                                                    timeout, group_name);
  std::lock_guard<std::mutex> lock(registry_mutex);
  live_backends.emplace_back(backend);
  return backend;
}

void shutdown_all() {
  std::vector<c10::intrusive_ptr<concord_torch::ConcordBackend>> alive;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (auto& weak : live_backends) {
      if (auto strong = weak.lock()) alive.push_back(std::move(strong));
    }
    live_backends.clear();
  }
  for (auto& backend : alive) backend->shutdown();
}

}  // namespace

PYBIND11_MODULE(_torch, m) {
  m.doc() = "concord's torch.distributed backend (use concord.torch)";
  m.attr("TORCH_VERSION") = CONCORD_TORCH_VERSION;
  m.def("new_backend", &new_backend, py::arg("rank"), py::arg("size"), py::arg("world_ranks"),
        py::arg("timeout_s"), py::arg("group_name"), py::call_guard<py::gil_scoped_release>(),
        "A concord backend for a process group (collective over its ranks).");
  m.def("shutdown_all", &shutdown_all, py::call_guard<py::gil_scoped_release>(),
        "Stops every live concord backend's engine (at exit, before MPI is finalized).");
}
