// llm.c's token file: a header of 256 little-endian int32 (magic 20240520, version, token count,
// the rest zero) followed by that many tokens: uint16 in version 1, uint32 in version 2 (as
// llm.c writes for Llama-3's 128,256-token vocabulary). Writers pick version 2 only when the
// vocabulary does not fit 16 bits, so files of small vocabularies stay llm.c's version 1.
// Reading maps the file read-only and refuses a bad magic, version or length by naming the file;
// writing is atomic.
// Not a tokenizer (data/tokenize.h) and not a sampler (data/sampler.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace eth {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;      // uint16 tokens
inline constexpr std::int32_t kTokenFileVersionWide = 2;  // uint32 tokens
inline constexpr std::int64_t kTokenFileHeaderInts = 256;
inline constexpr std::int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

// The tokens of a file of either width, read as uint32. Cheap to copy (a pointer and a size).
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(std::span<const std::uint16_t> t) : narrow_(t.data()), size_(t.size()) {}
  TokenSpan(std::span<const std::uint32_t> t) : wide_(t.data()), size_(t.size()) {}
  TokenSpan(const std::vector<std::uint16_t>& t) : TokenSpan(std::span(t)) {}
  TokenSpan(const std::vector<std::uint32_t>& t) : TokenSpan(std::span(t)) {}

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::uint32_t operator[](std::size_t i) const { return wide_ != nullptr ? wide_[i] : narrow_[i]; }
  int bytes_per_token() const { return wide_ != nullptr ? 4 : 2; }

  // Read-only iteration yielding uint32 ids (range-for, std algorithms). An iterator holds the
  // file's pointers, not the span, so it outlives a temporary TokenSpan.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::uint32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::uint32_t;
    Iterator() = default;
    Iterator(const std::uint16_t* n, const std::uint32_t* w, std::size_t i)
        : narrow_(n), wide_(w), i_(i) {}
    std::uint32_t operator*() const { return wide_ != nullptr ? wide_[i_] : narrow_[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++i_;
      return old;
    }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    const std::uint16_t* narrow_ = nullptr;
    const std::uint32_t* wide_ = nullptr;
    std::size_t i_ = 0;
  };
  Iterator begin() const { return {narrow_, wide_, 0}; }
  Iterator end() const { return {narrow_, wide_, size_}; }

 private:
  const std::uint16_t* narrow_ = nullptr;
  const std::uint32_t* wide_ = nullptr;
  std::size_t size_ = 0;
};

// A read-only view of a token file, mapped for the object's lifetime (move-only).
class TokenFile {
 public:
  // Throws InputError("data", path, "header[i]" or "", ...) for a missing file, a bad magic or
  // version, a negative count, or a file whose length is not header + count * token bytes.
  static TokenFile open(const std::filesystem::path& path);

  TokenFile(TokenFile&& o) noexcept;
  TokenFile& operator=(TokenFile&& o) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile();

  TokenSpan tokens() const {
    const auto n = static_cast<std::size_t>(count_);
    if (version_ == kTokenFileVersionWide) return std::span(static_cast<const std::uint32_t*>(tokens_), n);
    return std::span(static_cast<const std::uint16_t*>(tokens_), n);
  }
  std::int32_t version() const { return version_; }
  std::int64_t size() const { return count_; }
  const std::filesystem::path& path() const { return path_; }
  // Largest token id in the file (scanned once at open), so a trainer can check it against the
  // model's vocabulary before step 0 rather than reading out of bounds.
  std::uint32_t max_token() const { return max_token_; }

 private:
  TokenFile() = default;
  void release() noexcept;
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  const void* tokens_ = nullptr;
  std::int64_t count_ = 0;
  std::int32_t version_ = kTokenFileVersion;
  std::uint32_t max_token_ = 0;
};

// Writes header + tokens through a temporary sibling and rename(2): version 1.
void write_token_file(const std::filesystem::path& path, std::span<const std::uint16_t> tokens);
// Version 1 when vocab_size <= 65,536 (every id fits 16 bits), else version 2. Throws
// InputError("data", path, "", ...) when a token is >= vocab_size.
void write_token_file(const std::filesystem::path& path, std::span<const std::uint32_t> tokens,
                      std::uint32_t vocab_size);

}  // namespace eth
