// Shared by the fuzz targets: run a loader on the input and accept exactly one way of failing,
// eth::InputError (a refusal naming the file and field). Anything else escaping, a crash, a
// sanitizer report or a hang is a finding: an input that would make `eth` exit 3 or worse.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json_file.h"

namespace eth::fuzz {

inline std::string_view bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs f; InputError is the expected refusal. Other exceptions abort so libFuzzer records them.
template <class F>
void expect_input_errors_only(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    // The message must be printable: what() of an InputError never holds a NUL.
    if (std::string_view(e.what()).find('\0') != std::string_view::npos) std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: exception other than InputError: %s\n", e.what());
    std::abort();
  }
}

// A file of this process in /dev/shm (or /tmp) holding `content`, for loaders that read paths.
inline std::string temp_file(const std::string& name, std::string_view content) {
  static const std::string dir = [] {
    const char* base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return std::string(base) + "/eth_fuzz_" + std::to_string(::getpid());
  }();
  static const bool made = [] {
    std::string cmd = "mkdir -p '" + dir + "'";
    return std::system(cmd.c_str()) == 0;
  }();
  (void)made;
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (!content.empty() && std::fwrite(content.data(), 1, content.size(), f) != content.size()) {
    std::abort();
  }
  std::fclose(f);
  return path;
}

}  // namespace eth::fuzz
