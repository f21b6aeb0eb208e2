// Writing files so that no failure goes unnoticed and nothing is clobbered: every file ETH writes
// goes through AtomicFile (whole files: plans, profiles, traces, token files, checkpoints) or
// AppendFile (logs). Both refuse, before writing a byte, a target that exists and is not a
// regular file (a device such as /dev/full, a FIFO, a folder) and a target whose folder does
// not exist; a write, sync or close error (a full disk) is an InputError naming the file. An
// AtomicFile writes a temporary sibling and renames it over the target only once everything
// is on disk, so a reader sees the old file or the new one, never half of one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace eth {

// Throws InputError(component, target, ...) when `target` exists and is not a regular file (a
// symbolic link counts as what it points to), or when its folder does not exist or is not a
// folder. Call it before long work whose result goes to `target`.
void check_output_file(const std::filesystem::path& target, const std::string& component);

// A folder a command creates by design (a profile or checkpoint folder): created with its
// parents when missing; InputError when it exists as something other than a folder or cannot be
// created. Call it before any work.
void prepare_output_dir(const std::filesystem::path& dir, const std::string& component);

class AtomicFile {
 public:
  // check_output_file, then creates the temporary sibling ".<name>.tmp-<pid>-<n>".
  AtomicFile(const std::filesystem::path& target, std::string component);
  ~AtomicFile();  // removes the temporary unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, close and rename over the target.
  void commit();

  const std::filesystem::path& target() const { return target_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::filesystem::path target_;
  std::filesystem::path tmp_;
  std::string component_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `content` to `path` through an AtomicFile; errors are InputError(component, path, ...).
void write_file_atomic(const std::filesystem::path& path, const std::string& content,
                       const std::string& component = "io");

// A log that grows by whole lines: opened for appending (created when missing) under the same
// target rules, each line written and flushed at once; a failed write throws InputError.
class AppendFile {
 public:
  AppendFile() = default;
  AppendFile(const std::filesystem::path& target, std::string component);
  ~AppendFile();
  AppendFile(AppendFile&& o) noexcept;
  AppendFile& operator=(AppendFile&& o) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  bool is_open() const { return fd_ >= 0; }
  explicit operator bool() const { return is_open(); }
  void write_line(std::string_view line);  // appends line + "\n"
  void close();                            // reports a close error

 private:
  std::filesystem::path target_;
  std::string component_;
  int fd_ = -1;
};

}  // namespace eth
