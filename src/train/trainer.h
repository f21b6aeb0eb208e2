// The single-process trainer: one StageCompute over all units, gradient accumulation over the
// micro-batches of each global batch, global-norm clipping, AdamW on a warm-up + cosine
// schedule, checkpoints that resume bit-identically. A library: it never prints; `eth train`
// (cli/cmd_train.cpp) drives it step by step and reports. Not the distributed runtime, which
// reuses StageCompute, ModelState, the optimizer and the sampler per stage.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "data/sampler.h"
#include "data/token_file.h"
#include "model/model_spec.h"
#include "model/recompute.h"
#include "train/checkpoint.h"
#include "train/compute_device.h"
#include "core/precision.h"
#include "train/model_state.h"
#include "train/optimizer.h"
#include "train/precision_stage.h"

namespace eth {

struct TrainConfig {
  ModelSpec model;
  std::filesystem::path data;
  std::int64_t steps = 1;         // total optimizer steps (the schedule's length)
  std::int64_t global_batch = 1;  // samples per step (GBS)
  std::int64_t micro_batch = 1;   // samples per forward/backward; the last may be partial
  std::int64_t seq_len = 0;       // T; 0 means the model's seq_len
  LrSchedule lr;
  AdamWConfig adamw;
  RecomputeSet recompute;
  float dropout = 0;
  std::uint64_t seed = 1;  // initialization, data order and dropout masks
  bool shuffle = true;
  // fp32, or bf16 compute with fp32 master weights, moments and gradients (kernels/README.md,
  // "Precision"). Checkpoints hold fp32 masters either way, so runs resume across precisions.
  // The library default is fp32; `eth train` picks bf16 where the CPU has bf16 instructions.
  Precision precision = Precision::Fp32;
  // Where the model state and the stage live (compute_device.h): the CPU, or a GPU set (bf16
  // only), whose state stays in device memory; checkpoints are downloaded and uploaded through
  // the state's backend, so they resume on any device.
  ComputeDevice device = ComputeDevice::Cpu;
  // Not empty: start from this checkpoint's weights (train/init_from.h) instead of the seed's
  // initialization; fresh optimizer state, step 0. Not with a resume.
  std::filesystem::path init_from;
};

struct StepStats {
  std::int64_t step = 0;  // the optimizer step just taken (0-based)
  double loss = 0;        // mean token loss of the global batch
  double lr = 0;
  double grad_norm = 0;  // before clipping
  double seconds = 0;    // wall time of the step
  double tokens_per_s = 0;
};

// Pieces shared with the distributed trainer (runtime/), so both read the same data the same
// way and write checkpoints either can resume, under any plan.
// T of the run: cfg.seq_len, or the model's when 0; InputError for values outside 1..model's.
std::int64_t resolve_seq_len(const TrainConfig& cfg);
// Opens cfg.data and checks every token is inside the model's vocabulary.
TokenFile open_training_data(const TrainConfig& cfg);
SamplerConfig training_sampler_config(const TrainConfig& cfg, std::int64_t T,
                                      std::int64_t num_tokens);
// The checkpoint metadata of a run about to take optimizer step `step`. Plan-independent.
CheckpointMeta training_meta(const TrainConfig& cfg, std::int64_t seq_len,
                             std::int64_t num_tokens, std::int64_t step);
// A resume must reproduce the numbers: throws InputError naming the checkpoint and the
// metadata field where `meta` (read from `path`) disagrees with the run's `want`.
void check_resume(const std::filesystem::path& path, const CheckpointMeta& meta,
                  const CheckpointMeta& want);

class Trainer {
 public:
  // Opens the data and allocates everything. With `resume`, loads the checkpoint and continues
  // at its step; the checkpoint must agree with `cfg` on everything that changes the numbers
  // (model, batch, sequence, data, seed, dropout, schedule), or InputError names the mismatch.
  explicit Trainer(const TrainConfig& cfg,
                   const std::optional<std::filesystem::path>& resume = std::nullopt);

  const TrainConfig& config() const { return cfg_; }
  std::int64_t next_step() const { return next_step_; }
  bool done() const { return next_step_ >= cfg_.steps; }
  const ModelState& state() const { return state_; }
  const PrecisionStage& compute() const { return *compute_; }
  std::int64_t tokens_per_step() const { return cfg_.global_batch * seq_len_; }

  // Zeroes the gradients and accumulates those of step `next_step()`'s global batch; returns
  // its mean token loss. Does not update the parameters.
  double compute_gradients();
  // compute_gradients, clipping, AdamW, and next_step() + 1.
  StepStats step();
  // Writes <dir>/step_<next_step>.safetensors and returns its path.
  std::filesystem::path save_checkpoint(const std::filesystem::path& dir) const;

 private:
  CheckpointMeta make_meta() const;
  TrainConfig cfg_;
  std::int64_t seq_len_ = 0;
  TokenFile data_;
  GlobalSampler sampler_;
  ModelState state_;
  std::unique_ptr<PrecisionStage> compute_;
  std::vector<std::int32_t> inputs_, targets_;  // (micro_batch, T)
  std::int64_t next_step_ = 0;
};

}  // namespace eth
