// llm.c's token file: a header of 256 little-endian int32 (magic 20240520, version 1, token
// count, the rest zero) followed by that many uint16 tokens. Reading maps the file read-only and
// refuses a bad magic, version or length by naming the file; writing is atomic.
// Not a tokenizer (data/tokenize.h) and not a sampler (data/sampler.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace eth {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;
inline constexpr std::int64_t kTokenFileHeaderInts = 256;
inline constexpr std::int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// A read-only view of a token file, mapped for the object's lifetime (move-only).
class TokenFile {
 public:
  // Throws InputError("data", path, "header[i]" or "", ...) for a missing file, a bad magic or
  // version, a negative count, or a file whose length is not header + 2 * count bytes.
  static TokenFile open(const std::filesystem::path& path);

  TokenFile(TokenFile&& o) noexcept;
  TokenFile& operator=(TokenFile&& o) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  std::span<const std::uint16_t> tokens() const {
    return {tokens_, static_cast<std::size_t>(count_)};
  }
  std::int64_t size() const { return count_; }
  const std::filesystem::path& path() const { return path_; }
  // Largest token id in the file (scanned once at open), so a trainer can check it against the
  // model's vocabulary before step 0 rather than reading out of bounds.
  std::uint16_t max_token() const { return max_token_; }

 private:
  TokenFile() = default;
  void release() noexcept;
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const std::uint16_t* tokens_ = nullptr;
  std::int64_t count_ = 0;
  std::uint16_t max_token_ = 0;
};

// Writes header + tokens through a temporary sibling and rename(2).
void write_token_file(const std::filesystem::path& path, std::span<const std::uint16_t> tokens);

}  // namespace eth
