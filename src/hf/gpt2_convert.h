// GPT2LMHeadModel folders <-> ETH checkpoints: the tensor mapping both ways, and the two
// conversions `eth convert` runs.
//
// The mapping (C hidden, F ffn, hs head size; HF Conv1D weights are stored (in, out)):
//   transformer.wte.weight (V,C)          -> unit0.wte (V,C)
//   transformer.wpe.weight (T,C)          -> unit0.wpe (T,C)
//   transformer.h.l.ln_1.{weight,bias}    -> unit(l+1).ln1_{w,b}          (ln_2 -> ln2_*)
//   transformer.h.l.attn.c_attn.weight (C,3C), columns [q; k; v]
//                                         -> qkv_w (3C,C), transposed, rows head-interleaved:
//                                            row h*3hs + p*hs + d = column p*C + h*hs + d
//   transformer.h.l.attn.c_attn.bias (3C) -> qkv_b, the same permutation
//   transformer.h.l.attn.c_proj.weight (C,C) -> proj_w (C,C), as is (both (in, out))
//   transformer.h.l.mlp.c_fc.weight (C,F) -> fc_w (F,C), transposed
//   transformer.h.l.mlp.c_proj.weight (F,C) -> fcproj_w (F,C), as is; biases as is
//   transformer.ln_f.{weight,bias}        -> unit(L+1).lnf_{w,b}
//   lm_head.weight (V,C), or wte when tied -> unit(L+1).lm_head_w (ETH's head owns its copy)
// Every permutation is a bijection on the values, so import then export returns the same bits.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "hf/gpt2_config.h"
#include "hf/safetensors.h"
#include "train/checkpoint.h"
#include "train/model_state.h"

namespace eth::hf {

// One HF tensor and where its values go in ETH.
struct Gpt2Tensor {
  enum class Map : std::uint8_t { Copy, Transpose, Qkv };
  std::string hf_name;
  std::vector<std::int64_t> hf_shape;
  std::int64_t unit = 0;
  int tensor = 0;  // index in unit_tensors(unit)
  Map map = Map::Copy;
};

// The HF tensors of `model` in save order (lm_head.weight last, only when `tied` is false),
// names with `prefix` ("transformer.") on all but lm_head.
std::vector<Gpt2Tensor> gpt2_tensors(const ModelSpec& model, bool tied,
                                     const std::string& prefix = "transformer.");

// HF values (t.hf_shape) -> ETH values (the unit tensor's shape), and back.
void gpt2_to_eth(const ModelSpec& model, const Gpt2Tensor& t, const float* hf, float* eth);
void eth_to_gpt2(const ModelSpec& model, const Gpt2Tensor& t, const float* eth, float* hf);

// A checked HF folder: config, weights, and the tensor list, ready to load. Every problem
// (config fields, a missing, misshapen or unexpected tensor) is refused here, before any
// output is touched.
struct Gpt2Source {
  std::filesystem::path dir;
  Gpt2Config config;
  std::unique_ptr<SafetensorsModel> weights;
  std::vector<Gpt2Tensor> tensors;  // as the files name them (the "transformer." prefix or not)
  std::string dtype;                // "F32", "BF16" or "F16" when all tensors share one, else ""
};
Gpt2Source open_gpt2(const std::filesystem::path& dir);

// Reads every tensor into `state` (all units, tp 1, fp32 or bf16; its model must be
// src.config.model), a tensor at a time; zeroes the AdamW moments; refreshes the compute copy.
void load_gpt2(const Gpt2Source& src, ModelState& state);

struct ConvertReport {
  ModelSpec model;
  bool tied = true;
  std::string dtype;
  std::int64_t tensors = 0;
  std::int64_t params = 0;
  std::vector<std::filesystem::path> inputs, outputs;
};

// `eth convert --from-hf DIR --out CKPT`: a checkpoint at step 0 with zero moments whose
// metadata "run" records {"hf": {"config": <config.json>, "dtype": ...}} for the way back.
// Refuses an existing `out` unless `overwrite`.
ConvertReport convert_from_hf(const std::filesystem::path& dir, const std::filesystem::path& out,
                              bool overwrite);
// `eth convert --to-hf --checkpoint CKPT --out DIR`: DIR/config.json and DIR/model.safetensors
// in `dtype` ("auto": the dtype recorded at import, else F32). The LM head is written tied (no
// lm_head.weight, tie_word_embeddings true) when it equals wte bit for bit, else untied.
// Refuses existing files in DIR unless `overwrite`; DIR is created when missing.
ConvertReport convert_to_hf(const std::filesystem::path& checkpoint,
                            const std::filesystem::path& dir, const std::string& dtype,
                            bool overwrite);

}  // namespace eth::hf
