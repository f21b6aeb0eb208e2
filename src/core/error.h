// Errors: InputError for anything a user can get wrong (files, fields, flags), ETH_CHECK for our
// own invariants. Libraries throw; only cli/ decides the exit code. Not a logging facility.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace eth {

// A problem with user input. what() reads
//   "[component] source: path: expected ..., got ..."
// where source is a file name (or "--flag"), path a JSON path such as
// "pipelines[1].stages[0].units"; either may be empty. Every part passes through message_text,
// so a message is printable whatever the input held (NUL bytes, control characters, invalid
// UTF-8) and a 10 MB key or value cannot make it 10 MB long: source and path keep at most
// kMaxMessagePartBytes, the detail kMaxMessageDetailBytes.
class InputError : public std::runtime_error {
 public:
  static constexpr std::size_t kMaxMessagePartBytes = 256;
  static constexpr std::size_t kMaxMessageDetailBytes = 4096;

  InputError(std::string component, std::string source, std::string path, std::string detail);

  const std::string& component() const { return component_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  const std::string& detail() const { return detail_; }

 protected:
  struct Joined {};
  InputError(Joined, std::string message);  // for InputErrors: parts already made printable

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

// `text` as it may appear in a message: NUL and other control characters escaped (\0, \t, \xNN;
// newlines kept when keep_newlines), bytes that are not UTF-8 escaped as \xNN, and no more than
// about max_bytes of it: a longer text keeps its start and says how long it was,
// "abc... (10485760 bytes)".
std::string message_text(std::string_view text, std::size_t max_bytes = 200,
                         bool keep_newlines = false);

// Length of the valid UTF-8 sequence at text[i] (1-4), or 0 when the bytes there are not one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace eth

// Always on, in every build type: a broken invariant is our bug, never the user's.
#define ETH_CHECK(cond, msg)                                           \
  do {                                                                 \
    if (!(cond)) ::eth::check_failed(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
