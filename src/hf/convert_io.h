// What `eth convert` does the same for every family (hf/gpt2_convert.h, hf/llama_convert.h):
// the refusals of an output before any work, the checkpoint an import writes and what it records
// for the way back, the dtype and base config an export takes from that record, and the folder
// an export writes. The families differ only in their tensors and their config.json.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/json_cursor.h"
#include "hf/gpt2_convert.h"  // ConvertReport
#include "hf/safetensors.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth::hf {

// Import: refuses `out` (a checkpoint path) when its folder exists and cannot take the file, or
// when it exists and `overwrite` is false. A missing folder is left to the checkpoint writer,
// which creates it after every check has passed.
void check_import_output(const std::filesystem::path& out, bool overwrite);

// Import: writes `state` to `out` as a checkpoint at step 0 whose metadata "run" records
// {"hf": {"config": hf_config, "dtype": dtype}} for the way back; the report of the conversion
// (`tensors` read from `inputs`; dtype "" reported as "mixed").
ConvertReport write_hf_import(const std::filesystem::path& out, const ModelState& state,
                              const Json& hf_config, const std::string& dtype, bool tied,
                              std::size_t tensors, std::vector<std::filesystem::path> inputs);

// Export: the dtype to write ("auto": the one recorded at import, else F32; another word is
// refused naming --dtype) and the config.json recorded at import when `usable_base` accepts it
// (else null).
struct HfExportChoice {
  Dtype dtype = Dtype::F32;
  Json base;
};
HfExportChoice choose_hf_export(const CheckpointMeta& meta, const std::string& dtype_arg,
                                const std::function<bool(const Json&)>& usable_base);

// Export: refuses `dir` when it is something other than a folder, or holds config.json or
// model.safetensors and `overwrite` is false, or holds a sharded index at all.
void check_export_dir(const std::filesystem::path& dir, bool overwrite);

// "float32", "bfloat16", "float16": config.json's torch_dtype of `d`.
const char* torch_dtype_name(Dtype d);

// Export: creates `dir` and writes DIR/model.safetensors (`outs`, each tensor's values from
// `fill`) and DIR/config.json (`config`), each by temp file and rename; the report.
ConvertReport write_hf_export(const std::filesystem::path& checkpoint,
                              const std::filesystem::path& dir, const ModelSpec& model, bool tied,
                              Dtype dtype, const std::vector<TensorOut>& outs, const Json& config,
                              const std::function<void(std::size_t, std::span<float>)>& fill);

}  // namespace eth::hf
