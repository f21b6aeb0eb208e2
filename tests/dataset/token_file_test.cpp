// Token files: the llm.c layout byte by byte, atomic round trips, and refusal of damaged files by
// name.
#include "data/token_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "core/error.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("eth_dataset_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

using test::error_of;

std::int32_t int_at(const std::string& bytes, std::size_t i) {
  std::int32_t v;
  std::memcpy(&v, bytes.data() + 4 * i, 4);
  return v;
}

TEST(TokenFile, LayoutIsLlmcs) {
  const fs::path p = temp_dir() / "layout.bin";
  const std::vector<std::uint16_t> tokens = {1, 2, 65535, 0, 300};
  write_token_file(p, tokens);
  const std::string bytes = read_bytes(p);
  // 256 int32 of header, then 2 bytes per token.
  ASSERT_EQ(bytes.size(), 256u * 4 + tokens.size() * 2);
  EXPECT_EQ(int_at(bytes, 0), 20240520);
  EXPECT_EQ(int_at(bytes, 1), 1);
  EXPECT_EQ(int_at(bytes, 2), 5);
  for (std::size_t i = 3; i < 256; ++i) EXPECT_EQ(int_at(bytes, i), 0) << i;
  // Token 2 (65535) little-endian at byte 1024 + 4.
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 4]), 0xFF);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1024 + 8 + 1]), 300 >> 8);
  EXPECT_FALSE(fs::exists(p.string() + ".tmp." + std::to_string(::getpid())));
}

TEST(TokenFile, RoundTripAndMove) {
  const fs::path p = temp_dir() / "round.bin";
  std::vector<std::uint16_t> tokens(1000);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint16_t>(i * 37 % 4096);
  write_token_file(p, tokens);
  TokenFile f = TokenFile::open(p);
  TokenFile g = std::move(f);
  ASSERT_EQ(g.size(), 1000);
  ASSERT_EQ(g.tokens().size(), tokens.size());
  const TokenSpan t = g.tokens();
  EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), t.begin()));
  EXPECT_EQ(g.max_token(), *std::max_element(tokens.begin(), tokens.end()));
}

TEST(TokenFile, EmptyFileHasNoTokens) {
  const fs::path p = temp_dir() / "empty.bin";
  write_token_file(p, {});
  EXPECT_EQ(TokenFile::open(p).size(), 0);
}

TEST(TokenFile, DamagedFilesAreRefusedByName) {
  const fs::path p = temp_dir() / "good.bin";
  write_token_file(p, std::vector<std::uint16_t>(10, 7));
  const std::string good = read_bytes(p);
  const fs::path q = temp_dir() / "damaged.bin";
  const std::string name = q.string();

  std::string s = good;
  s[0] = 'X';
  write_bytes(q, s);
  std::string e = error_of([&] { TokenFile::open(q); });
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("bad magic"), std::string::npos) << e;

  s = good;
  s[4] = 3;
  write_bytes(q, s);
  e = error_of([&] { TokenFile::open(q); });
  EXPECT_NE(e.find("header[1]: unsupported version: expected 1 (uint16 tokens) or 2 (uint32 "
                   "tokens), got 3"),
            std::string::npos)
      << e;

  // A version-1 file relabelled version 2 holds half the bytes its count needs.
  s = good;
  s[4] = 2;
  write_bytes(q, s);
  e = error_of([&] { TokenFile::open(q); });
  EXPECT_NE(e.find("truncated: header says 10 tokens"), std::string::npos) << e;

  write_bytes(q, good.substr(0, good.size() - 1));
  e = error_of([&] { TokenFile::open(q); });
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  write_bytes(q, good + "xy");
  EXPECT_NE(error_of([&] { TokenFile::open(q); }).find("trailing bytes"), std::string::npos);

  write_bytes(q, good.substr(0, 100));
  e = error_of([&] { TokenFile::open(q); });
  EXPECT_NE(e.find("truncated: 100 bytes"), std::string::npos) << e;

  e = error_of([&] { TokenFile::open(temp_dir() / "missing.bin"); });
  EXPECT_NE(e.find("missing.bin"), std::string::npos) << e;
}

// Version 2 (uint32 ids) exactly as llm.c lays it out for Llama-3, chosen only when the
// vocabulary does not fit 16 bits; a small vocabulary still writes llm.c's version 1.
TEST(TokenFile, WideIdsUseVersionTwo) {
  const fs::path p = temp_dir() / "wide.bin";
  const std::vector<std::uint32_t> ids = {0, 65535, 65536, 128255, 7};
  write_token_file(p, ids, 128256);
  const std::string bytes = read_bytes(p);
  ASSERT_EQ(bytes.size(), 1024u + 4 * ids.size());
  EXPECT_EQ(int_at(bytes, 0), 20240520);
  EXPECT_EQ(int_at(bytes, 1), 2);
  EXPECT_EQ(int_at(bytes, 2), 5);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(static_cast<std::uint32_t>(int_at(bytes, 256 + i)), ids[i]);
  }
  const TokenFile f = TokenFile::open(p);
  EXPECT_EQ(f.version(), 2);
  EXPECT_EQ(f.tokens().bytes_per_token(), 4);
  EXPECT_EQ(f.max_token(), 128255u);
  for (std::size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(f.tokens()[i], ids[i]);
  EXPECT_EQ(std::vector<std::uint32_t>(f.tokens().begin(), f.tokens().end()), ids);

  const std::vector<std::uint32_t> small = {1, 65535, 3};
  write_token_file(p, small, 65536);
  EXPECT_EQ(read_bytes(p).size(), 1024u + 2 * small.size());
  const TokenFile g = TokenFile::open(p);
  EXPECT_EQ(g.version(), 1);
  EXPECT_EQ(g.tokens()[1], 65535u);

  const std::string e = error_of([&] { write_token_file(p, ids, 100000); });
  EXPECT_NE(e.find("token 3 is 128255, outside the vocabulary of 100000"), std::string::npos) << e;
}

}  // namespace
}  // namespace eth
