#include "core/format.h"

#include <cmath>
#include <cstdio>

namespace eth {

std::string fmt_num(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string fmt_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(bytes) >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  return fmt_num(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

}  // namespace eth
