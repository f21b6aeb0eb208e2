// AtomicFile, AppendFile and the output checks (atomic_file.h), on POSIX calls so that every
// error number reaches the message: std::ofstream reports a full disk as a bare failbit, and
// only sometimes.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace eth {

namespace fs = std::filesystem;

namespace {

std::string kind_name(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a folder";
    case fs::file_type::regular: return "a regular file";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    default: return "something other than a regular file";
  }
}

std::string errno_text(int err) {
  std::string s = std::strerror(err);
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) s += " (is the disk full?)";
  return s;
}

// The file a write to `target` replaces: a symbolic link is followed, so the link stays a link.
fs::path resolve_target(const fs::path& target, const std::string& component) {
  if (target.empty()) throw InputError(component, "", "", "expected a file name, got nothing");
  std::error_code ec;
  if (fs::symlink_status(target, ec).type() != fs::file_type::symlink) return target;
  fs::path real = fs::canonical(target, ec);
  if (ec) {
    throw InputError(component, target.string(), "",
                     "is a symbolic link that leads nowhere (" + ec.message() + ")");
  }
  return real;
}

}  // namespace

void check_output_file(const fs::path& target, const std::string& component) {
  const fs::path real = resolve_target(target, component);
  if (!real.has_filename()) {
    throw InputError(component, target.string(), "", "names a folder, expected a file name");
  }
  std::error_code ec;
  const fs::file_type type = fs::status(real, ec).type();
  if (type == fs::file_type::none || type == fs::file_type::unknown) {
    throw InputError(component, target.string(), "", "cannot inspect: " + ec.message());
  }
  if (type != fs::file_type::not_found && type != fs::file_type::regular) {
    throw InputError(component, target.string(), "",
                     "exists and is " + kind_name(type) +
                         ", not a regular file; refusing to replace it");
  }
  const fs::path dir = real.parent_path().empty() ? fs::path(".") : real.parent_path();
  if (!fs::is_directory(dir, ec)) {
    throw InputError(component, target.string(), "",
                     "cannot write: the folder " + dir.string() + " does not exist");
  }
}

void prepare_output_dir(const fs::path& dir, const std::string& component) {
  if (dir.empty()) throw InputError(component, "", "", "expected a folder name, got nothing");
  std::error_code ec;
  const fs::file_type type = fs::status(dir, ec).type();
  if (type == fs::file_type::directory) return;
  if (type != fs::file_type::not_found) {
    throw InputError(component, dir.string(), "",
                     "exists and is " + kind_name(type) + ", expected a folder");
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw InputError(component, dir.string(), "",
                     "cannot create the folder: " + (ec ? ec.message() : std::string("?")));
  }
}

AtomicFile::AtomicFile(const fs::path& target, std::string component)
    : target_(target), component_(std::move(component)) {
  check_output_file(target_, component_);
  const fs::path real = resolve_target(target_, component_);
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    tmp_ = real.parent_path() / ("." + real.filename().string() + ".tmp-" +
                                 std::to_string(::getpid()) + "-" +
                                 std::to_string(counter.fetch_add(1)));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt > 100)) {
      const int err = errno;
      throw InputError(component_, target_.string(), "",
                       "cannot create a temporary file beside it: " + errno_text(err));
    }
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
  tmp_.clear();
  throw InputError(component_, target_.string(), "", what + ": " + errno_text(err));
}

void AtomicFile::write(const void* data, std::size_t bytes) {
  if (fd_ < 0) throw InputError(component_, target_.string(), "", "write after a failed write");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw InputError(component_, target_.string(), "", "commit after a failed write");
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("cannot write (fsync)", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    tmp_.clear();
    throw InputError(component_, target_.string(), "", "cannot write (close): " + errno_text(err));
  }
  const fs::path real = resolve_target(target_, component_);
  if (::rename(tmp_.c_str(), real.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    tmp_.clear();
    throw InputError(component_, target_.string(), "",
                     "cannot rename the finished file into place: " + errno_text(err));
  }
  committed_ = true;
}

void write_file_atomic(const fs::path& path, const std::string& content,
                       const std::string& component) {
  AtomicFile f(path, component);
  f.write(content);
  f.commit();
}

AppendFile::AppendFile(const fs::path& target, std::string component)
    : target_(target), component_(std::move(component)) {
  check_output_file(target_, component_);
  fd_ = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    throw InputError(component_, target_.string(), "",
                     "cannot open for appending: " + errno_text(err));
  }
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile::AppendFile(AppendFile&& o) noexcept { *this = std::move(o); }

AppendFile& AppendFile::operator=(AppendFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    target_ = std::move(o.target_);
    component_ = std::move(o.component_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void AppendFile::write_line(std::string_view line) {
  if (fd_ < 0) throw InputError(component_, target_.string(), "", "not open");
  std::string text(line);
  text += '\n';
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      throw InputError(component_, target_.string(), "", "cannot write: " + errno_text(err));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void AppendFile::close() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const int err = errno;
    throw InputError(component_, target_.string(), "", "cannot write (close): " + errno_text(err));
  }
}

}  // namespace eth
