// Errors: InputError for anything a user can get wrong (files, fields, flags), ETH_CHECK for our
// own invariants. Libraries throw; only cli/ decides the exit code. Not a logging facility.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace eth {

// A problem with user input. what() reads
//   "[component] source: path: expected ..., got ..."
// where source is a file name (or "--flag"), path a JSON path such as
// "pipelines[1].stages[0].units"; either may be empty.
class InputError : public std::runtime_error {
 public:
  InputError(std::string component, std::string source, std::string path, std::string detail);

  const std::string& component() const { return component_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

 private:
  std::string component_;
  std::string source_;
  std::string path_;
  std::string detail_;
};

// Several input problems found at once (validators report every violation, not the first).
class InputErrors : public InputError {
 public:
  explicit InputErrors(const std::vector<InputError>& errors);
  const std::vector<InputError>& errors() const { return errors_; }

 private:
  std::vector<InputError> errors_;
};

[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace eth

// Always on, in every build type: a broken invariant is our bug, never the user's.
#define ETH_CHECK(cond, msg)                                           \
  do {                                                                 \
    if (!(cond)) ::eth::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
