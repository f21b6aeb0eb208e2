// The family dispatch of `eth convert`. See convert.h.
#include "hf/convert.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf/llama_convert.h"
#include "train/checkpoint.h"

namespace eth::hf {

ConvertReport convert_any_from_hf(const std::filesystem::path& dir,
                                  const std::filesystem::path& out, bool overwrite) {
  const std::filesystem::path config = dir / "config.json";
  std::error_code ec;
  // A missing folder or config.json: the GPT-2 reader's refusal names it.
  if (std::filesystem::is_regular_file(config, ec)) {
    const Json j = read_json_file(config, "hf");
    if (j.is_object() && j.contains("model_type") && j["model_type"].is_string()) {
      const std::string type = j["model_type"].get<std::string>();
      if (type == "llama") return convert_llama_from_hf(dir, out, overwrite);
      if (type != "gpt2") {
        JsonCursor(j, {"hf", config.string(), ""})
            .at("model_type")
            .fail_detail("unsupported model_type \"" + message_text(type, 64) +
                         "\": ETH converts \"gpt2\" (GPT2LMHeadModel) and \"llama\" "
                         "(LlamaForCausalLM)");
      }
    }
  }
  return convert_from_hf(dir, out, overwrite);
}

ConvertReport convert_any_to_hf(const std::filesystem::path& checkpoint,
                                const std::filesystem::path& dir, const std::string& dtype,
                                bool overwrite) {
  const ModelSpec m = read_checkpoint_meta(checkpoint).model;
  if (is_llama_family(m)) return convert_llama_to_hf(checkpoint, dir, dtype, overwrite);
  // GPT2LMHeadModel computes exactly GPT's blocks with multi-head attention and layer norms of
  // epsilon 1e-5; a mix of the two families has no Hugging Face class to go to.
  const ModelSpec gpt;
  if (m.norm == gpt.norm && m.positions == gpt.positions && m.mlp == gpt.mlp && m.bias &&
      m.kv_heads == 0 && m.norm_eps == gpt.norm_eps) {
    return convert_to_hf(checkpoint, dir, dtype, overwrite);
  }
  throw InputError("convert", checkpoint.string(), "model",
                   "neither GPT-2's architecture (layer norm of epsilon 1e-5, learned positions, "
                   "GELU, biases, multi-head attention) nor Llama's (RMSNorm, rotary positions, "
                   "SwiGLU, no biases): no Hugging Face model to export it as");
}

}  // namespace eth::hf
