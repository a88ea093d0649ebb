// Sums each rank's rank with the installed library and checks the closed form.
#include <concord/concord.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    concord::Communicator comm = concord::Communicator::world();
    std::vector<double> v(1000, static_cast<double>(comm.rank()));
    concord::allreduce(v.data(), v.data(), v.size(), concord::DataType::Float64,
                       concord::ReduceOp::Sum, comm);
    const double expected = comm.size() * (comm.size() - 1) / 2.0;
    for (double x : v) {
      if (x != expected) {
        std::fprintf(stderr, "rank %d: got %g, expected %g\n", comm.rank(), x, expected);
        return 1;
      }
    }
    if (comm.rank() == 0) std::printf("consumer: concord %s ok\n", CONCORD_VERSION_STRING);
    return 0;
  } catch (const concord::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
