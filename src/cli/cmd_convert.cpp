// `eth convert`: a Hugging Face GPT-2 or Llama folder (config.json + model.safetensors or a
// sharded index) to an ETH checkpoint, and an ETH checkpoint back to such a folder. The model
// description comes from config.json; what ETH cannot compute exactly is refused before any
// file is written (docs/convert.md).
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "hf/convert.h"
#include "hf/llama_config.h"

namespace eth::cli {

namespace {

struct ConvertArgs {
  std::string from_hf;
  bool to_hf = false;
  std::string checkpoint;
  std::string out;
  std::string dtype = "auto";
  bool force = false;
  Format format = Format::Text;
};

Json paths_json(const std::vector<std::filesystem::path>& ps) {
  Json j = Json::array();
  for (const auto& p : ps) j.push_back(p.string());
  return j;
}

int report(const ConvertArgs& a, const hf::ConvertReport& r) {
  if (a.format == Format::Json) {
    print_json(Json{{"direction", a.to_hf ? "to-hf" : "from-hf"},
                    {"family", hf::is_llama_family(r.model) ? "llama" : "gpt2"},
                    {"model", model_to_json(r.model)},
                    {"tied_embeddings", r.tied},
                    {"dtype", r.dtype},
                    {"tensors", r.tensors},
                    {"params", r.params},
                    {"inputs", paths_json(r.inputs)},
                    {"outputs", paths_json(r.outputs)}});
    return kExitOk;
  }
  const bool llama = hf::is_llama_family(r.model);
  std::cout << (a.to_hf ? "exported " : "imported ") << (llama ? "Llama: " : "GPT-2: ")
            << r.model.layers << " layers, hidden " << r.model.hidden << ", " << r.model.heads
            << " heads";
  if (llama) std::cout << " (" << r.model.num_kv_heads() << " key/value)";
  std::cout << ", ffn "
            << r.model.ffn << ", vocab " << r.model.vocab << ", " << r.model.seq_len
            << " positions, " << r.params << " parameters (the LM head counted apart), "
            << r.tensors << " tensors (" << r.dtype << ", "
            << (r.tied ? "tied" : "untied") << " LM head)\n";
  for (const auto& p : r.outputs) std::cout << "wrote " << p.string() << "\n";
  return kExitOk;
}

}  // namespace

void add_convert_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "convert",
      "Convert a Hugging Face GPT-2 or Llama folder to an ETH checkpoint (--from-hf DIR --out "
      "CKPT) or back (--to-hf --checkpoint CKPT --out DIR); the model comes from config.json");
  auto a = std::make_shared<ConvertArgs>();
  auto* from = sub->add_option("--from-hf", a->from_hf,
                               "Hugging Face model folder: config.json (GPT2LMHeadModel or "
                               "LlamaForCausalLM) and "
                               "model.safetensors or model.safetensors.index.json + shards "
                               "(F32, BF16 or F16)");
  auto* to = sub->add_flag("--to-hf", a->to_hf,
                           "Export --checkpoint as a Hugging Face folder (config.json, "
                           "model.safetensors) that transformers loads");
  auto* ckpt = sub->add_option("--checkpoint", a->checkpoint, "ETH checkpoint to export (--to-hf)");
  sub->add_option("--out", a->out,
                  "Output: the checkpoint file (--from-hf) or the folder, created when missing "
                  "(--to-hf); written through a temporary file and a rename")
      ->required();
  sub->add_option("--dtype", a->dtype,
                  "--to-hf tensor dtype: auto (the dtype the checkpoint was imported from, "
                  "else fp32), fp32, bf16 or fp16")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "fp16"}))
      ->capture_default_str();
  sub->add_flag("--force", a->force, "Overwrite existing output files");
  add_format_option(sub, &a->format);
  from->excludes(to);
  from->excludes(ckpt);
  r.on(sub, [a] {
    if (a->to_hf) {
      if (a->checkpoint.empty()) throw UsageError("--checkpoint", "--to-hf needs a checkpoint");
      return report(*a, hf::convert_any_to_hf(a->checkpoint, a->out, a->dtype, a->force));
    }
    if (a->from_hf.empty()) throw UsageError("--from-hf", "give --from-hf DIR or --to-hf");
    if (a->dtype != "auto") throw UsageError("--dtype", "applies to --to-hf only");
    return report(*a, hf::convert_any_from_hf(a->from_hf, a->out, a->force));
  });
}

}  // namespace eth::cli
