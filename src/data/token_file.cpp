// Token file reading (mmap) and atomic writing. See token_file.h for the format.
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

namespace eth {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and are mapped verbatim");

namespace {

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& where,
                      const std::string& detail) {
  throw InputError("data", path.string(), where, detail);
}

// Closes a file descriptor on every exit path.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TokenFile TokenFile::open(const std::filesystem::path& path) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) bad(path, "", "cannot open token file: " + std::string(std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) bad(path, "", "not a regular file");
  const auto bytes = static_cast<std::int64_t>(st.st_size);
  if (bytes < kTokenFileHeaderBytes) {
    bad(path, "",
        "truncated: " + std::to_string(bytes) + " bytes, expected at least the " +
            std::to_string(kTokenFileHeaderBytes) + "-byte header");
  }
  TokenFile out;
  out.path_ = path;
  out.map_bytes_ = static_cast<std::size_t>(bytes);
  void* m = ::mmap(nullptr, out.map_bytes_, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (m == MAP_FAILED) bad(path, "", "cannot map: " + std::string(std::strerror(errno)));
  out.map_ = m;
  std::int32_t header[3];
  std::memcpy(header, m, sizeof header);
  if (header[0] != kTokenFileMagic) {
    bad(path, "header[0]",
        "bad magic: expected " + std::to_string(kTokenFileMagic) +
            " (an llm.c "
            "token file), got " +
            std::to_string(header[0]));
  }
  if (header[1] != kTokenFileVersion && header[1] != kTokenFileVersionWide) {
    bad(path, "header[1]",
        "unsupported version: expected " + std::to_string(kTokenFileVersion) + " (uint16 tokens) or " +
            std::to_string(kTokenFileVersionWide) + " (uint32 tokens), got " +
            std::to_string(header[1]));
  }
  if (header[2] < 0) {
    bad(path, "header[2]", "token count must be >= 0, got " + std::to_string(header[2]));
  }
  const std::int64_t token_bytes = header[1] == kTokenFileVersionWide ? 4 : 2;
  const std::int64_t want =
      kTokenFileHeaderBytes + token_bytes * static_cast<std::int64_t>(header[2]);
  if (bytes != want) {
    bad(path, "",
        std::string(bytes < want ? "truncated" : "trailing bytes") + ": header says " +
            std::to_string(header[2]) + " tokens, so " + std::to_string(want) +
            " bytes, but the file has " + std::to_string(bytes));
  }
  out.count_ = header[2];
  out.version_ = header[1];
  out.tokens_ = static_cast<const char*>(m) + kTokenFileHeaderBytes;
  const TokenSpan t = out.tokens();
  for (std::size_t i = 0; i < t.size(); ++i) out.max_token_ = std::max(out.max_token_, t[i]);
  return out;
}

TokenFile::TokenFile(TokenFile&& o) noexcept { *this = std::move(o); }

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    tokens_ = std::exchange(o.tokens_, nullptr);
    count_ = std::exchange(o.count_, 0);
    version_ = o.version_;
    max_token_ = std::exchange(o.max_token_, 0);
  }
  return *this;
}

TokenFile::~TokenFile() { release(); }

void TokenFile::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
}

namespace {

void write_tokens(const std::filesystem::path& path, const void* tokens, std::size_t count,
                  std::int32_t version) {
  if (count > static_cast<std::size_t>(INT32_MAX)) {
    throw InputError("data", path.string(), "",
                     "too many tokens for one file: " + std::to_string(count) +
                         " (the header's count is an int32); split into shards");
  }
  std::vector<std::int32_t> header(kTokenFileHeaderInts, 0);
  header[0] = kTokenFileMagic;
  header[1] = version;
  header[2] = static_cast<std::int32_t>(count);
  AtomicFile out(path, "data");
  out.write(header.data(), static_cast<std::size_t>(kTokenFileHeaderBytes));
  out.write(tokens, count * (version == kTokenFileVersionWide ? 4 : 2));
  out.commit();
}

}  // namespace

void write_token_file(const std::filesystem::path& path, std::span<const std::uint16_t> tokens) {
  write_tokens(path, tokens.data(), tokens.size(), kTokenFileVersion);
}

void write_token_file(const std::filesystem::path& path, std::span<const std::uint32_t> tokens,
                      std::uint32_t vocab_size) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab_size) {
      throw InputError("data", path.string(), "",
                       "token " + std::to_string(i) + " is " + std::to_string(tokens[i]) +
                           ", outside the vocabulary of " + std::to_string(vocab_size));
    }
  }
  if (vocab_size > 65536) {
    write_tokens(path, tokens.data(), tokens.size(), kTokenFileVersionWide);
    return;
  }
  const std::vector<std::uint16_t> narrow(tokens.begin(), tokens.end());
  write_tokens(path, narrow.data(), narrow.size(), kTokenFileVersion);
}

}  // namespace eth
