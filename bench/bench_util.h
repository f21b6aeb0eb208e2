// What every bench program shares: the machine its figures were measured on (CPU model, cores,
// load average: the machines are shared, so a figure means little without them), timing,
// running a command (the built `eth`, mpirun) with its output captured or its JSON read, and the
// median of a set of timings. Text tables printed from JSON rows are in bench_json.h.
#pragma once

#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "core/json_cursor.h"

namespace eth::bench {

// The CPU's model name as /proc/cpuinfo gives it; "unknown" where it gives none.
std::string cpu_model_name();

// The 1, 5 and 15-minute load averages; -1 each where the system gives none.
struct LoadAverage {
  double m1 = -1, m5 = -1, m15 = -1;
};
LoadAverage load_average();
inline double load_1m() { return load_average().m1; }

// CPU model with its family and widest vector extension, cores, and the three load averages, as
// the JSON documents carry them; machine_line is its text form.
Json machine_info();
std::string machine_line(const Json& m);

// Wall and process CPU seconds since it was made.
class Stopwatch {
 public:
  Stopwatch() : wall0_(std::chrono::steady_clock::now()), cpu0_(std::clock()) {}
  double wall_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  }
  double cpu_s() const { return static_cast<double>(std::clock() - cpu0_) / CLOCKS_PER_SEC; }

 private:
  std::chrono::steady_clock::time_point wall0_;
  std::clock_t cpu0_;
};

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `cmd` through the shell with its stdout in a file of this process's own (removed after)
// and returns its exit status (-1 when a signal ended it); the output goes to *out when given.
int run_capture(const std::string& cmd, std::string* out = nullptr);

// Runs `cmd` (run_capture); the JSON document its stdout ends with (after any text before the
// first '{'), or nothing when the command failed or printed none.
std::optional<Json> run_json(const std::string& cmd);

// The middle value, or the mean of the two middle ones for an even count; 0 for none.
double median(std::vector<double> v);

}  // namespace eth::bench
