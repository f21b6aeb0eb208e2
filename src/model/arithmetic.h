// Pure arithmetic on a ModelSpec: the parameter table of every unit (shared by the memory model
// and the runtime's buffer layout), FLOPs per unit, and activation bytes per operator class.
// Units are defined in model/model_spec.h. No device speeds here: see profile/.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "model/recompute.h"

namespace eth {

enum class UnitKind : std::uint8_t { Embedding, Block, Head };
UnitKind unit_kind(const ModelSpec& m, std::int64_t unit);

// How tensor parallelism splits a tensor: not at all (every tp rank holds all of it, e.g. layer
// norms and the biases after a row-parallel matmul), or along its first dimension into tp
// contiguous row ranges (tp_rows).
enum class TpSplit : std::uint8_t { Replicated, Sharded };

// Rows [begin, end) of a sharded tensor of `rows` rows that tp rank `rank` of `tp` holds:
// [rank*rows/tp, (rank+1)*rows/tp), floor division. Heads and ffn divide by tp (plan
// validation), so block tensors split evenly and head-aligned; the vocabulary need not, so
// the embedding and LM head shards of two ranks may differ by one row.
struct RowRange {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const RowRange&) const = default;
};
RowRange tp_rows(std::int64_t rows, std::int64_t tp, std::int64_t rank);

struct TensorDesc {
  std::string name;                 // e.g. "qkv_w"
  std::vector<std::int64_t> shape;  // row-major; shape[0] is split under TpSplit::Sharded
  TpSplit split = TpSplit::Replicated;
  std::int64_t numel() const;
};

// Rows of a block's fused q/k/v projection: C query rows and kv_dim rows each for K and V.
std::int64_t qkv_rows(const ModelSpec& m);
// Outputs of the MLP's input projections per token: ffn (GELU's fc), 2 ffn (SwiGLU's gate, up).
std::int64_t mlp_up_rows(const ModelSpec& m);

// The tensors of one unit, in the order the runtime lays them out (one contiguous buffer per
// unit, tensors back to back, so a range of units is one contiguous range of parameters).
std::vector<TensorDesc> unit_tensors(const ModelSpec& m, std::int64_t unit);
// Parameters of one unit held by the largest tp rank: sharded tensors contribute ceil(rows/tp)
// rows (the most any rank holds; exactly rows/tp when tp divides them), replicated ones whole.
// What the memory model charges a device, and what the runtime allocates on that rank.
std::int64_t unit_params(const ModelSpec& m, std::int64_t unit, std::int64_t tp = 1);
// Every parameter once (a tied embedding, held by the first and the last unit, counted once).
std::int64_t total_params(const ModelSpec& m);

// Forward FLOPs of one unit for `tokens` tokens at sequence length `seq` (matmuls count 2 per
// multiply-add; attention's QK^T and score x V count in full, not halved for the causal mask,
// the usual "model FLOPs" convention). Backward is 2x forward.
double unit_forward_flops(const ModelSpec& m, std::int64_t unit, std::int64_t batch,
                          std::int64_t seq);
double model_forward_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq);

// Activation bytes held between forward and backward by one unit for one micro-batch, per
// operator class, in 16-bit training with tensor parallelism `tp` (Korthikanti et al.'s
// per-layer formula s*b*h*(10 + 24/t + 5*a*s/(h*t)), which is s*b*h*(34 + 5*a*s/h) at t = 1;
// the head's vocabulary-parallel logits count the largest rank's ceil(V/t) columns).
struct ActivationBytes {
  // Indexed by RecomputeOp for the five operator classes; `other` is what no class covers.
  std::array<double, kNumRecomputeOps - 1> op{};
  double other = 0;
  double unit_input = 0;  // kept even under full-unit recompute
  double total() const;
  // Bytes still held when the ops in `rc` are recomputed.
  double held(const RecomputeSet& rc) const;
};
ActivationBytes activation_bytes_16bit(const ModelSpec& m, std::int64_t unit, std::int64_t mbs,
                                       std::int64_t seq, std::int64_t tp);

}  // namespace eth
