// Exit 0 where single_copy_available() (cross-memory attach works here), 1 where not, saying
// which: CTest runs the single-copy MPI test only where eth launch would choose it.
#include <cstdio>

#include "launch/single_copy_probe.h"

int main() {
  const bool ok = eth::single_copy_available();
  std::printf("cross-memory attach (process_vm_readv between processes): %s\n",
              ok ? "available" : "not available");
  return ok ? 0 : 1;
}
