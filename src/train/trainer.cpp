// The single-process training loop. See trainer.h.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/init_from.h"

namespace eth {

std::int64_t resolve_seq_len(const TrainConfig& cfg) {
  const std::int64_t T = cfg.seq_len == 0 ? cfg.model.seq_len : cfg.seq_len;
  if (T < 1 || T > cfg.model.seq_len) {
    throw InputError("train", "--seq-len", "",
                     "expected 1.." + std::to_string(cfg.model.seq_len) +
                         " (the model's position table), got " + std::to_string(T));
  }
  return T;
}

TokenFile open_training_data(const TrainConfig& cfg) {
  TokenFile f = TokenFile::open(cfg.data);
  if (f.size() > 0 && f.max_token() >= cfg.model.vocab) {
    throw InputError("train", cfg.data.string(), "",
                     "token id " + std::to_string(f.max_token()) +
                         " is outside the model's "
                         "vocabulary of " +
                         std::to_string(cfg.model.vocab) + " (model " + cfg.model.name + ")");
  }
  return f;
}

SamplerConfig training_sampler_config(const TrainConfig& cfg, std::int64_t T,
                                      std::int64_t num_tokens) {
  if (num_tokens < T + 1) {
    throw InputError("train", cfg.data.string(), "",
                     "too few tokens: " + std::to_string(num_tokens) +
                         ", one sample of sequence "
                         "length " +
                         std::to_string(T) + " needs " + std::to_string(T + 1));
  }
  if (cfg.global_batch < 1) throw InputError("train", "--batch", "", "expected >= 1");
  return {num_tokens, T, cfg.global_batch, cfg.seed, cfg.shuffle};
}

void check_resume(const std::filesystem::path& path, const CheckpointMeta& meta,
                  const CheckpointMeta& expected) {
  if (meta.model.name != expected.model.name ||
      meta.model.num_units() != expected.model.num_units()) {
    throw InputError("checkpoint", path.string(), "__metadata__.model",
                     "the checkpoint is of model " + meta.model.name + " but this run trains " +
                         expected.model.name);
  }
  auto same = [&](const Json& have, const Json& want, const char* section) {
    for (const auto& [key, value] : want.items()) {
      if (key == "file" || key == "next_sample") continue;  // informational / positional
      if (!have.contains(key) || have[key] != value) {
        throw InputError(
            "checkpoint", path.string(), std::string("__metadata__.") + section + "." + key,
            "the checkpoint has " + (have.contains(key) ? have[key].dump() : "nothing") +
                " but this run has " + value.dump() +
                "; resuming needs the same value to continue the same training");
      }
    }
  };
  same(*meta.data, *expected.data, "data");
  same(*meta.run, *expected.run, "run");
}

CheckpointMeta training_meta(const TrainConfig& cfg, std::int64_t seq_len,
                             std::int64_t num_tokens, std::int64_t step) {
  CheckpointMeta m;
  m.model = cfg.model;
  m.step = step;
  m.schedule = Json{{"lr_max", cfg.lr.lr_max},
                    {"lr_min", cfg.lr.lr_min},
                    {"warmup_steps", cfg.lr.warmup_steps},
                    {"total_steps", cfg.lr.total_steps},
                    {"beta1", cfg.adamw.beta1},
                    {"beta2", cfg.adamw.beta2},
                    {"eps", cfg.adamw.eps},
                    {"weight_decay", cfg.adamw.weight_decay},
                    {"grad_clip", cfg.adamw.grad_clip}};
  m.data = Json{{"file", cfg.data.string()},
                {"num_tokens", num_tokens},
                {"seq_len", seq_len},
                {"global_batch", cfg.global_batch},
                {"seed", cfg.seed},
                {"shuffle", cfg.shuffle},
                {"next_sample", step * cfg.global_batch}};
  m.run = Json{{"seed", cfg.seed}, {"dropout", cfg.dropout}};
  return m;
}

// The state's backend on cfg.device, refused (InputError) before anything is allocated there.
static MakeStateBackend checked_state_backend(const TrainConfig& cfg) {
  const std::string why = compute_device_refusal(cfg.device, cfg.precision);
  if (!why.empty()) {
    const bool precision = is_gpu_device(cfg.device) && cfg.precision != Precision::Bf16;
    throw InputError("train", precision ? "--precision" : "--device", "", why);
  }
  return state_backend_maker(cfg.device);
}

Trainer::Trainer(const TrainConfig& cfg, const std::optional<std::filesystem::path>& resume)
    : cfg_(cfg),
      seq_len_(resolve_seq_len(cfg)),
      data_(open_training_data(cfg)),
      sampler_(training_sampler_config(cfg, seq_len_, data_.size())),
      state_(cfg.model, 0, cfg.model.num_units() - 1, 1, 0, cfg.precision,
             checked_state_backend(cfg)) {
  if (cfg.micro_batch < 1 || cfg.micro_batch > cfg.global_batch) {
    throw InputError("train", "--micro-batch-size", "",
                     "expected 1..--batch (" + std::to_string(cfg.global_batch) + "), got " +
                         std::to_string(cfg.micro_batch));
  }
  if (cfg.steps < 1) throw InputError("train", "--steps", "", "expected >= 1");
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = cfg.model.num_units() - 1;
  sc.max_micro_batch = cfg.micro_batch;
  sc.seq_len = seq_len_;
  sc.num_slots = 1;  // forward and backward of one micro-batch at a time
  sc.recompute = cfg.recompute;
  sc.dropout = cfg.dropout;
  sc.seed = cfg.seed;
  compute_ = std::make_unique<PrecisionStage>(cfg.precision, cfg.model, sc, nullptr, cfg.device);
  inputs_.resize(static_cast<std::size_t>(cfg.micro_batch * seq_len_));
  targets_.resize(inputs_.size());
  check_init_not_resume(cfg.init_from, resume.has_value());
  if (resume) {
    const CheckpointMeta meta = load_checkpoint(*resume, state_);
    check_resume(*resume, meta, make_meta());
    next_step_ = meta.step;
  } else if (!cfg.init_from.empty()) {
    init_from_checkpoint(cfg.init_from, state_);
  } else {
    state_.init(cfg.seed);
  }
}

double Trainer::compute_gradients() {
  const std::vector<SampleRef> batch = sampler_.batch(next_step_);
  const std::int64_t T = seq_len_;
  const double scale = 1.0 / static_cast<double>(cfg_.global_batch * T);
  state_.zero_grads();
  for (std::int64_t b0 = 0; b0 < cfg_.global_batch; b0 += cfg_.micro_batch) {
    const std::int64_t B = std::min(cfg_.micro_batch, cfg_.global_batch - b0);
    for (std::int64_t b = 0; b < B; ++b) {
      gather_sample(inputs_.data() + b * T, targets_.data() + b * T, data_.tokens(),
                    batch[static_cast<std::size_t>(b0 + b)], T);
    }
    MicroBatch mb;
    mb.step = next_step_;
    mb.first_sample = batch[static_cast<std::size_t>(b0)].global_index;
    mb.size = B;
    mb.tokens = inputs_.data();
    mb.targets = targets_.data();
    mb.loss_scale = scale;
    compute_->forward(0, state_, mb, nullptr, nullptr);
    compute_->backward(0, state_, mb, nullptr, nullptr);
  }
  return compute_->take_loss();  // the micro-batches' losses, added in order
}

StepStats Trainer::step() {
  ETH_CHECK(!done(), "Trainer::step past the last step");
  const auto t0 = std::chrono::steady_clock::now();
  StepStats s;
  s.step = next_step_;
  s.loss = compute_gradients();
  s.grad_norm = std::sqrt(grad_sum_squares(state_));
  s.lr = cfg_.lr.at(next_step_);
  adamw_update(state_, cfg_.adamw, s.lr, next_step_,
               clip_factor(s.grad_norm, cfg_.adamw.grad_clip));
  ++next_step_;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.tokens_per_s = static_cast<double>(tokens_per_step()) / std::max(s.seconds, 1e-9);
  return s;
}

CheckpointMeta Trainer::make_meta() const {
  return training_meta(cfg_, seq_len_, data_.size(), next_step_);
}

std::filesystem::path Trainer::save_checkpoint(const std::filesystem::path& dir) const {
  const std::filesystem::path path = checkpoint_path(dir, next_step_);
  write_checkpoint(path, state_, make_meta());
  return path;
}

}  // namespace eth
