// The check every Hugging Face importer makes of a model folder's tensors against the ones its
// config.json implies, before anything is read or written: each expected tensor stored with its
// shape, nothing stored beyond them but the buffers the family recomputes (and a head the tie
// makes redundant), each refusal naming the file and the tensor.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "hf/safetensors.h"

namespace eth::hf {

// "[2, 3]": a shape as the refusals print it.
inline std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Tensor: any type with hf_name and hf_shape (Gpt2Tensor, LlamaTensor). `recomputed(name)` is
// true for the buffers the family's files may carry beside the weights; `tied`: a stored
// lm_head.weight is ignored (transformers uses the embedding, and so does ETH). Returns the
// dtype every expected tensor shares, or "" when they mix dtypes.
template <class Tensor, class Recomputed>
std::string check_hf_tensors(const SafetensorsModel& w, const std::vector<Tensor>& tensors,
                             bool tied, Recomputed recomputed, const std::string& architecture) {
  std::set<std::string> wanted;
  std::set<std::string> dtypes;
  for (const Tensor& t : tensors) {
    wanted.insert(t.hf_name);
    const TensorInfo* info = w.find(t.hf_name);
    if (!info) {
      throw InputError("hf", w.files().front().string(), t.hf_name,
                       "missing tensor (of shape " + shape_text(t.hf_shape) + ")" +
                           (t.hf_name == "lm_head.weight"
                                ? "; config.json says tie_word_embeddings false"
                                : ""));
    }
    if (info->shape != t.hf_shape) {
      throw InputError("hf", w.file_of(t.hf_name).string(), t.hf_name + ".shape",
                       "expected " + shape_text(t.hf_shape) + " from config.json, got " +
                           shape_text(info->shape));
    }
    dtypes.insert(dtype_name(info->dtype));
  }
  for (const std::string& name : w.names()) {
    if (wanted.count(name) || recomputed(name)) continue;
    if (name == "lm_head.weight" && tied) continue;
    throw InputError("hf", w.file_of(name).string(), name,
                     "unexpected tensor: not part of " + architecture + " with this config.json");
  }
  return dtypes.size() == 1 ? *dtypes.begin() : "";
}

}  // namespace eth::hf
