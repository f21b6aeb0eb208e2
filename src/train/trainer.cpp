// The single-process training loop. See trainer.h.
#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "core/error.h"

namespace eth {

namespace {

std::int64_t resolve_seq_len(const TrainConfig& cfg) {
  const std::int64_t T = cfg.seq_len == 0 ? cfg.model.seq_len : cfg.seq_len;
  if (T < 1 || T > cfg.model.seq_len) {
    throw InputError("train", "--seq-len", "",
                     "expected 1.." + std::to_string(cfg.model.seq_len) +
                         " (the model's position table), got " + std::to_string(T));
  }
  return T;
}

TokenFile open_data(const TrainConfig& cfg) {
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

SamplerConfig sampler_config(const TrainConfig& cfg, std::int64_t T, std::int64_t num_tokens) {
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

// A resume must reproduce the numbers: these fields of the checkpoint have to match the run.
void check_resume(const std::filesystem::path& path, const CheckpointMeta& meta,
                  const Json& want_data, const Json& want_run) {
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
  same(meta.data, want_data, "data");
  same(meta.run, want_run, "run");
}

}  // namespace

Trainer::Trainer(const TrainConfig& cfg, const std::optional<std::filesystem::path>& resume)
    : cfg_(cfg),
      seq_len_(resolve_seq_len(cfg)),
      data_(open_data(cfg)),
      sampler_(sampler_config(cfg, seq_len_, data_.size())),
      state_(cfg.model, 0, cfg.model.num_units() - 1) {
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
  compute_ = std::make_unique<StageCompute<CpuKernels>>(cfg.model, sc);
  inputs_.resize(static_cast<std::size_t>(cfg.micro_batch * seq_len_));
  targets_.resize(inputs_.size());
  if (resume) {
    const CheckpointMeta meta = load_checkpoint(*resume, state_);
    const CheckpointMeta want = make_meta();
    check_resume(*resume, meta, want.data, want.run);
    next_step_ = meta.step;
  } else {
    state_.init(cfg.seed);
  }
}

double Trainer::compute_gradients() {
  const std::vector<SampleRef> batch = sampler_.batch(next_step_);
  const std::int64_t T = seq_len_;
  const double scale = 1.0 / static_cast<double>(cfg_.global_batch * T);
  state_.zero_grads();
  double loss = 0;
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
    loss += compute_->forward(0, state_.params(), mb, nullptr, nullptr);
    compute_->backward(0, state_.params(), state_.grads(), mb, nullptr, nullptr);
  }
  return loss;
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
  CheckpointMeta m;
  m.model = cfg_.model;
  m.step = next_step_;
  m.schedule = Json{{"lr_max", cfg_.lr.lr_max},
                    {"lr_min", cfg_.lr.lr_min},
                    {"warmup_steps", cfg_.lr.warmup_steps},
                    {"total_steps", cfg_.lr.total_steps},
                    {"beta1", cfg_.adamw.beta1},
                    {"beta2", cfg_.adamw.beta2},
                    {"eps", cfg_.adamw.eps},
                    {"weight_decay", cfg_.adamw.weight_decay},
                    {"grad_clip", cfg_.adamw.grad_clip}};
  m.data = Json{{"file", cfg_.data.string()},
                {"num_tokens", data_.size()},
                {"seq_len", seq_len_},
                {"global_batch", cfg_.global_batch},
                {"seed", cfg_.seed},
                {"shuffle", cfg_.shuffle},
                {"next_sample", next_step_ * cfg_.global_batch}};
  m.run = Json{{"seed", cfg_.seed}, {"dropout", cfg_.dropout}};
  return m;
}

std::filesystem::path Trainer::save_checkpoint(const std::filesystem::path& dir) const {
  const std::filesystem::path path = checkpoint_path(dir, next_step_);
  write_checkpoint(path, state_, make_meta());
  return path;
}

}  // namespace eth
