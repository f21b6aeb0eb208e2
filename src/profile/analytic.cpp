// The analytic profile: matmul FLOPs over peak times an efficiency curve, elementwise work as
// memory traffic, tp all-reduces over the intra-node link. The constants and their reasons are
// in analytic.h and docs/profile.md; nothing here is measured.
#include "profile/analytic.h"

#include <string>

#include "core/error.h"

namespace eth {

namespace {

using C = AnalyticConstants;

std::size_t idx(RecomputeOp op) { return static_cast<std::size_t>(op); }

void require(bool ok, const std::string& path, const std::string& detail) {
  if (!ok) throw InputError("profile", "", path, detail);
}

// What one analytic entry needs, computed once.
struct Pricing {
  const ModelSpec& m;
  const DeviceType& d;
  std::int64_t tp, mbs, seq;
  double eff;      // fraction of peak on matmuls
  double flops_s;  // sustained matmul FLOP/s
  double mem_bps;  // elementwise bytes/s

  double matmul_ms(double flops) const { return flops / static_cast<double>(tp) / flops_s * 1e3; }
  double memory_ms(double bytes) const { return bytes / mem_bps * 1e3; }
  double allreduce_ms(double bytes) const { return analytic_allreduce_ms(d, tp, bytes); }
};

UnitProfile price_embedding(const Pricing& p, std::int64_t unit) {
  const double sbh = static_cast<double>(p.seq * p.mbs * p.m.hidden);
  UnitProfile u;
  // No matmul: a gather, an add and dropout, priced as the bytes they move. Under tp the
  // vocabulary-parallel lookup leaves a partial sum on every rank: one all-reduce forward.
  const double compute = p.memory_ms(C::kEmbeddingBytesPerElement * sbh);
  u.forward_ms = compute + p.allreduce_ms(2.0 * sbh);
  u.backward_ms = 2.0 * compute;  // scatter-add of the gradient rows; no collective
  u.params = unit_params(p.m, unit, p.tp);
  u.activation = activation_bytes_16bit(p.m, unit, p.mbs, p.seq, p.tp);
  u.recompute_ms[idx(RecomputeOp::Unit)] = u.forward_ms;
  return u;
}

UnitProfile price_head(const Pricing& p, std::int64_t unit) {
  const double sb = static_cast<double>(p.seq * p.mbs);
  const double sbh = sb * static_cast<double>(p.m.hidden);
  UnitProfile u;
  const double compute = p.matmul_ms(unit_forward_flops(p.m, unit, p.mbs, p.seq));
  // Vocabulary-parallel cross entropy: forward all-reduces three fp32 values per token (max,
  // sum of exponentials, target logit); backward all-reduces the input gradient (16-bit, s*b*h).
  u.forward_ms = compute + p.allreduce_ms(12.0 * sb);
  u.backward_ms = 2.0 * compute + p.allreduce_ms(2.0 * sbh);
  u.params = unit_params(p.m, unit, p.tp);
  u.activation = activation_bytes_16bit(p.m, unit, p.mbs, p.seq, p.tp);
  u.recompute_ms[idx(RecomputeOp::Unit)] = u.forward_ms;
  return u;
}

UnitProfile price_block(const Pricing& p, std::int64_t unit) {
  const double s = static_cast<double>(p.seq), b = static_cast<double>(p.mbs);
  const double h = static_cast<double>(p.m.hidden), a = static_cast<double>(p.m.heads);
  const double t = static_cast<double>(p.tp);
  const double sbh = s * b * h, as2b = a * s * s * b, tokens = s * b;
  UnitProfile u;
  const double compute = p.matmul_ms(unit_forward_flops(p.m, unit, p.mbs, p.seq));
  // Megatron's block: one all-reduce of the s*b*h 16-bit output after attention and one after
  // the MLP in forward; their conjugates (the input gradients) in backward.
  const double comm = 2.0 * p.allreduce_ms(2.0 * sbh);
  u.forward_ms = compute + comm;
  u.backward_ms = 2.0 * compute + comm;
  u.params = unit_params(p.m, unit, p.tp);
  u.activation = activation_bytes_16bit(p.m, unit, p.mbs, p.seq, p.tp);
  // Recompute: the forward work that rebuilds each class's saved tensors (all sharded by tp).
  u.recompute_ms[idx(RecomputeOp::Qkv)] =
      p.matmul_ms(2.0 * tokens * static_cast<double>(qkv_rows(p.m)) * h);
  // QK^T (2*s*s*h per sample) and the softmax: read the scores, write the probabilities.
  u.recompute_ms[idx(RecomputeOp::AttnSoftmax)] =
      p.matmul_ms(2.0 * tokens * s * h) + p.memory_ms(4.0 * as2b / t);
  // Dropout apply: read the probabilities (2) and the mask (1), write the result (2).
  u.recompute_ms[idx(RecomputeOp::AttnScore)] = p.memory_ms(5.0 * as2b / t);
  // Regenerate the mask from the (seed, step, sample, unit) key: write one byte per element.
  u.recompute_ms[idx(RecomputeOp::AttnDropout)] = p.memory_ms(as2b / t);
  // GELU: read the fc output and write its activation, ffn 16-bit values per token each;
  // SwiGLU reads gate and up and writes their product.
  const double sbf = tokens * static_cast<double>(p.m.ffn);
  const double act_bytes = p.m.mlp == MlpKind::Swiglu ? 6.0 * sbf : 4.0 * sbf;
  u.recompute_ms[idx(RecomputeOp::MlpAct)] = p.memory_ms(act_bytes / t);
  u.recompute_ms[idx(RecomputeOp::Unit)] = u.forward_ms;
  return u;
}

}  // namespace

double analytic_efficiency(std::int64_t mbs, std::int64_t seq, std::int64_t tp) {
  const double tokens = static_cast<double>(mbs) * static_cast<double>(seq);
  return C::kMaxEfficiency * tokens / (tokens + C::kHalfEfficiencyTokens) /
         (1.0 + C::kTpPenaltyPerRank * static_cast<double>(tp - 1));
}

double analytic_memory_bytes_per_s(const DeviceType& d) {
  return d.peak_flops() / C::kFlopsPerByte;
}

double analytic_allreduce_ms(const DeviceType& d, std::int64_t tp, double bytes) {
  if (tp <= 1) return 0.0;
  const double t = static_cast<double>(tp);
  const double bytes_per_s = d.intra_node_bandwidth_gbps * 1e9 / 8.0;
  return 2.0 * (t - 1.0) / t * bytes / bytes_per_s * 1e3;
}

ProfileEntry analytic_profile(const ModelSpec& m, const DeviceType& d, std::int64_t tp,
                              std::int64_t mbs, std::int64_t seq) {
  const std::string at = " (device type " + d.name + ")";
  require(tp >= 1, "tp", "must be >= 1, got " + std::to_string(tp));
  require(m.tp_splits(tp), "tp",
          "must divide the model's heads (" + std::to_string(m.heads) + "), kv heads (" +
              std::to_string(m.num_kv_heads()) + ") and FFN size (" + std::to_string(m.ffn) +
              "), got " + std::to_string(tp));
  require(mbs >= 1, "micro_batch_size", "must be >= 1, got " + std::to_string(mbs));
  require(seq >= 1 && seq <= m.seq_len, "seq_len",
          "must be in [1, " + std::to_string(m.seq_len) + "] (the model's sequence length), got " +
              std::to_string(seq));
  require(d.tflops > 0, "tflops", "must be > 0 for an analytic profile" + at);
  require(tp == 1 || d.intra_node_bandwidth_gbps > 0, "intra_node_bandwidth_gbps",
          "must be > 0 for tp > 1" + at);

  const double eff = analytic_efficiency(mbs, seq, tp);
  const Pricing p{m, d, tp, mbs, seq, eff, d.peak_flops() * eff, analytic_memory_bytes_per_s(d)};
  ProfileEntry e;
  e.key = ProfileKey{d.name, tp, mbs};
  e.seq_len = seq;
  e.source = "analytic";
  e.units.reserve(static_cast<std::size_t>(m.num_units()));
  double params = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    switch (unit_kind(m, u)) {
      case UnitKind::Embedding:
        e.units.push_back(price_embedding(p, u));
        break;
      case UnitKind::Head:
        e.units.push_back(price_head(p, u));
        break;
      case UnitKind::Block:
        e.units.push_back(price_block(p, u));
        break;
    }
    params += static_cast<double>(e.units.back().params);
  }
  e.optimizer_ms = p.memory_ms(C::kAdamBytesPerParam * params);
  return e;
}

ProfileDb analytic_profile_db(const ModelSpec& m, const ClusterSpec& cluster,
                              const std::vector<std::int64_t>& tps,
                              const std::vector<std::int64_t>& mbss, std::int64_t seq) {
  ProfileDb db(m);
  for (const auto& [name, type] : cluster.device_types) {
    for (std::int64_t tp : tps) {
      for (std::int64_t mbs : mbss) db.add(analytic_profile(m, type, tp, mbs, seq));
    }
  }
  return db;
}

}  // namespace eth
