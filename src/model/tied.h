// Tied input/output embeddings (ModelSpec::tied_embeddings): which tensors are the two copies of
// the one matrix. Unit 0's wte and the head's lm_head_w are both vocabulary-sharded the same way
// (tp_rows), so a tp rank's rows of one are its rows of the other. Pure, header-only.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_spec.h"

namespace eth {

// Whether tensor `name` of `unit` is one of the two copies of a tied model's embedding matrix.
inline bool is_tied_tensor(const ModelSpec& m, std::int64_t unit, const std::string& name) {
  if (!m.tied_embeddings) return false;
  return (unit == 0 && name == "wte") || (unit == m.layers + 1 && name == "lm_head_w");
}

}  // namespace eth
