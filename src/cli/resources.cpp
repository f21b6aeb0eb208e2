// Memory checks before allocation. See resources.h.
#include "cli/resources.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/output.h"
#include "core/error.h"

namespace eth::cli {

double available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    std::istringstream fields(line);
    std::string key;
    double kb = 0;
    if (fields >> key >> kb && key == "MemAvailable:") return kb * 1024.0;
  }
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<double>(::sysconf(_SC_PAGE_SIZE));
}

int available_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) return std::max(1, CPU_COUNT(&allowed));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void check_memory(double needed_bytes, const std::string& what, const std::string& flag,
                  const std::string& advice) {
  const double available = available_memory_bytes();
  if (needed_bytes <= available) return;
  throw InputError("cli", flag, "",
                   "needs " + fmt_bytes(needed_bytes) + " (" + what + "), this machine has " +
                       fmt_bytes(available) + " available; " + advice);
}

}  // namespace eth::cli
