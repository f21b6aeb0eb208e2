// Hugging Face safetensors files, read and written a tensor at a time: a single file or a
// sharded folder (`model.safetensors.index.json` naming each tensor's shard). The reader checks
// the whole header before any tensor is read: dtype known and unquantized (F32, BF16, F16),
// shape x element size equal to the span of data_offsets, spans in range, non-overlapping and
// covering the data section exactly (no holes, no trailing bytes), the file's length. A tensor
// is then read straight from the file into the caller's fp32 buffer through a small bounce
// buffer, so a file is never held in memory. The writer lays out a header from the tensors'
// names, dtypes and shapes, then takes each tensor's fp32 values in order and stores them in its
// dtype, through a temporary file and a rename. Not ETH's checkpoint format (train/checkpoint.h),
// which adds checksums and metadata on the same layout.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace eth::hf {

enum class Dtype : std::uint8_t { F32, BF16, F16 };
const char* dtype_name(Dtype d);  // "F32", "BF16", "F16" (the safetensors spelling)
std::size_t dtype_bytes(Dtype d);
// "fp32"/"F32"/"float32", "bf16"/"BF16"/"bfloat16", "fp16"/"F16"/"float16"; false otherwise.
bool parse_dtype(const std::string& s, Dtype* out);

// Element conversions. Import is exact for every value (bf16 and fp16 widen to fp32). Export
// rounds to nearest, ties to even, and keeps subnormals (a bf16 or fp16 value read and written
// back is the same bits); fp16 overflow saturates to infinity, which the writer refuses.
float f32_from_bf16(std::uint16_t b);
float f32_from_f16(std::uint16_t h);
std::uint16_t bf16_from_f32(float f);
std::uint16_t f16_from_f32(float f);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets in the data section
  std::int64_t numel() const;
};

// One safetensors file, its header checked. Throws InputError("hf", path, field, ...) naming
// the tensor's JSON path (e.g. "transformer.wte.weight.data_offsets") for every problem above.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);
  const std::filesystem::path& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in file order
  const TensorInfo* find(const std::string& name) const;               // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Reads tensor `t` (one of tensors()) converted to fp32 into out (t.numel() floats).
  void read_f32(const TensorInfo& t, float* out) const;

 private:
  std::filesystem::path path_;
  std::uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A model's weights: `dir`/model.safetensors, or the shards `dir`/model.safetensors.index.json
// names. Every shard's header is checked on opening; a tensor named in two shards, a shard
// holding a tensor the index does not map to it, a shard file name with a folder in it, or an
// index naming a tensor its shard lacks are refused by name.
class SafetensorsModel {
 public:
  explicit SafetensorsModel(const std::filesystem::path& dir);
  bool sharded() const { return sharded_; }
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // Null when absent.
  const TensorInfo* find(const std::string& name) const;
  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  void read_f32(const std::string& name, float* out) const;  // the tensor must exist
  // The file a tensor lives in (for messages).
  const std::filesystem::path& file_of(const std::string& name) const;

 private:
  struct Where {
    std::size_t shard = 0;
    const TensorInfo* info = nullptr;
  };
  bool sharded_ = false;
  std::vector<std::filesystem::path> files_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, Where> where_;
};

// What the writer stores, in file order.
struct TensorOut {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<std::int64_t> shape;
};

// Writes `path` through a temporary sibling and rename: the header of `tensors` (and
// `metadata` as "__metadata__"), then for each tensor in order `fill(i, values)` is called to
// put its numel() fp32 values in `values`, which are converted to the tensor's dtype and written.
// A value that overflows fp16 is refused (InputError naming the tensor).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorOut>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void(std::size_t, std::span<float>)>& fill);

}  // namespace eth::hf
