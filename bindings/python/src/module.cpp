// concord._concord: the C++ side of the Python package. Buffers arrive as raw
// addresses the Python layer took from C-contiguous arrays (no copies); every
// call that communicates releases the GIL. concord::Error becomes
// concord.Error(code, message).
#include <concord/concord.hpp>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <mpi.h>

#include "concord_commit.h"  // generated at build time: CONCORD_COMMIT

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace py = pybind11;
using namespace concord;

namespace {

Communicator& world() {
  static Communicator comm = Communicator::world();
  return comm;
}

Engine& the_engine() {
  py::gil_scoped_release release;  // the first call is collective
  return default_engine();
}

void shutdown_engine() {
  py::gil_scoped_release release;
  shutdown_default_engine();
}

[[noreturn]] void throw_mpi_error(int rc, const char* call, int rank) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(ErrorCode::MpiError, rank, fmt::format("concord.barrier: {} failed: {}", call, text));
}

// Waits as long as MPI_Barrier would: a barrier is where ranks wait for the
// slowest (rank 0 preparing the data, say), so there is no deadline. But a
// failed MPI call raises concord.Error, and Communicator::abort ends the wait
// (the abandoned request is left to MPI). Polls, yielding, then sleeping 100 us
// between polls after the first thousand, rather than spin a core for the wait.
void barrier(const Communicator& comm) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (const int rc = MPI_Ibarrier(comm.mpi_comm(), &request); rc != MPI_SUCCESS) {
    throw_mpi_error(rc, "MPI_Ibarrier", comm.rank());
  }
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      throw_mpi_error(rc, "MPI_Test", comm.rank());
    }
    if (done) return;
    if (comm.aborted()) {
      throw Error(ErrorCode::Shutdown, comm.rank(),
                  "concord.barrier: this rank aborted the communicator while waiting");
    }
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void* address(std::uintptr_t p) {
  return reinterpret_cast<void*>(p);
}

std::optional<Algorithm> algorithm_from(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  return parse_algorithm(*name);
}

// A handle with the GIL released while waiting.
struct PyHandle {
  Handle handle;
  void wait() {
    py::gil_scoped_release release;
    handle.wait();
  }
  bool done() const { return handle.test(); }
  py::bytes output() {
    {
      py::gil_scoped_release release;
      handle.wait();
    }
    const auto& out = handle.output();
    return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
  }
  std::vector<std::size_t> first_dims() {
    py::gil_scoped_release release;
    return handle.first_dims();
  }
};

// concord::Error as concord.Error(name, code, message), the class the Python
// package defines (concord/_errors.py).
void register_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      py::object cls = py::module_::import("concord._errors").attr("Error");
      py::object instance =
          cls(std::string(to_string(e.code())), static_cast<int>(e.code()), std::string(e.what()));
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });
}

// The process and its ranks (the world communicator, made on first use).
void bind_process(py::module_& m) {
  m.def("init", [] { world(); });
  m.def("start_engine", [] { the_engine(); });
  m.def("rank", [] { return world().rank(); });
  m.def("size", [] { return world().size(); });
  m.def("local_rank", [] { return world().local_rank(); });
  m.def("local_size", [] { return world().local_size(); });
  m.def("barrier", [] {
    py::gil_scoped_release release;
    barrier(world());
  });
  m.def("shutdown", &shutdown_engine);
}

// The blocking allreduce on raw addresses.
void bind_allreduce(py::module_& m) {
  m.def(
      "allreduce",
      [](std::uintptr_t send, std::uintptr_t recv, std::size_t count, const std::string& dtype,
         const std::string& op, const std::optional<std::string>& algorithm) {
        AllreduceOptions options;
        options.algorithm = algorithm_from(algorithm).value_or(Algorithm::Auto);
        const DataType dt = parse_data_type(dtype);
        const ReduceOp o = parse_reduce_op(op);
        Communicator& comm = world();
        py::gil_scoped_release release;
        allreduce(address(send), address(recv), count, dt, o, comm, options);
      },
      py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype"), py::arg("op"),
      py::arg("algorithm") = py::none());
}

// The background engine's allreduces, one tensor or a group; each returns a Handle.
void bind_engine_allreduce(py::module_& m) {
  py::class_<PyHandle>(m, "Handle")
      .def("wait", &PyHandle::wait)
      .def("done", &PyHandle::done)
      .def("output", &PyHandle::output)
      .def("first_dims", &PyHandle::first_dims);

  m.def("enqueue_allreduce",
        [](const std::string& name, std::uintptr_t data, std::size_t count,
           const std::string& dtype, const std::string& op, double prescale, double postscale) {
          Engine& e = the_engine();
          return PyHandle{e.enqueue_allreduce(name, {address(data), count, parse_data_type(dtype)},
                                              parse_reduce_op(op), prescale, postscale)};
        });
  m.def(
      "enqueue_grouped_allreduce",
      [](const std::vector<std::string>& names, const std::vector<std::uintptr_t>& data,
         const std::vector<std::size_t>& counts, const std::vector<std::string>& dtypes,
         const std::string& op, double prescale, double postscale) {
        Engine& e = the_engine();
        if (data.size() != counts.size() || data.size() != dtypes.size()) {
          throw Error(ErrorCode::InvalidArgument, -1,
                      "enqueue_grouped_allreduce: data, counts and dtypes differ in length");
        }
        std::vector<TensorView> tensors;
        for (std::size_t i = 0; i < data.size(); ++i) {
          tensors.push_back({address(data[i]), counts[i], parse_data_type(dtypes[i])});
        }
        std::vector<PyHandle> out;
        for (Handle& h : e.enqueue_grouped_allreduce(names, tensors, parse_reduce_op(op), prescale,
                                                     postscale)) {
          out.push_back(PyHandle{h});
        }
        return out;
      },
      py::arg("names"), py::arg("data"), py::arg("counts"), py::arg("dtypes"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0);
}

// The background engine's other collectives, and join.
void bind_engine_collectives(py::module_& m) {
  m.def("enqueue_broadcast", [](const std::string& name, std::uintptr_t data, std::size_t count,
                                const std::string& dtype, int root) {
    Engine& e = the_engine();
    return PyHandle{
        e.enqueue_broadcast(name, {address(data), count, parse_data_type(dtype)}, root)};
  });
  m.def("enqueue_allgather", [](const std::string& name, std::uintptr_t data, std::size_t count,
                                const std::string& dtype, std::size_t row_elements) {
    Engine& e = the_engine();
    return PyHandle{
        e.enqueue_allgather(name, {address(data), count, parse_data_type(dtype)}, row_elements)};
  });
  m.def(
      "enqueue_alltoall",
      [](const std::string& name, std::uintptr_t data, std::size_t count, const std::string& dtype,
         std::size_t row_elements, const std::vector<std::size_t>& send_rows) {
        Engine& e = the_engine();
        return PyHandle{e.enqueue_alltoall(name, {address(data), count, parse_data_type(dtype)},
                                           row_elements, send_rows)};
      },
      py::arg("name"), py::arg("data"), py::arg("count"), py::arg("dtype"), py::arg("row_elements"),
      py::arg("send_rows"));
  m.def(
      "enqueue_reducescatter",
      [](const std::string& name, std::uintptr_t data, std::size_t count, const std::string& dtype,
         std::size_t row_elements, const std::string& op, double prescale, double postscale) {
        Engine& e = the_engine();
        return PyHandle{
            e.enqueue_reducescatter(name, {address(data), count, parse_data_type(dtype)},
                                    row_elements, parse_reduce_op(op), prescale, postscale)};
      },
      py::arg("name"), py::arg("data"), py::arg("count"), py::arg("dtype"), py::arg("row_elements"),
      py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0);
  m.def("enqueue_join", [] { return PyHandle{the_engine().enqueue_join()}; });
}

// allocate_shared's memory as a Python object with the (writable, byte)
// buffer protocol: numpy views it without a copy and keeps it alive.
void bind_shared_memory(py::module_& m) {
  py::class_<SharedBuffer>(m, "SharedMemory", py::buffer_protocol())
      .def_buffer([](SharedBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                               {b.size()}, {1});
      })
      .def_property_readonly("shared", &SharedBuffer::shared)
      .def_property_readonly("nbytes", &SharedBuffer::size);
  m.def("allocate_shared", [](std::size_t bytes) {
    Communicator& comm = world();
    py::gil_scoped_release release;  // the first call is collective
    return allocate_shared(bytes, comm);
  });
}

}  // namespace

PYBIND11_MODULE(_concord, m) {
  m.doc() = "concord's C++ core (use the concord package, not this module)";
  m.attr("build_commit") = CONCORD_COMMIT;
  register_errors();
  bind_process(m);
  bind_allreduce(m);
  bind_engine_allreduce(m);
  bind_engine_collectives(m);
  bind_shared_memory(m);
}
