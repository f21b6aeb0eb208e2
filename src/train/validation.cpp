// Forward-only evaluation over a token file's windows. See validation.h.
#include "train/validation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "data/sampler.h"
#include "train/precision_stage.h"
#include "train/state_backend.h"

namespace eth {

namespace {

std::int64_t eval_seq_len(const ModelSpec& m, const EvalConfig& cfg) {
  return cfg.seq_len == 0 ? m.seq_len : cfg.seq_len;
}

}  // namespace

void check_eval_input(const ModelSpec& m, const TokenFile& data, const EvalConfig& cfg,
                      const std::string& tool) {
  const std::int64_t T = eval_seq_len(m, cfg);
  if (T < 1 || T > m.seq_len) {
    throw InputError(tool, "--seq-len", "",
                     "expected 1.." + std::to_string(m.seq_len) +
                         " (the model's position table), got " + std::to_string(T));
  }
  if (cfg.batch < 1) throw InputError(tool, "--batch", "", "expected >= 1");
  if (cfg.max_batches < 0) throw InputError(tool, "--batches", "", "expected >= 0");
  if (data.size() < T + 1) {
    throw InputError(tool, data.path().string(), "",
                     "too few tokens: " + std::to_string(data.size()) + ", one window of " +
                         std::to_string(T) + " predictions needs " + std::to_string(T + 1));
  }
  if (data.max_token() >= m.vocab) {
    throw InputError(tool, data.path().string(), "",
                     "token id " + std::to_string(data.max_token()) +
                         " is outside the model's vocabulary of " + std::to_string(m.vocab));
  }
}

EvalResult evaluate_loss(const ModelState& state, const TokenFile& data, const EvalConfig& cfg) {
  const ModelSpec& m = state.model();
  check_eval_input(m, data, cfg);
  const std::int64_t T = eval_seq_len(m, cfg);
  const std::int64_t windows_in_file = (data.size() - 1) / T;
  std::int64_t windows = windows_in_file;
  if (cfg.max_batches > 0) windows = std::min(windows, cfg.max_batches * cfg.batch);
  const std::int64_t B = std::min(cfg.batch, windows);

  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = m.num_units() - 1;
  sc.max_micro_batch = B;
  sc.seq_len = T;
  sc.num_slots = 1;
  PrecisionStage compute(state.precision(), m, sc);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B * T)), targets(inputs.size());
  EvalResult r;
  r.seq_len = T;
  // Each batch's loss is its own mean (scale 1 / (b * T)); the total weighs batches by size.
  double sum = 0;
  for (std::int64_t w0 = 0; w0 < windows; w0 += B) {
    const std::int64_t b = std::min(B, windows - w0);
    for (std::int64_t i = 0; i < b; ++i) {
      const SampleRef s{w0 + i, (w0 + i) * T};
      gather_sample(inputs.data() + i * T, targets.data() + i * T, data.tokens(), s, T);
    }
    MicroBatch mb;
    mb.first_sample = w0;
    mb.size = b;
    mb.tokens = inputs.data();
    mb.targets = targets.data();
    mb.loss_scale = 1.0 / static_cast<double>(b * T);
    compute.forward(0, state, mb, nullptr, nullptr);
    sum += compute.take_loss() * static_cast<double>(b);
    ++r.batches;
  }
  r.windows = windows;
  r.tokens = windows * T;
  r.loss = sum / static_cast<double>(windows);
  r.perplexity = std::exp(r.loss);
  return r;
}

ValidationSet::ValidationSet(const ValidationConfig& cfg, const ModelSpec& model)
    : cfg_(cfg), data_(TokenFile::open(cfg.data)) {
  if (cfg.every < 0) throw InputError("train", "--val-every", "", "expected >= 0");
  EvalConfig e = cfg.eval;
  if (e.max_batches < 0) throw InputError("train", "--val-batches", "", "expected >= 0");
  check_eval_input(model, data_, e, "train");
}

double ValidationSet::loss(const ModelState& whole) const {
  if (whole.backend().host_visible()) return evaluate_loss(whole, data_, cfg_.eval).loss;
  // A state in device memory: its weights evaluated on the host, in its precision.
  const ModelSpec& m = whole.model();
  ModelState host(m, 0, m.num_units() - 1, 1, 0, whole.precision());
  whole.backend().download(host.params(), whole.params(), whole.numel());
  host.refresh_compute_copy();
  return evaluate_loss(host, data_, cfg_.eval).loss;
}

}  // namespace eth
