// What this machine can give a command, checked before the command allocates: memory that
// `eth train`, `eth data` and `eth profile --measure` would otherwise find missing only when a
// mapping fails (an abort, exit 3). Reads /proc, so it lives in cli/.
#pragma once

#include <string>

namespace eth::cli {

// Bytes this process may still map: MemAvailable from /proc/meminfo, else physical memory.
double available_memory_bytes();

// The cores this process may run on (its CPU affinity), at least 1.
int available_cores();

// Throws InputError("cli", flag, "", ...) when `needed_bytes` exceeds available_memory_bytes():
// "needs 4.0 TB (<what>), this machine has 12.3 GB available; <advice>".
void check_memory(double needed_bytes, const std::string& what, const std::string& flag,
                  const std::string& advice);

}  // namespace eth::cli
