// Model arithmetic against figures written out here from the formulas: parameters per unit and
// per tp rank (GPT's 12 C^2 + 13 C block, llama-tiny counted tensor by tensor, each
// architecture field's own tensors), tp row ranges, forward FLOPs (2 per multiply-add), and
// activation bytes per operator class (Korthikanti et al.'s per-layer total, the embedding's and
// head's by hand) with what each recompute set leaves held.
#include "model/arithmetic.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model_spec.h"
#include "model/recompute.h"

namespace eth::arithmetic_test {
namespace {

TEST(ModelArithmetic, UnitKindsAreEmbeddingBlocksHead) {
  const ModelSpec m = model_preset("tiny");  // 4 layers: units 0..5
  EXPECT_EQ(unit_kind(m, 0), UnitKind::Embedding);
  for (std::int64_t u = 1; u <= 4; ++u) EXPECT_EQ(unit_kind(m, u), UnitKind::Block);
  EXPECT_EQ(unit_kind(m, 5), UnitKind::Head);
}

TEST(ModelArithmetic, GptBlockTensorsInLayoutOrderWithTheirSplits) {
  const ModelSpec m = model_preset("tiny");  // C 64, F 256
  const auto R = TpSplit::Replicated, S = TpSplit::Sharded;
  struct Want {
    const char* name;
    std::vector<std::int64_t> shape;
    TpSplit split;
  };
  const std::vector<Want> want{
      {"ln1_w", {64}, R},    {"ln1_b", {64}, R},  {"qkv_w", {192, 64}, S},
      {"qkv_b", {192}, S},   {"proj_w", {64, 64}, S}, {"proj_b", {64}, R},
      {"ln2_w", {64}, R},    {"ln2_b", {64}, R},  {"fc_w", {256, 64}, S},
      {"fc_b", {256}, S},    {"fcproj_w", {256, 64}, S}, {"fcproj_b", {64}, R}};
  const auto got = unit_tensors(m, 2);
  ASSERT_EQ(got.size(), want.size());
  std::int64_t numel = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(got[i].split, want[i].split) << want[i].name;
    numel += got[i].numel();
  }
  EXPECT_EQ(numel, 12 * 64 * 64 + 13 * 64);
  // Embedding: the token table (sharded by rows) and the learned position table.
  const auto emb = unit_tensors(m, 0);
  ASSERT_EQ(emb.size(), 2u);
  EXPECT_EQ(emb[0].shape, (std::vector<std::int64_t>{256, 64}));
  EXPECT_EQ(emb[0].split, S);
  EXPECT_EQ(emb[1].shape, (std::vector<std::int64_t>{64, 64}));
  EXPECT_EQ(emb[1].split, R);
  EXPECT_EQ(qkv_rows(m), 192);
  EXPECT_EQ(mlp_up_rows(m), 256);
  EXPECT_EQ((TensorDesc{"x", {}, R}.numel()), 1);  // a scalar
}

TEST(ModelArithmetic, EmbeddingAndHeadActivationsCountedByHand) {
  const ModelSpec m = model_preset("tiny");  // C 64, V 256
  // s 64, b 2: s b = 128, s b h = 8192.
  const ActivationBytes e = activation_bytes_16bit(m, 0, 2, 64, 1);
  EXPECT_EQ(e.other, 4.0 * 128 + 8192);  // int32 ids, 1-byte dropout mask per element
  EXPECT_EQ(e.unit_input, 4.0 * 128);
  EXPECT_EQ(e.total(), e.other);  // no operator class in the embedding
  const ActivationBytes h1 = activation_bytes_16bit(m, 5, 2, 64, 1);
  EXPECT_EQ(h1.other, 4.0 * 8192 + 6.0 * 128 * 256);
  EXPECT_EQ(h1.unit_input, 2.0 * 8192);
  // tp 3: the largest rank's vocabulary shard is ceil(256 / 3) = 86 columns.
  const ActivationBytes h3 = activation_bytes_16bit(m, 5, 2, 64, 3);
  EXPECT_EQ(h3.other, 4.0 * 8192 + 6.0 * 128 * 86);
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  EXPECT_EQ(h1.held(unit), 2.0 * 8192);
  EXPECT_EQ(e.held(RecomputeSet::all_ops()), e.other);
}

TEST(ModelArithmetic, EachRecomputeClassDropsItsOwnBytes) {
  const ModelSpec m = model_preset("tiny");  // C 64, 4 heads, F 256
  // s 64, b 1, tp 2: sbh 4096, a s^2 b = 16384, s b F = 16384.
  const ActivationBytes a = activation_bytes_16bit(m, 1, 1, 64, 2);
  const double qkv = (2.0 * 4096 + 4.0 * 4096) / 2, score = 2.0 * 16384 / 2,
               softmax = 2.0 * 16384 / 2, dropout = 16384.0 / 2, act = 2.0 * 16384 / 2;
  const double other = 10.0 * 4096 + (2.0 * 4096 + 2.0 * 16384) / 2;
  EXPECT_EQ(a.other, other);
  EXPECT_EQ(a.total(), other + qkv + score + softmax + dropout + act);
  const std::vector<std::pair<RecomputeOp, double>> classes{{RecomputeOp::Qkv, qkv},
                                                            {RecomputeOp::AttnScore, score},
                                                            {RecomputeOp::AttnSoftmax, softmax},
                                                            {RecomputeOp::AttnDropout, dropout},
                                                            {RecomputeOp::MlpAct, act}};
  for (const auto& [op, bytes] : classes) {
    RecomputeSet one;
    one.add(op);
    EXPECT_EQ(a.held(one), a.total() - bytes) << recompute_op_name(op);
  }
  EXPECT_EQ(a.held(RecomputeSet::all_ops()), other);
}

TEST(ModelArithmetic, BlockParamsAreTwelveCSquaredPlusThirteenC) {
  for (const char* name : {"gpt3-350m", "gpt3-13b", "tiny"}) {
    const ModelSpec m = model_preset(name);
    const std::int64_t C = m.hidden;
    // ln1 2C, qkv 3C^2 + 3C, proj C^2 + C, ln2 2C, fc 4C^2 + 4C, fcproj 4C^2 + C.
    EXPECT_EQ(unit_params(m, 1), 12 * C * C + 13 * C) << name;
    EXPECT_EQ(unit_params(m, m.layers), 12 * C * C + 13 * C) << name;
    // Embedding (V + T) C; head: final norm 2C + LM head VC.
    EXPECT_EQ(unit_params(m, 0), (m.vocab + m.seq_len) * C) << name;
    EXPECT_EQ(unit_params(m, m.layers + 1), 2 * C + m.vocab * C) << name;
  }
}


TEST(ModelArithmetic, TensorParallelShardsTheRightTensors) {
  const ModelSpec m = model_preset("gpt3-350m");
  const std::int64_t C = m.hidden, t = 4;
  // Sharded: qkv (3C^2 + 3C), proj_w C^2, fc (4C^2 + 4C), fcproj_w 4C^2. Replicated: 2 norms
  // (4C) and the two biases after the row-parallel matmuls (2C).
  EXPECT_EQ(unit_params(m, 1, t), (12 * C * C + 7 * C) / t + 6 * C);
  EXPECT_EQ(unit_params(m, 0, t), m.vocab * C / t + m.seq_len * C);
}


TEST(ModelArithmetic, TpRowRangesCoverEveryRowOnceAndUnitParamsCountTheLargestShard) {
  // An uneven vocabulary: 50257 rows over tp 4 are 12564, 12564, 12564, 12565 rows.
  ModelSpec m = model_preset("gpt3-350m");
  m.vocab = 50257;
  const std::int64_t C = m.hidden;
  for (std::int64_t t : {1, 2, 3, 4, 8}) {
    std::int64_t next = 0, largest = 0;
    for (std::int64_t r = 0; r < t; ++r) {
      const RowRange rows = tp_rows(m.vocab, t, r);
      EXPECT_EQ(rows.begin, next) << "tp " << t << " rank " << r;
      EXPECT_GE(rows.size(), m.vocab / t);
      EXPECT_LE(rows.size(), m.vocab / t + 1);
      largest = std::max(largest, rows.size());
      next = rows.end;
    }
    EXPECT_EQ(next, m.vocab) << "tp " << t;
    // The embedding's wte is sharded, wpe replicated; the head's lm_head_w sharded.
    EXPECT_EQ(unit_params(m, 0, t), largest * C + m.seq_len * C) << "tp " << t;
    EXPECT_EQ(unit_params(m, m.layers + 1, t), largest * C + 2 * C) << "tp " << t;
  }
  // Heads divide by tp: qkv rows split at head boundaries (3 * head_dim rows per head).
  const RowRange qkv = tp_rows(3 * C, 4, 1);
  EXPECT_EQ(qkv.begin % (3 * m.head_dim()), 0);
  EXPECT_EQ(qkv.size(), 3 * C / 4);
}


TEST(ModelArithmetic, BlockFlopsMatchHandCount) {
  const ModelSpec m = model_preset("gpt3-350m");
  const double T = 2048, C = 1024, F = 4096;
  // Per sample, 2 FLOPs per multiply-add: qkv T*C*3C, proj T*C*C, fc T*C*F, fcproj T*F*C,
  // QK^T T*T*C and score x V T*T*C.
  const double hand =
      2 * (T * C * 3 * C + T * C * C + T * C * F + T * F * C) + 2 * (T * T * C + T * T * C);
  EXPECT_EQ(hand, 2 * T * (4 * C * C + 2 * C * F) + 4 * T * T * C);  // the closed form
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 1, 1, 2048), hand);
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 7, 3, 2048), 3 * hand);  // linear in batch
  // Head: LM head matmul 2 T C V; the embedding is a lookup.
  EXPECT_DOUBLE_EQ(unit_forward_flops(m, 25, 1, 2048), 2 * T * C * 51200);
  EXPECT_EQ(unit_forward_flops(m, 0, 1, 2048), 0.0);
  EXPECT_DOUBLE_EQ(model_forward_flops(m, 2, 2048), 2 * (24 * hand + 2 * T * C * 51200));
}


TEST(ModelArithmetic, ActivationSplitSumsToKorthikantiFormula) {
  const ModelSpec m = model_preset("gpt3-13b");
  const double s = 2048, h = 5120, a = 40;
  for (std::int64_t b : {1, 4}) {
    const double sbh = s * static_cast<double>(b) * h;
    const ActivationBytes t1 = activation_bytes_16bit(m, 3, b, 2048, 1);
    EXPECT_DOUBLE_EQ(t1.total(), sbh * (34 + 5 * a * s / h)) << b;
    for (std::int64_t tp : {2, 8}) {
      const double t = static_cast<double>(tp);
      const ActivationBytes at = activation_bytes_16bit(m, 3, b, 2048, tp);
      EXPECT_DOUBLE_EQ(at.total(), sbh * (10 + 24 / t + 5 * a * s / (h * t))) << b << " " << tp;
    }
  }
}


TEST(ModelArithmetic, RecomputeDropsTheNamedClasses) {
  const ModelSpec m = model_preset("gpt3-350m");
  const double s = 2048, b = 2, h = 1024, a = 16;
  const ActivationBytes act = activation_bytes_16bit(m, 1, 2, 2048, 1);
  // Recomputing the attention core (score, softmax, dropout) drops all 5 a s^2 b bytes.
  RecomputeSet attn;
  for (auto op : {RecomputeOp::AttnScore, RecomputeOp::AttnSoftmax, RecomputeOp::AttnDropout})
    attn.add(op);
  EXPECT_DOUBLE_EQ(act.held(attn), s * b * h * 34);
  EXPECT_DOUBLE_EQ(act.total() - act.held(attn), 5 * a * s * s * b);
  EXPECT_DOUBLE_EQ(act.held(RecomputeSet{}), act.total());
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  EXPECT_DOUBLE_EQ(act.held(unit), 2 * s * b * h);  // only the 16-bit unit input stays
  EXPECT_LT(act.held(RecomputeSet::all_ops()), act.held(attn));
}


TEST(LlamaArithmetic, TinyUnitsCountedByHand) {
  // llama-tiny: C 64, 4 heads of 16, 2 kv heads (kv_dim 32), ffn 128, vocab 256, 2 layers.
  const ModelSpec m = model_preset("llama-tiny");
  // Block: ln1_w 64, q 64x64 + k, v 32x64 each, proj 64x64, ln2_w 64, gate/up/down 128x64.
  const std::int64_t block = 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 64 + 3 * 128 * 64;
  EXPECT_EQ(block, 36992);
  EXPECT_EQ(unit_params(m, 1), block);
  EXPECT_EQ(unit_params(m, 2), block);
  EXPECT_EQ(unit_params(m, 0), 256 * 64);       // no position table under RoPE
  EXPECT_EQ(unit_params(m, 3), 64 + 256 * 64);  // RMSNorm weight only, LM head
  EXPECT_EQ(total_params(m), 256 * 64 + 2 * block + 64 + 256 * 64);
  // tp 2: everything but the two norm weights halves.
  EXPECT_EQ(unit_params(m, 1, 2), 128 + (block - 128) / 2);
  // Names: no biases, SwiGLU's three matrices.
  std::vector<std::string> names;
  for (const auto& t : unit_tensors(m, 1)) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"ln1_w", "qkv_w", "proj_w", "ln2_w", "gate_w",
                                             "up_w", "down_w"}));
  EXPECT_EQ(qkv_rows(m), 128);
  EXPECT_EQ(mlp_up_rows(m), 256);

  // Forward FLOPs, batch 1 at T 64: 2 per multiply-add over 64 tokens for the matrices above
  // (128x64 qkv, 64x64 proj, 3 x 128x64 MLP) plus 2 x 2 T C per token of attention.
  const double tokens = 64;
  EXPECT_EQ(unit_forward_flops(m, 1, 1, 64),
            2 * tokens * (128 * 64 + 64 * 64 + 3 * 128 * 64) + 4 * tokens * 64 * 64);
  EXPECT_EQ(unit_forward_flops(m, 3, 1, 64), 2 * tokens * 64 * 256);

  // Activations, mbs 1, s 64, tp 1 (sbh = 4096, s*b*kv_dim = 2048, s*b*ffn = 8192, a s^2 b =
  // 16384): Q 2 sbh + K, V 4 s b kv_dim; scores 2 + 2 + 1 per a s^2 b; silu(gate) * up 2 sbf;
  // other: 10 sbh replicated + proj input 2 sbh + gate and up outputs 4 sbf.
  const ActivationBytes a = activation_bytes_16bit(m, 1, 1, 64, 1);
  auto op = [&](RecomputeOp o) { return a.op[static_cast<std::size_t>(o)]; };
  EXPECT_EQ(op(RecomputeOp::Qkv), 2.0 * 4096 + 4.0 * 2048);
  EXPECT_EQ(op(RecomputeOp::AttnScore), 2.0 * 16384);
  EXPECT_EQ(op(RecomputeOp::AttnSoftmax), 2.0 * 16384);
  EXPECT_EQ(op(RecomputeOp::AttnDropout), 16384.0);
  EXPECT_EQ(op(RecomputeOp::MlpAct), 2.0 * 8192);
  EXPECT_EQ(a.other, 10.0 * 4096 + 2.0 * 4096 + 4.0 * 8192);
  // Under tp 2 every sharded term halves; the 10 sbh replicated stays.
  const ActivationBytes a2 = activation_bytes_16bit(m, 1, 1, 64, 2);
  EXPECT_EQ(a2.total() - 10.0 * 4096, (a.total() - 10.0 * 4096) / 2);
}


TEST(LlamaArithmetic, TiedEmbeddingIsHeldByFirstAndLastUnitButCountedOnce) {
  ModelSpec m = model_preset("llama-tiny");
  m.tied_embeddings = true;
  EXPECT_EQ(unit_params(m, 0), 256 * 64);
  EXPECT_EQ(unit_params(m, 3), 64 + 256 * 64);
  EXPECT_EQ(total_params(m), total_params(model_preset("llama-tiny")) - 256 * 64);
}


TEST(LlamaArithmetic, EachArchitectureFieldChangesOnlyItsTensors) {
  // GPT tiny (C 64, ffn 256, T 64, V 256): a block is 12 C^2 + 13 C with biases.
  const ModelSpec gpt = model_preset("tiny");
  const std::int64_t C = 64, F = 256;
  EXPECT_EQ(unit_params(gpt, 1), 12 * C * C + 13 * C);
  ModelSpec m = gpt;
  m.bias = false;  // drops ln1_b, ln2_b (2C), qkv_b (3C), proj_b, fcproj_b (2C), fc_b (F)
  EXPECT_EQ(unit_params(m, 1), 12 * C * C + 13 * C - (7 * C + F));
  EXPECT_EQ(unit_params(m, m.layers + 1), C + 256 * C);  // lnf_w only
  m = gpt;
  m.norm = NormKind::RmsNorm;  // RMSNorm has no bias: ln1_b, ln2_b go
  EXPECT_EQ(unit_params(m, 1), 12 * C * C + 11 * C);
  m = gpt;
  m.positions = PositionKind::Rope;  // the position table goes
  EXPECT_EQ(unit_params(m, 0), 256 * C);
  m = gpt;
  m.mlp = MlpKind::Swiglu;  // a third F x C matrix and its bias
  EXPECT_EQ(unit_params(m, 1), 12 * C * C + 13 * C + F * C + F);
  EXPECT_EQ(unit_forward_flops(m, 1, 1, 64) - unit_forward_flops(gpt, 1, 1, 64),
            2.0 * 64 * F * C);
  m = gpt;
  m.kv_heads = 1;  // K and V shrink from C x C to 16 x C each, with their biases
  EXPECT_EQ(unit_params(m, 1), 12 * C * C + 13 * C - 2 * (C - 16) * (C + 1));
}

}  // namespace
}  // namespace eth::arithmetic_test
