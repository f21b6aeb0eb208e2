// Llama-family models for the trainer's tests, and moving a tensor-parallel rank's rows in and
// out of the whole model's parameter and gradient buffers. Test-only.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_spec.h"
#include "train/model_state.h"
#include "train/stage_compute.h"

namespace eth::test {

// Llama's architecture on small dimensions, none equal to another: 2 blocks, hidden 16, 4 query
// heads of 4 over `kv_heads` key/value heads (2: grouped-query, two query heads per group),
// T 8, vocabulary 32, SwiGLU inner size 24.
inline ModelSpec small_llama(std::int64_t kv_heads = 2) {
  ModelSpec m{"small-llama", 2, 16, 4, 8, 32, 24};
  m.norm = NormKind::RmsNorm;
  m.norm_eps = 1e-5;
  m.positions = PositionKind::Rope;
  m.rope_theta = 10000.0;
  m.mlp = MlpKind::Swiglu;
  m.kv_heads = kv_heads == m.heads ? 0 : kv_heads;
  m.bias = false;
  return m;
}

// The llama-tiny preset: 2 blocks, hidden 64, 4 query heads over 2 key/value heads, ffn 128,
// vocabulary 256, T 64.
inline ModelSpec llama_tiny() { return model_preset("llama-tiny"); }

inline StageComputeConfig whole_model(const ModelSpec& m, std::int64_t B, RecomputeSet rc = {},
                                      float dropout = 0, std::int64_t tp = 1,
                                      std::int64_t tp_rank = 0) {
  StageComputeConfig c;
  c.first_unit = 0;
  c.last_unit = m.num_units() - 1;
  c.max_micro_batch = B;
  c.seq_len = m.seq_len;
  c.recompute = rc;
  c.dropout = dropout;
  c.seed = 99;
  c.tp = tp;
  c.tp_rank = tp_rank;
  return c;
}

// Copies every tensor's rows between the whole model's buffer `w` (layout `whole`) and a tp
// rank's buffer `s` (layout `shard`, which holds rows t.rows of each tensor); to_shard: w -> s.
template <typename T>
void copy_rows(const ParamLayout& whole, const ParamLayout& shard, std::vector<T>& w,
               std::vector<T>& s, bool to_shard) {
  for (const UnitSlot& u : shard.units()) {
    const UnitSlot& wu = whole.unit(u.unit);
    for (std::size_t i = 0; i < u.tensors.size(); ++i) {
      const TensorSlot& t = u.tensors[i];
      const auto a = static_cast<std::size_t>(t.offset);
      const auto b = static_cast<std::size_t>(wu.tensors[i].offset + t.rows.begin * t.row_size());
      for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
        const auto kk = static_cast<std::size_t>(k);
        if (to_shard) {
          s[a + kk] = w[b + kk];
        } else {
          w[b + kk] = s[a + kk];
        }
      }
    }
  }
}

// Writes a rank's gradient `g` into the whole model's `got`: its rows of sharded tensors, and
// the replicated tensors when `replicated` (one rank's copy: every rank holds the same).
template <typename T>
void gather_grads(const ParamLayout& whole, const ParamLayout& shard, const std::vector<T>& g,
                  std::vector<T>& got, bool replicated) {
  for (const UnitSlot& u : shard.units()) {
    const UnitSlot& wu = whole.unit(u.unit);
    for (std::size_t i = 0; i < u.tensors.size(); ++i) {
      const TensorSlot& t = u.tensors[i];
      if (t.desc.split == TpSplit::Replicated && !replicated) continue;
      const auto a = static_cast<std::size_t>(t.offset);
      const auto b = static_cast<std::size_t>(wu.tensors[i].offset + t.rows.begin * t.row_size());
      for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
        got[b + static_cast<std::size_t>(k)] = g[a + static_cast<std::size_t>(k)];
      }
    }
  }
}

}  // namespace eth::test
