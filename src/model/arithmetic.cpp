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

std::int64_t qkv_rows(const ModelSpec& m) { return m.hidden + 2 * m.kv_dim(); }

std::int64_t mlp_up_rows(const ModelSpec& m) {
  return m.mlp == MlpKind::Swiglu ? 2 * m.ffn : m.ffn;
}

namespace {
// A norm's weight, and its bias where the model has biases and the norm takes one.
void add_norm(std::vector<TensorDesc>& out, const ModelSpec& m, const std::string& prefix) {
  const std::int64_t C = m.hidden;
  out.push_back({prefix + "_w", {C}, TpSplit::Replicated});
  if (m.norm == NormKind::LayerNorm && m.bias) {
    out.push_back({prefix + "_b", {C}, TpSplit::Replicated});
  }
}
}  // namespace

std::vector<TensorDesc> unit_tensors(const ModelSpec& m, std::int64_t unit) {
  const std::int64_t C = m.hidden, F = m.ffn, V = m.vocab, T = m.seq_len;
  const auto R = TpSplit::Replicated;
  const auto S = TpSplit::Sharded;
  std::vector<TensorDesc> out;
  switch (unit_kind(m, unit)) {
    case UnitKind::Embedding:
      out.push_back({"wte", {V, C}, S});
      if (m.positions == PositionKind::Learned) out.push_back({"wpe", {T, C}, R});
      return out;
    case UnitKind::Head:
      // Tied: the same matrix as the embedding's wte, held (and counted) here as well.
      add_norm(out, m, "lnf");
      out.push_back({"lm_head_w", {V, C}, S});
      return out;
    case UnitKind::Block:
      break;
  }
  // Megatron's split: qkv and fc are column-parallel (output rows sharded), proj and fcproj are
  // row-parallel (stored transposed here, so the split is again along the first dimension);
  // their biases are added after the all-reduce and so are replicated. Under grouped-query
  // attention qkv holds C query rows and kv_dim rows each for K and V.
  auto add = [&](const char* name, std::vector<std::int64_t> shape, TpSplit split, bool bias) {
    if (bias && !m.bias) return;
    out.push_back({name, std::move(shape), split});
  };
  const std::int64_t QKV = qkv_rows(m);
  add_norm(out, m, "ln1");
  add("qkv_w", {QKV, C}, S, false);
  add("qkv_b", {QKV}, S, true);
  add("proj_w", {C, C}, S, false);
  add("proj_b", {C}, R, true);
  add_norm(out, m, "ln2");
  if (m.mlp == MlpKind::Swiglu) {
    // down(silu(gate x) * up x): gate and up column-parallel, down row-parallel (transposed).
    add("gate_w", {F, C}, S, false);
    add("gate_b", {F}, S, true);
    add("up_w", {F, C}, S, false);
    add("up_b", {F}, S, true);
    add("down_w", {F, C}, S, false);
    add("down_b", {C}, R, true);
    return out;
  }
  add("fc_w", {F, C}, S, false);
  add("fc_b", {F}, S, true);
  add("fcproj_w", {F, C}, S, false);
  add("fcproj_b", {C}, R, true);
  return out;
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
  // A tied matrix is held by both the first and the last unit but is one set of parameters.
  if (m.tied_embeddings) n -= m.vocab * m.hidden;
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
  // qkv ((C + 2 kv_dim) x C) + proj (C x C) + the MLP's two (GELU: fc, fcproj) or three
  // (SwiGLU: gate, up, down) F x C matrices, 2 FLOPs per multiply-add, plus QK^T and score x V:
  // each 2 * T * C per token (every query head attends, whatever the kv heads).
  const double QKV = static_cast<double>(qkv_rows(m));
  const double mats = m.mlp == MlpKind::Swiglu ? 3.0 : 2.0;
  return 2.0 * tokens * (QKV * C + C * C + mats * C * F) + 4.0 * tokens * T * C;
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
  // All products below are of integers under 2^53, so exact: GPT's figures are the same
  // doubles as the formula with 6 sbh and 8 sbh written in.
  const double sbkv = s * b * static_cast<double>(m.kv_dim());
  const double sbf = s * b * static_cast<double>(m.ffn);
  out.op[idx(RecomputeOp::Qkv)] = (2.0 * sbh + 4.0 * sbkv) / t;  // Q (2), K and V (2 + 2)
  out.op[idx(RecomputeOp::AttnScore)] = 2.0 * as2b / t;    // dropped-out probabilities
  out.op[idx(RecomputeOp::AttnSoftmax)] = 2.0 * as2b / t;  // softmax output
  out.op[idx(RecomputeOp::AttnDropout)] = 1.0 * as2b / t;  // dropout mask
  // GELU output, or SwiGLU's silu(gate) * up (2 per inner element either way).
  out.op[idx(RecomputeOp::MlpAct)] = 2.0 * sbf / t;
  // Replicated across tp: two norm inputs (2 + 2), the qkv and MLP inputs (2 + 2), two 1-byte
  // dropout masks (1 + 1). Sharded: proj input (2) and the activation's input: GELU's (2 per
  // inner element), SwiGLU's gate and up outputs (2 + 2).
  const double act_in = m.mlp == MlpKind::Swiglu ? 4.0 * sbf : 2.0 * sbf;
  out.other = 10.0 * sbh + (2.0 * sbh + act_in) / t;
  out.unit_input = 2.0 * sbh;
  return out;
}

}  // namespace eth
