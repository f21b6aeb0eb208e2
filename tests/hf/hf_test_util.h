// What the tests of src/hf share: the fixture folder (tests/data/hf), files as bytes, the
// bit-for-bit comparison of two safetensors models, and the table-driven check that bad input is
// refused naming its field. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json_cursor.h"
#include "core/json_file.h"
#include "hf/safetensors.h"

namespace eth::test {

inline std::filesystem::path hf_data() { return std::filesystem::path(ETH_TEST_DATA_DIR) / "hf"; }

// A file of the numbers transformers computed on the fixtures (expected.json,
// llama_expected.json), read once.
inline const Json& hf_expected(const std::string& file) {
  static std::map<std::string, Json> read;
  auto it = read.find(file);
  if (it == read.end()) it = read.emplace(file, read_json_file(hf_data() / file, "test")).first;
  return it->second;
}

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void write_bytes(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// Every tensor of the model folder or file `b` has the name, dtype, shape and stored bytes of
// `a`'s (and no other). Bytes, not decoded floats: NaN payloads and -0 count too.
inline void expect_same_tensors(const std::filesystem::path& a, const std::filesystem::path& b) {
  const hf::SafetensorsModel x(a), y(b);
  ASSERT_EQ(x.names(), y.names());
  for (const std::string& n : x.names()) {
    const hf::TensorInfo* tx = x.find(n);
    const hf::TensorInfo* ty = y.find(n);
    EXPECT_EQ(tx->dtype, ty->dtype) << n;
    EXPECT_EQ(tx->shape, ty->shape) << n;
    const std::size_t bytes = tx->end - tx->begin;
    ASSERT_EQ(bytes, ty->end - ty->begin) << n;
    const std::string fx = read_bytes(x.file_of(n)), fy = read_bytes(y.file_of(n));
    std::uint64_t hx = 0, hy = 0;
    std::memcpy(&hx, fx.data(), 8);
    std::memcpy(&hy, fy.data(), 8);
    EXPECT_EQ(fx.compare(8 + hx + tx->begin, bytes, fy, 8 + hy + ty->begin, bytes), 0) << n;
  }
}

// `run` throws an InputError whose source is `source` and whose field is `field` (either not
// checked when empty), and whose message holds `phrase`; `what` names the case in failures.
inline void expect_refused(const std::string& what, const std::function<void()>& run,
                           const std::string& source, const std::string& field,
                           const std::string& phrase) {
  try {
    run();
    ADD_FAILURE() << what << ": accepted";
  } catch (const InputError& e) {
    if (!source.empty()) {
      EXPECT_EQ(e.source(), source) << what;
    }
    if (!field.empty()) {
      EXPECT_EQ(e.path(), field) << what << ": " << e.what();
    }
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << what << ": " << e.what();
  }
}

// One edit of a good JSON document and how it must be refused: the field named and a phrase of
// the reason.
struct JsonRefusal {
  const char* what;
  std::function<void(Json&)> edit;
  const char* field;
  const char* phrase;
};

// Each case's edit of `base`, given to `parse(json, "cfg.json")`, is refused naming "cfg.json",
// the case's field and its phrase.
template <class Parse>
void expect_json_refusals(const Json& base, const std::vector<JsonRefusal>& cases, Parse parse) {
  for (const JsonRefusal& c : cases) {
    Json j = base;
    c.edit(j);
    expect_refused(c.what, [&] { parse(j, "cfg.json"); }, "cfg.json", c.field, c.phrase);
  }
}

}  // namespace eth::test
