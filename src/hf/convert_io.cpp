// The family-independent steps of `eth convert`. See convert_io.h.
#include "hf/convert_io.h"

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "model/arithmetic.h"

namespace eth::hf {

namespace {
constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
}  // namespace

void check_import_output(const std::filesystem::path& out, bool overwrite) {
  std::error_code ec;
  if (!out.has_parent_path() || std::filesystem::exists(out.parent_path(), ec)) {
    check_output_file(out, "convert");
  }
  if (!overwrite && std::filesystem::exists(out, ec)) {
    throw InputError("convert", out.string(), "", "exists; pass --force to overwrite it");
  }
}

ConvertReport write_hf_import(const std::filesystem::path& out, const ModelState& state,
                              const Json& hf_config, const std::string& dtype, bool tied,
                              std::size_t tensors, std::vector<std::filesystem::path> inputs) {
  const ModelSpec& m = state.model();
  CheckpointMeta meta;
  meta.model = m;
  meta.step = 0;
  meta.schedule = Json::object();
  meta.data = Json::object();
  meta.run = Json{{"hf", {{"config", hf_config}, {"dtype", dtype}}}};
  write_checkpoint(out, state, meta);
  ConvertReport r;
  r.model = m;
  r.tied = tied;
  r.dtype = dtype.empty() ? "mixed" : dtype;
  r.tensors = static_cast<std::int64_t>(tensors);
  r.params = total_params(m);
  r.inputs = std::move(inputs);
  r.outputs = {out};
  return r;
}

HfExportChoice choose_hf_export(const CheckpointMeta& meta, const std::string& dtype_arg,
                                const std::function<bool(const Json&)>& usable_base) {
  HfExportChoice c;
  std::string recorded;
  if (meta.run->is_object() && meta.run->contains("hf") && (*meta.run)["hf"].is_object()) {
    const Json& h = (*meta.run)["hf"];
    if (h.contains("config") && usable_base(h["config"])) c.base = h["config"];
    if (h.contains("dtype") && h["dtype"].is_string()) recorded = h["dtype"].get<std::string>();
  }
  if (dtype_arg == "auto") {
    if (!recorded.empty()) parse_dtype(recorded, &c.dtype);
  } else if (!parse_dtype(dtype_arg, &c.dtype)) {
    throw InputError("convert", "--dtype", "", "expected auto, fp32, bf16 or fp16, got " +
                                                   message_text(dtype_arg, 32));
  }
  return c;
}

void check_export_dir(const std::filesystem::path& dir, bool overwrite) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    throw InputError("convert", dir.string(), "", "exists and is not a folder");
  }
  for (const char* f : {kConfig, kWeights, kIndex}) {
    const auto p = dir / f;
    if (std::filesystem::exists(p, ec) && (!overwrite || std::string(f) == kIndex)) {
      throw InputError("convert", p.string(), "",
                       std::string(f) == kIndex
                           ? "a sharded index is in the way (loaders would read it instead of "
                             "the new model.safetensors); remove it"
                           : "exists; pass --force to overwrite it");
    }
  }
}

const char* torch_dtype_name(Dtype d) {
  return d == Dtype::F32 ? "float32" : d == Dtype::BF16 ? "bfloat16" : "float16";
}

ConvertReport write_hf_export(const std::filesystem::path& checkpoint,
                              const std::filesystem::path& dir, const ModelSpec& model, bool tied,
                              Dtype dtype, const std::vector<TensorOut>& outs, const Json& config,
                              const std::function<void(std::size_t, std::span<float>)>& fill) {
  prepare_output_dir(dir, "convert");
  write_safetensors(dir / kWeights, outs, {{"format", "pt"}}, fill);
  write_file_atomic(dir / kConfig, config.dump(2) + "\n", "convert");
  ConvertReport r;
  r.model = model;
  r.tied = tied;
  r.dtype = dtype_name(dtype);
  r.tensors = static_cast<std::int64_t>(outs.size());
  r.params = total_params(model);
  r.inputs = {checkpoint};
  r.outputs = {dir / kConfig, dir / kWeights};
  return r;
}

}  // namespace eth::hf
