#include "model/arithmetic.h"

#include "core/error.h"

namespace eth {

UnitKind unit_kind(const ModelSpec& m, std::int64_t unit) {
  ETH_CHECK(unit >= 0 && unit < m.num_units(), "unit out of range");
  if (unit == 0) return UnitKind::Embedding;
  if (unit == m.layers + 1) return UnitKind::Head;
  return UnitKind::Block;
}

std::int64_t TensorDesc::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<TensorDesc> unit_tensors(const ModelSpec& m, std::int64_t unit) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, T = m.seq_len;
  const auto R = TpSplit::Replicated;
  const auto S = TpSplit::Sharded;
  switch (unit_kind(m, unit)) {
    case UnitKind::Embedding:
      return {{"wte", {V, C}, S}, {"wpe", {T, C}, R}};
    case UnitKind::Head:
      return {{"lnf_w", {C}, R}, {"lnf_b", {C}, R}, {"lm_head_w", {V, C}, S}};
    case UnitKind::Block:
      break;
  }
  // Megatron's split: qkv and fc are column-parallel (output rows sharded), proj and fcproj are
  // row-parallel (stored transposed here, so the split is again along the first dimension);
  // their biases are added after the all-reduce and so are replicated.
  return {{"ln1_w", {C}, R},       {"ln1_b", {C}, R},     {"qkv_w", {3 * C, C}, S},
          {"qkv_b", {3 * C}, S},   {"proj_w", {C, C}, S}, {"proj_b", {C}, R},
          {"ln2_w", {C}, R},       {"ln2_b", {C}, R},     {"fc_w", {F, C}, S},
          {"fc_b", {F}, S},        {"fcproj_w", {F, C}, S}, {"fcproj_b", {C}, R}};
}

RowRange tp_rows(std::int64_t rows, std::int64_t tp, std::int64_t rank) {
  ETH_CHECK(tp >= 1 && rank >= 0 && rank < tp, "tp rank out of range");
  return {rank * rows / tp, (rank + 1) * rows / tp};
}

std::int64_t unit_params(const ModelSpec& m, std::int64_t unit, std::int64_t tp) {
  ETH_CHECK(tp >= 1, "tp must be positive");
  std::int64_t n = 0;
  for (const auto& t : unit_tensors(m, unit)) {
    if (t.split == TpSplit::Replicated) {
      n += t.numel();
      continue;
    }
    const std::int64_t rows = t.shape.front();
    n += (rows + tp - 1) / tp * (t.numel() / rows);
  }
  return n;
}

std::int64_t total_params(const ModelSpec& m) {
  std::int64_t n = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) n += unit_params(m, u);
  return n;
}

double unit_forward_flops(const ModelSpec& m, std::int64_t unit, std::int64_t batch,
                          std::int64_t seq) {
  const double C = static_cast<double>(m.hidden), F = static_cast<double>(m.ffn);
  const double V = static_cast<double>(m.vocab), T = static_cast<double>(seq);
  const double tokens = static_cast<double>(batch) * T;
  switch (unit_kind(m, unit)) {
    case UnitKind::Embedding:
      return 0.0;  // a table lookup and an add: no matmul work
    case UnitKind::Head:
      return 2.0 * tokens * C * V;
    case UnitKind::Block:
      break;
  }
  // qkv (3C x C) + proj (C x C) + fc (F x C) + fcproj (C x F), 2 FLOPs per multiply-add,
  // plus QK^T and score x V: each 2 * T * C per token.
  return 2.0 * tokens * (4.0 * C * C + 2.0 * C * F) + 4.0 * tokens * T * C;
}

double model_forward_flops(const ModelSpec& m, std::int64_t batch, std::int64_t seq) {
  double f = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) f += unit_forward_flops(m, u, batch, seq);
  return f;
}

double ActivationBytes::total() const {
  double t = other;
  for (double b : op) t += b;
  return t;
}

double ActivationBytes::held(const RecomputeSet& rc) const {
  if (rc.full_unit()) return unit_input;
  double t = other;
  for (int i = 0; i < kNumRecomputeOps - 1; ++i) {
    if (!rc.has(static_cast<RecomputeOp>(i))) t += op[static_cast<std::size_t>(i)];
  }
  return t;
}

ActivationBytes activation_bytes_16bit(const ModelSpec& m, std::int64_t unit, std::int64_t mbs,
                                       std::int64_t seq, std::int64_t tp) {
  const double s = static_cast<double>(seq), b = static_cast<double>(mbs);
  const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
  const double t = static_cast<double>(tp);
  // The largest rank's vocabulary shard (floor-division row ranges, model/arithmetic.h).
  const double V_shard = static_cast<double>((m.vocab + tp - 1) / tp);
  const double sbh = s * b * h;
  ActivationBytes out;
  switch (unit_kind(m, unit)) {
    case UnitKind::Embedding:
      // int32 token ids and the 1-byte embedding dropout mask.
      out.other = 4.0 * s * b + sbh;
      out.unit_input = 4.0 * s * b;
      return out;
    case UnitKind::Head:
      // Final norm input and output (2 + 2), 16-bit logits and their fp32 softmax (2 + 4 per
      // vocabulary entry of the rank's shard).
      out.other = 4.0 * sbh + 6.0 * s * b * V_shard;
      out.unit_input = 2.0 * sbh;
      return out;
    case UnitKind::Block:
      break;
  }
  auto idx = [](RecomputeOp op) { return static_cast<std::size_t>(op); };
  const double as2b = a * s * s * b;
  out.op[idx(RecomputeOp::Qkv)] = 6.0 * sbh / t;          // Q, K (4) and V (2)
  out.op[idx(RecomputeOp::AttnScore)] = 2.0 * as2b / t;    // dropped-out probabilities
  out.op[idx(RecomputeOp::AttnSoftmax)] = 2.0 * as2b / t;  // softmax output
  out.op[idx(RecomputeOp::AttnDropout)] = 1.0 * as2b / t;  // dropout mask
  out.op[idx(RecomputeOp::MlpAct)] = 8.0 * sbh / t;        // GELU output
  // Replicated across tp: two norm inputs (2 + 2), the qkv and fc inputs (2 + 2), two 1-byte
  // dropout masks (1 + 1). Sharded: proj input (2) and the GELU input (8).
  out.other = 10.0 * sbh + 10.0 * sbh / t;
  out.unit_input = 2.0 * sbh;
  return out;
}

}  // namespace eth
