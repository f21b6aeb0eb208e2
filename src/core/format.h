// Numbers a person reads in messages and tables: fixed-point figures and byte counts in decimal
// units. Here rather than in the CLI so that a pure library's error (the planner saying which
// device overflows by how much) prints sizes the way the CLI's tables do.
#pragma once

#include <string>

namespace eth {

std::string fmt_num(double v, int precision = 2);  // fixed, trailing zeros kept
std::string fmt_bytes(double bytes);                // "12.3 GB" (10^9), "30.0 MB", "512 B"

}  // namespace eth
