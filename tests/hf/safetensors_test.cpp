// The safetensors reader and writer (hf/safetensors.cpp): element conversions against formulas
// worked in double (exhaustive over every 16-bit pattern), the fixtures transformers wrote read as
// it described them, and every lie a header can tell refused naming the file and the field. A
// model folder's files (safetensors_model.cpp) are safetensors_model_test.cpp's.
#include "hf/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_cursor.h"
#include "hf_test_util.h"
#include "test_util.h"

namespace eth::hf::safetensors_test {
namespace {

namespace fs = std::filesystem;

const fs::path kData = test::hf_data();

// A safetensors file from a header text and a data section.
std::string file_of(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// IEEE half decoded in double from its fields (the formula, not bit tricks).
double half_value(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  const double sign = s ? -1.0 : 1.0;
  if (e == 31) return m ? NAN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(HfDtype, HalfDecodesEveryPatternAsTheFormula) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const double want = half_value(static_cast<std::uint16_t>(h));
    const float got = f32_from_f16(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << h;
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0) << h;
    }
  }
}

TEST(HfDtype, SixteenBitValuesRoundTripBitForBit) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const bool half_nan = (b & 0x7C00) == 0x7C00 && (b & 0x3FF) != 0;
    const bool bf_nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
    if (!half_nan) {
      ASSERT_EQ(f16_from_f32(f32_from_f16(b)), b) << h;
    }
    if (!bf_nan) {
      ASSERT_EQ(bf16_from_f32(f32_from_bf16(b)), b) << h;
    }
    // bf16 is the top half of a float: decoding is a shift.
    ASSERT_EQ(std::bit_cast<std::uint32_t>(f32_from_bf16(b)), h << 16);
  }
}

// Rounding to nearest, ties to even, checked by distance to the two neighbours in double.
TEST(HfDtype, RoundingIsNearestEvenAgainstNeighbours) {
  std::mt19937 gen(3);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f = std::bit_cast<float>(bits(gen));
    if (!std::isfinite(f)) continue;
    if (i % 2) f = std::ldexp(std::fmod(f, 1.0f), (i % 40) - 26);  // the fp16 range, subnormals
    const double x = f;
    const std::uint16_t h = f16_from_f32(f);
    const double got = half_value(h);
    if (std::fabs(x) >= 65520.0) {
      ASSERT_TRUE(std::isinf(got)) << x;
      continue;
    }
    // The neighbours of h's magnitude, one pattern away on either side.
    const auto mag = static_cast<std::uint16_t>(h & 0x7FFF);
    const double lo = mag ? half_value(static_cast<std::uint16_t>(mag - 1)) : 0.0;
    const double hi = half_value(static_cast<std::uint16_t>(mag + 1));
    const double ax = std::fabs(x), ag = std::fabs(got);
    ASSERT_LE(std::fabs(ag - ax), std::fabs(lo - ax)) << x;
    if (mag < 0x7BFF) {
      ASSERT_LE(std::fabs(ag - ax), std::fabs(hi - ax)) << x;
    }
    if (std::fabs(ag - ax) == std::fabs(lo - ax) && mag != 0 && ag != lo) {
      ASSERT_EQ(mag & 1, 0) << "tie not to even at " << x;
    }
    // bf16: the same property with the float-level neighbours.
    const std::uint16_t b = bf16_from_f32(f);
    const double bg = f32_from_bf16(b);
    const auto bm = static_cast<std::uint16_t>(b & 0x7FFF);
    const double blo = bm ? f32_from_bf16(static_cast<std::uint16_t>(bm - 1)) : 0.0;
    const double bhi = f32_from_bf16(static_cast<std::uint16_t>(bm + 1));
    if (std::isinf(bg)) continue;
    ASSERT_LE(std::fabs(std::fabs(bg) - ax), std::fabs(blo - ax)) << x;
    ASSERT_LE(std::fabs(std::fabs(bg) - ax), std::fabs(bhi - ax)) << x;
  }
  EXPECT_EQ(f16_from_f32(65504.0f), 0x7BFF);
  EXPECT_EQ(f16_from_f32(65519.0f), 0x7BFF);
  EXPECT_EQ(f16_from_f32(65520.0f), 0x7C00);  // the tie above the largest goes to infinity
  EXPECT_EQ(f16_from_f32(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest: tie to 0
  EXPECT_EQ(f16_from_f32(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(HfSafetensors, ReadsTheFixtureAsTransformersWroteIt) {
  const SafetensorsFile f(kData / "gpt2_f32" / "model.safetensors");
  EXPECT_EQ(f.tensors().size(), 28u);  // 2 embeddings, 2 x 12 block tensors, ln_f weight, bias
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorInfo* attn = f.find("transformer.h.1.attn.c_attn.weight");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->shape, (std::vector<std::int64_t>{32, 96}));
  EXPECT_EQ(attn->dtype, Dtype::F32);
  // The bf16 file holds the fp32 file's values rounded to nearest even.
  const SafetensorsFile b(kData / "gpt2_bf16" / "model.safetensors");
  for (const TensorInfo& t : f.tensors()) {
    const TensorInfo* bt = b.find(t.name);
    ASSERT_NE(bt, nullptr) << t.name;
    ASSERT_EQ(bt->dtype, Dtype::BF16);
    std::vector<float> x(static_cast<std::size_t>(t.numel())), y(x.size());
    f.read_f32(t, x.data());
    b.read_f32(*bt, y.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(y[i], f32_from_bf16(bf16_from_f32(x[i]))) << t.name << "[" << i << "]";
    }
  }
}

TEST(HfSafetensors, WriterRoundTripsEveryDtype) {
  const fs::path dir = test::scratch("hf", "writer");
  const std::vector<TensorOut> ts = {
      {"a", Dtype::F32, {2, 3}}, {"b", Dtype::BF16, {5}}, {"c", Dtype::F16, {1, 1, 4}},
      {"empty", Dtype::F32, {0, 7}}};
  const std::vector<std::vector<float>> vals = {
      {1, -2, 3.5f, 1e-30f, -0.0f, 7}, {1.0f, 0.5f, -3.0f, 1e-40f, 65536.0f},
      {0.25f, -65504.0f, std::ldexp(1.0f, -24), 3.0f}, {}};
  write_safetensors(dir / "x.safetensors", ts, {{"format", "pt"}},
                    [&](std::size_t i, std::span<float> v) {
                      ASSERT_EQ(v.size(), vals[i].size());
                      std::copy(vals[i].begin(), vals[i].end(), v.begin());
                    });
  const SafetensorsFile f(dir / "x.safetensors");
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo* t = f.find(ts[i].name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, ts[i].dtype);
    EXPECT_EQ(t->shape, ts[i].shape);
    std::vector<float> got(vals[i].size());
    f.read_f32(*t, got.data());
    for (std::size_t k = 0; k < got.size(); ++k) {
      const float want = ts[i].dtype == Dtype::F32    ? vals[i][k]
                         : ts[i].dtype == Dtype::BF16 ? f32_from_bf16(bf16_from_f32(vals[i][k]))
                                                      : f32_from_f16(f16_from_f32(vals[i][k]));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got[k]), std::bit_cast<std::uint32_t>(want));
    }
  }
  // A value fp16 cannot hold is refused by tensor, and the target is not created.
  const std::string err = test::error_of([&] {
    write_safetensors(dir / "y.safetensors", {{"big", Dtype::F16, {1}}}, {},
                      [](std::size_t, std::span<float> v) { v[0] = 1e6f; });
  });
  EXPECT_NE(err.find("big"), std::string::npos) << err;
  EXPECT_NE(err.find("overflows fp16"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "y.safetensors"));
}

// What a damaged header must be refused with: the file, the field and a phrase of the reason.
struct Lie {
  const char* what;
  std::string header;  // with 16 data bytes after it
  const char* field;
  const char* phrase;
};

TEST(HfSafetensors, RefusesHeadersThatLieNamingFileAndField) {
  const fs::path dir = test::scratch("hf", "lies");
  const std::string t = R"("t":{"dtype":"F32","shape":[2],"data_offsets":)";
  const std::string u = R"("u":{"dtype":"F32","shape":[2],"data_offsets":)";
  const std::vector<Lie> lies = {
      {"overlap", "{" + t + "[0,8]}," + u + "[4,12]}}", "u.data_offsets", "overlaps tensor \"t\""},
      {"out of range", "{" + t + "[0,8]}," + u + "[8,24]}}", "u.data_offsets", "ends at byte 24"},
      {"shape x dtype", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       "t.data_offsets", "shape [3] of F32 needs 12"},
      {"bf16 size", R"({"t":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})",
       "t.data_offsets", "needs 8"},
      {"hole", "{" + t + R"([0,8]},"u":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
       "u.data_offsets", "hole"},
      {"trailing", "{" + t + "[0,8]}}", "", "trailing bytes"},
      {"quantized", R"({"t":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})",
       "t.dtype", "unsupported dtype \"F8_E4M3\""},
      {"integer", R"({"t":{"dtype":"I8","shape":[16],"data_offsets":[0,16]}})", "t.dtype",
       "unsupported dtype \"I8\""},
      {"unknown dtype", R"({"t":{"dtype":"Q4","shape":[16],"data_offsets":[0,16]}})", "t.dtype",
       "a safetensors dtype"},
      {"huge shape", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})",
       "t.shape", "more bytes than the file"},
      {"negative dim", R"({"t":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
       "t.shape[0]", "expected"},
      {"end before begin", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})",
       "t.data_offsets", "end is before begin"},
      {"extra key", R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}})", "t.x",
       "unknown field"},
      {"not json", R"({"t":)", "", "offset"},
  };
  for (const Lie& l : lies) {
    const fs::path p = dir / "lie.safetensors";
    test::write_bytes(p, file_of(l.header, std::string(16, '\1')));
    test::expect_refused(l.what, [&] { SafetensorsFile f(p); }, p.string(), l.field, l.phrase);
  }
}

TEST(HfSafetensors, RefusesTruncatedFilesAtEveryLength) {
  const fs::path dir = test::scratch("hf", "truncated");
  const std::string whole = test::read_bytes(kData / "gpt2_bf16" / "model.safetensors");
  const fs::path p = dir / "model.safetensors";
  std::uint64_t header = 0;
  std::memcpy(&header, whole.data(), 8);
  // Cuts inside the length field, the header, the first tensor and the last byte.
  for (std::size_t keep : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{8 + header / 2},
                           std::size_t{8 + header + 3}, whole.size() - 1}) {
    test::write_bytes(p, whole.substr(0, keep));
    const std::string err = test::error_of([&] { SafetensorsFile f(p); });
    EXPECT_NE(err.find(p.string()), std::string::npos) << keep << ": " << err;
    EXPECT_TRUE(err.find("truncated") != std::string::npos ||
                err.find("ends at byte") != std::string::npos)
        << keep << ": " << err;
  }
}

}  // namespace
}  // namespace eth::hf::safetensors_test
