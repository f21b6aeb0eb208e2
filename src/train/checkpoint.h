// Checkpoints in the safetensors layout: 8-byte little-endian header length, a JSON header
// (per tensor: dtype, shape, data_offsets; plus "__metadata__" of strings), then raw
// little-endian fp32 data. Tensors are named per unit ("unit3.qkv_w", "unit3.qkv_w.adam_m",
// "unit3.qkv_w.adam_v"), so a file does not depend on the plan that wrote it and any stage can
// load just its units. Written atomically; every tensor carries a checksum, so a corrupt or
// truncated file is refused by name. Not a general safetensors library (fp32 only).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/json_value.h"
#include "model/model_spec.h"
#include "train/model_state.h"

namespace eth {

struct CheckpointMeta {
  ModelSpec model;
  std::int64_t step = 0;  // optimizer steps completed; training resumes at this step
  JsonValue schedule;     // learning-rate schedule and optimizer settings
  JsonValue data;         // data position: file, sampler settings, next global sample
  JsonValue run;          // anything else a resume must agree with (seed, dropout, ...)
};

// Writes the units `state` holds (parameters and AdamW moments, whole tensors: tp 1) and `meta`
// to `path`, through a temporary sibling and rename(2). The distributed trainer gathers tp
// shards into a whole state first, so files never depend on the plan.
void write_checkpoint(const std::filesystem::path& path, const ModelState& state,
                      const CheckpointMeta& meta);

// Reads the header and metadata only; throws InputError("checkpoint", path, ...) for a file that
// is not an ETH checkpoint or is damaged (bad header, offsets, or length).
CheckpointMeta read_checkpoint_meta(const std::filesystem::path& path);

// Loads every unit of `state` from `path` (parameters and AdamW moments), checking each
// tensor's shape and checksum; a tp-sharded state takes its rows of each whole tensor. Throws
// InputError naming the file and the tensor on a missing tensor, a shape mismatch or a
// checksum mismatch. A bf16 state's compute copy is refreshed from the loaded fp32 parameters,
// so either precision resumes a checkpoint of either. Returns the metadata.
CheckpointMeta load_checkpoint(const std::filesystem::path& path, ModelState& state);

// "<dir>/step_00000123.safetensors"
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, std::int64_t step);
// The step of a file named as checkpoint_path names them ("step_<digits>.safetensors"); nullopt
// for any other name (AtomicFile's temporaries start with '.').
std::optional<std::int64_t> checkpoint_step(const std::filesystem::path& file);
// The checkpoint with the highest step in `dir`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// The checksum stored per tensor: a 64-bit multiply-xor hash over the bytes.
std::uint64_t checkpoint_hash(const void* data, std::size_t bytes);

}  // namespace eth
