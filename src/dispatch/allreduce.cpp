// The public blocking allreduce: everything happens in dispatch_allreduce.
#include <concord/allreduce.hpp>

#include "dispatch/dispatch.hpp"

namespace concord {

void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
               const Communicator& comm, const AllreduceOptions& options) {
  detail::dispatch_allreduce("allreduce", send, recv, count, dtype, op, comm, options);
}

}  // namespace concord
