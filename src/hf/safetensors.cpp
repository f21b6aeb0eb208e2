// Safetensors reading (strict header checks, tensors streamed through a bounce buffer) and
// writing (header, then each tensor converted on the way out). See safetensors.h.
#include "hf/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"

namespace eth::hf {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian tensors verbatim");

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // safetensors' own cap
constexpr int kMaxDims = 8;
constexpr std::size_t kBounceElems = 1 << 16;  // 256 KiB of fp32 per read or write

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& field,
                      const std::string& detail) {
  throw InputError("hf", path.string(), field, detail);
}

// An open file descriptor, closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void pread_all(int fd, void* buf, std::size_t n, std::uint64_t at,
               const std::filesystem::path& path, const std::string& field) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      bad(path, field,
          got == 0 ? "the file ended early (truncated while being read?)"
                   : std::string("cannot read: ") + std::strerror(errno));
    }
    p += got;
    n -= static_cast<std::size_t>(got);
    at += static_cast<std::uint64_t>(got);
  }
}

// Known safetensors dtypes ETH does not convert: named in the refusal.
bool known_unsupported(const std::string& s) {
  static const char* const kNames[] = {"F64",    "I64",      "I32",      "I16",     "I8",
                                       "U8",     "U16",      "U32",      "U64",     "BOOL",
                                       "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",     "F6_E2M3",
                                       "F6_E3M2", "C64"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char* n) { return s == n; });
}

TensorInfo parse_entry(const std::string& name, const JsonCursor& t, std::uint64_t data_bytes) {
  t.require_object();
  t.allow_only({"dtype", "shape", "data_offsets"});
  TensorInfo info;
  info.name = name;
  const JsonCursor dt = t.at("dtype");
  const std::string ds = dt.as_string();
  if (ds == "F32") {
    info.dtype = Dtype::F32;
  } else if (ds == "BF16") {
    info.dtype = Dtype::BF16;
  } else if (ds == "F16") {
    info.dtype = Dtype::F16;
  } else if (known_unsupported(ds)) {
    dt.fail_detail("unsupported dtype \"" + ds +
                   "\": ETH converts floating-point weights stored as F32, BF16 or F16 (quantized "
                   "and integer tensors are not converted)");
  } else {
    dt.fail("a safetensors dtype (F32, BF16 or F16)");
  }
  const std::uint64_t esize = dtype_bytes(info.dtype);
  const JsonCursor shape = t.at("shape");
  if (!shape.is_array() || shape.size() > kMaxDims) {
    shape.fail("an array of at most " + std::to_string(kMaxDims) + " dimensions");
  }
  std::uint64_t numel = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const auto d = static_cast<std::uint64_t>(shape[i].as_int(0, INT64_MAX / 8));
    // No tensor is larger than the data section: checked before multiplying, so no overflow.
    if (d != 0 && numel > data_bytes / esize / d) {
      shape.fail_detail("describes a tensor of more bytes than the file's data section (" +
                        std::to_string(data_bytes) + ")");
    }
    numel *= d;
    info.shape.push_back(static_cast<std::int64_t>(d));
  }
  const JsonCursor off = t.at("data_offsets");
  if (!off.is_array() || off.size() != 2) off.fail("[begin, end]");
  info.begin = static_cast<std::uint64_t>(off[0].as_int(0));
  info.end = static_cast<std::uint64_t>(off[1].as_int(0));
  if (info.end < info.begin) off.fail_detail("end is before begin");
  if (info.end > data_bytes) {
    off.fail_detail("ends at byte " + std::to_string(info.end) + " but the data section has " +
                    std::to_string(data_bytes) + " bytes (truncated file?)");
  }
  if (info.end - info.begin != numel * esize) {
    off.fail_detail("spans " + std::to_string(info.end - info.begin) + " bytes, but shape " +
                    json_brief(shape.value()) + " of " + ds + " needs " +
                    std::to_string(numel * esize));
  }
  return info;
}

}  // namespace

const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::F32: return "F32";
    case Dtype::BF16: return "BF16";
    case Dtype::F16: return "F16";
  }
  return "?";
}

std::size_t dtype_bytes(Dtype d) { return d == Dtype::F32 ? 4 : 2; }

bool parse_dtype(const std::string& s, Dtype* out) {
  if (s == "fp32" || s == "F32" || s == "float32") {
    *out = Dtype::F32;
  } else if (s == "bf16" || s == "BF16" || s == "bfloat16") {
    *out = Dtype::BF16;
  } else if (s == "fp16" || s == "F16" || s == "float16") {
    *out = Dtype::F16;
  } else {
    return false;
  }
  return true;
}

float f32_from_bf16(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

float f32_from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return std::bit_cast<float>(sign);
  // Subnormal: normalize (value = man * 2^-24).
  int e = -1;
  do {
    ++e;
    man <<= 1;
  } while ((man & 0x400u) == 0);
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(112 - e) << 23) |
                              ((man & 0x3FFu) << 13));
}

std::uint16_t bf16_from_f32(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  // Same exponent field as fp32, so one rounding rule covers subnormals too.
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

std::uint16_t f16_from_f32(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65536: inf
  if (a < 0x38800000u) {
    // fp16 subnormal (or zero): value / 2^-24 rounded to nearest even.
    if (a < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t man = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14 + (113 - exp)
    const std::uint32_t q = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    const std::uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | r);
  }
  // Normal: rebias and round the 13 dropped bits; a carry into the exponent is correct.
  const std::uint32_t v = a - (112u << 23);
  const std::uint32_t r = (v + 0xFFFu + ((v >> 13) & 1u)) >> 13;
  return static_cast<std::uint16_t>(sign | r);
}

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) bad(path, "", "no such safetensors file");
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) bad(path, "", "cannot read its size: " + ec.message());
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) bad(path, "", std::string("cannot open: ") + std::strerror(errno));
  if (size < 8) {
    bad(path, "", "truncated: " + std::to_string(size) +
                      " bytes, a safetensors file starts with an 8-byte header length");
  }
  std::uint64_t n = 0;
  pread_all(f.fd, &n, 8, 0, path, "");
  if (n > kMaxHeaderBytes || n > size - 8) {
    bad(path, "", "truncated or not a safetensors file: the header length field says " +
                      std::to_string(n) + " bytes, the file has " + std::to_string(size - 8) +
                      " after it");
  }
  std::string text(n, '\0');
  if (n > 0) pread_all(f.fd, text.data(), n, 8, path, "");
  data_start_ = 8 + n;
  const std::uint64_t data_bytes = size - data_start_;
  const Json j = parse_json_text(text, path.string(), "hf");
  const JsonCursor root(j, {"hf", path.string(), ""});
  root.require_object();
  for (const auto& [key, t] : root.members()) {
    if (key == "__metadata__") {
      t.require_object();
      for (const auto& [mk, mv] : t.members()) metadata_[mk] = mv.as_string();
      continue;
    }
    index_[key] = tensors_.size();
    tensors_.push_back(parse_entry(key, t, data_bytes));
  }
  // The spans must tile the data section: sorted by start, each begins where the last ended.
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t at = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo* t : order) {
    const std::string field = json_path_join(t->name, "data_offsets");
    if (t->begin < at) {
      bad(path, field,
          "overlaps tensor \"" + prev->name + "\" (bytes " + std::to_string(t->begin) + ".." +
              std::to_string(t->end) + " against " + std::to_string(prev->begin) + ".." +
              std::to_string(prev->end) + ")");
    }
    if (t->begin > at) {
      bad(path, field,
          "starts at byte " + std::to_string(t->begin) + ", leaving a hole after byte " +
              std::to_string(at) + " (the tensors must tile the data section)");
    }
    at = t->end;
    prev = t;
  }
  if (at != data_bytes) {
    bad(path, "",
        "trailing bytes: the tensors end at data byte " + std::to_string(at) +
            " but the data section has " + std::to_string(data_bytes));
  }
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::read_f32(const TensorInfo& t, float* out) const {
  Fd f{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) bad(path_, t.name, std::string("cannot open: ") + std::strerror(errno));
  const std::size_t n = static_cast<std::size_t>(t.numel());
  const std::uint64_t at = data_start_ + t.begin;
  if (t.dtype == Dtype::F32) {
    pread_all(f.fd, out, n * 4, at, path_, t.name);
    return;
  }
  std::vector<std::uint16_t> buf(std::min(n, kBounceElems));
  for (std::size_t i = 0; i < n; i += buf.size()) {
    const std::size_t k = std::min(buf.size(), n - i);
    pread_all(f.fd, buf.data(), k * 2, at + i * 2, path_, t.name);
    for (std::size_t j = 0; j < k; ++j) {
      out[i + j] = t.dtype == Dtype::BF16 ? f32_from_bf16(buf[j]) : f32_from_f16(buf[j]);
    }
  }
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void(std::size_t, std::span<float>)>& fill) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json md = Json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header["__metadata__"] = md;
  }
  std::uint64_t offset = 0;
  std::size_t largest = 0;
  for (const TensorOut& t : tensors) {
    std::size_t n = 1;
    for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
    largest = std::max(largest, n);
    const std::uint64_t bytes = n * dtype_bytes(t.dtype);
    header[t.name] = Json{{"dtype", dtype_name(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data 8-byte aligned, as safetensors writes it
  const std::uint64_t n = text.size();
  AtomicFile out(path, "hf");
  out.write(&n, 8);
  out.write(text.data(), text.size());
  std::vector<float> values(largest);
  std::vector<std::uint16_t> half;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorOut& t = tensors[i];
    std::size_t count = 1;
    for (std::int64_t d : t.shape) count *= static_cast<std::size_t>(d);
    std::span<float> v(values.data(), count);
    fill(i, v);
    if (t.dtype == Dtype::F32) {
      out.write(v.data(), count * 4);
      continue;
    }
    half.resize(count);
    for (std::size_t k = 0; k < count; ++k) {
      half[k] = t.dtype == Dtype::BF16 ? bf16_from_f32(v[k]) : f16_from_f32(v[k]);
      if (t.dtype == Dtype::F16 && (half[k] & 0x7C00u) == 0x7C00u &&
          (std::bit_cast<std::uint32_t>(v[k]) & 0x7F800000u) != 0x7F800000u) {
        throw InputError("hf", path.string(), t.name,
                         "value " + number_text(v[k]) +
                             " overflows fp16 (largest 65504); export as bf16 or fp32");
      }
    }
    out.write(half.data(), count * 2);
  }
  out.commit();
}

}  // namespace eth::hf
