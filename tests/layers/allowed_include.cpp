// Compiled with the transport layer's include root: headers of its own layer and
// of core, which transport may use. Must compile (the control case).
#include "core/mpi_check.hpp"
#include "transport/transport.hpp"

int main() {
  return 0;
}
