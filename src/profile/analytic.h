// The analytic profile: every unit's forward/backward time, activation bytes per operator class
// and recompute cost, from the model's FLOP and byte counts (model/arithmetic.h) and a device's
// peak figures. A planning estimate, not a measurement: docs/profile.md gives the efficiency
// curve, its constants and why; measured and Metis-imported profiles replace it when present.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/cluster_spec.h"
#include "model/model_spec.h"
#include "profile/profile.h"

namespace eth {

// The constants of the analytic model (docs/profile.md says where each comes from).
struct AnalyticConstants {
  // Best fraction of peak a 16-bit accelerator sustains on a GPT block's matmuls (Megatron-LM
  // reports 52-56% model FLOPs utilization on A100 for large GPT models).
  static constexpr double kMaxEfficiency = 0.55;
  // Tokens per micro-batch at which efficiency is half of kMaxEfficiency: small matmuls (M =
  // tokens rows) leave the device's tiles underused and fixed per-kernel costs do not shrink.
  static constexpr double kHalfEfficiencyTokens = 512.0;
  // Per extra tp rank: matmuls narrowed by tp use the device less well (communication itself is
  // priced separately, as all-reduce time).
  static constexpr double kTpPenaltyPerRank = 0.03;
  // Machine balance used to derive an effective memory bandwidth from the peak: bytes/s =
  // peak FLOP/s / kFlopsPerByte (A100: 312e12 / 200 = 1.56 TB/s, about what streaming kernels
  // reach of its 2.0 TB/s).
  static constexpr double kFlopsPerByte = 200.0;
  // Bytes Adam touches per parameter: read the 16-bit gradient (2), read and write the fp32
  // master weight, first and second moments (3 x 8), write the 16-bit weight (2).
  static constexpr double kAdamBytesPerParam = 28.0;
  // Bytes the embedding forward moves per element of its s x b x h output: read a token row and
  // a position row (2 + 2), write their sum (2), write the dropout mask (1) and output (2).
  static constexpr double kEmbeddingBytesPerElement = 9.0;
};

// Fraction of peak reached on matmuls at this micro-batch shape and tp:
//   eff = kMaxEfficiency * tokens / (tokens + kHalfEfficiencyTokens) / (1 + kTpPenaltyPerRank *
//   (tp - 1)), tokens = mbs * seq.
double analytic_efficiency(std::int64_t mbs, std::int64_t seq, std::int64_t tp);
// Effective memory bandwidth for elementwise work, bytes per second.
double analytic_memory_bytes_per_s(const DeviceType& d);
// Ring all-reduce of `bytes` over `tp` devices of one node, milliseconds: 2(t-1)/t * bytes / bw.
double analytic_allreduce_ms(const DeviceType& d, std::int64_t tp, double bytes);

// One entry. Throws InputError when tp does not divide the model's heads and FFN size, when mbs
// or seq is out of range (seq must be in [1, model.seq_len]), or when the device lacks the
// figures needed (tflops > 0; intra-node bandwidth > 0 when tp > 1).
ProfileEntry analytic_profile(const ModelSpec& m, const DeviceType& d, std::int64_t tp,
                              std::int64_t mbs, std::int64_t seq);

// Every device type of the cluster (ClusterSpec::device_types) at every (tp, mbs) given.
ProfileDb analytic_profile_db(const ModelSpec& m, const ClusterSpec& cluster,
                              const std::vector<std::int64_t>& tps,
                              const std::vector<std::int64_t>& mbss, std::int64_t seq);

}  // namespace eth
