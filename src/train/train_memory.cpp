// See train_memory.h.
#include "train/train_memory.h"

#include <algorithm>

#include "core/error.h"
#include "data/sampler.h"
#include "model/arithmetic.h"
#include "train/arena.h"
#include "train/precision_stage.h"

namespace eth {

namespace {

// Above this the exact sizing pass (64-bit products of batch, heads and sequence) could
// overflow; no machine has a petabyte, so the coarse figure is reason enough to refuse.
constexpr double kCoarseLimitBytes = 1e15;

// fp32 activations of every unit for one micro-batch of `mb` samples: twice the 16-bit formula
// (model/arithmetic.h), in double so it cannot overflow.
double coarse_activation_bytes(const ModelSpec& m, std::int64_t mb, std::int64_t T) {
  double bytes = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    bytes += 2 * activation_bytes_16bit(m, u, mb, T, 1).total();
  }
  return bytes;
}

}  // namespace

TrainMemory train_memory(const TrainConfig& cfg) {
  const ModelSpec& m = cfg.model;
  const std::int64_t T = cfg.seq_len == 0 ? m.seq_len : cfg.seq_len;
  ETH_CHECK(T >= 1 && T <= m.seq_len && cfg.micro_batch >= 1 && cfg.global_batch >= 1,
            "train_memory: an invalid run");
  const std::int64_t mb = std::min(cfg.micro_batch, cfg.global_batch);
  TrainMemory r;
  r.on_device = is_gpu_device(cfg.device);
  // ModelState's buffers (unit-major: the gradients at the parameters' offsets).
  const std::int64_t n = total_params(m);
  r.state_bytes = 4.0 * static_cast<double>(arena_bytes<float>(n)) +
                  (cfg.precision == Precision::Bf16 ? static_cast<double>(arena_bytes<Bf16>(n))
                                                    : 0.0);
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = m.num_units() - 1;
  sc.max_micro_batch = mb;
  sc.seq_len = T;
  sc.num_slots = 1;
  sc.recompute = cfg.recompute;
  sc.dropout = cfg.dropout;
  sc.seed = cfg.seed;
  const double coarse = coarse_activation_bytes(m, mb, T);
  r.arena_bytes = coarse > kCoarseLimitBytes
                      ? coarse
                      : static_cast<double>(PrecisionStage::planned_arena_bytes(
                            cfg.precision, m, sc, cfg.device));
  // The loss scalars, and on a device the targets the head reads there (stage_compute_impl.h,
  // assign_io); the tokens go into the embedding's saved input.
  const double N = static_cast<double>(mb) * static_cast<double>(T);
  r.io_bytes = static_cast<double>(arena_bytes<double>(2)) +
               (r.on_device ? static_cast<double>(arena_bytes<std::int32_t>(
                                  static_cast<std::int64_t>(std::min(N, 1e15))))
                            : 0.0);
  // A micro-batch's tokens and targets gathered on the host, and the step's sample list.
  r.host_bytes = 2.0 * N * 4 + static_cast<double>(cfg.global_batch) * sizeof(SampleRef);
  return r;
}

}  // namespace eth
