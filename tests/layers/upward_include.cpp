// Compiled with the transport layer's include root: the dispatch layer is above
// transport, so this include must fail to compile.
#include "dispatch/dispatch.hpp"
#include "transport/transport.hpp"

int main() {
  return 0;
}
