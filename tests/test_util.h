// Helpers every test folder uses: the message of the InputError a call throws, and per-test
// scratch folders. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace eth::test {

// The what() of the InputError `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// <tmp>/eth_<suite>_<name>_<pid>, created (the pid: ctest may run a binary's tests in parallel).
inline std::filesystem::path scratch(const std::string& suite, const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("eth_" + suite + "_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Fails the test with the message of every rank (thread) that threw.
inline void expect_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << r << " threw: " << e.what();
    }
  }
}

// Writes `text` to `path` and returns the path as a string.
inline std::string write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
  return path.string();
}

// The whole text of a file ("" when it cannot be read).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace eth::test
