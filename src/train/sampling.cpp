// Generation from a checkpoint. See sampling.h.
#include "train/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "kernels/constants.h"
#include "train/checkpoint.h"

namespace eth {

namespace {

// Uniform in [0, 1) from the top 53 bits.
double uniform(SplitMix64& rng) {
  return static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
}

}  // namespace

std::int32_t pick_token(std::span<const float> logits, const GenerateConfig& cfg,
                        SplitMix64& rng) {
  ETH_CHECK(!logits.empty(), "no logits");
  const auto V = static_cast<std::int64_t>(logits.size());
  // Ids by logit, highest first, ties by the lower id: the same order greedy uses.
  std::vector<std::int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const std::int64_t k = cfg.greedy ? 1 : (cfg.top_k > 0 ? std::min(cfg.top_k, V) : V);
  auto before = [&](std::int32_t a, std::int32_t b) {
    const float la = logits[static_cast<std::size_t>(a)], lb = logits[static_cast<std::size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
  if (k == 1) return ids.front();
  if (!(cfg.temperature > 0) || !std::isfinite(cfg.temperature)) {
    throw InputError("sample", "--temperature", "",
                     "expected > 0 (or --greedy), got " + std::to_string(cfg.temperature));
  }
  // Softmax of the k best at the temperature, in double, from the largest (no overflow).
  const double top = logits[static_cast<std::size_t>(ids.front())];
  std::vector<double> w(static_cast<std::size_t>(k));
  double total = 0;
  for (std::int64_t i = 0; i < k; ++i) {
    const auto j = static_cast<std::size_t>(ids[static_cast<std::size_t>(i)]);
    w[static_cast<std::size_t>(i)] = std::exp((logits[j] - top) / cfg.temperature);
    total += w[static_cast<std::size_t>(i)];
  }
  double u = uniform(rng) * total;
  for (std::int64_t i = 0; i < k; ++i) {
    u -= w[static_cast<std::size_t>(i)];
    if (u < 0) return ids[static_cast<std::size_t>(i)];
  }
  return ids[static_cast<std::size_t>(k - 1)];  // rounding left u at the very end
}

TextGenerator::TextGenerator(const std::filesystem::path& path)
    : model_(read_checkpoint_meta(path).model),
      body_(model_, 0, model_.layers),
      head_(model_, model_.layers + 1, model_.layers + 1) {
  load_checkpoint(path, body_);
  load_checkpoint(path, head_);
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = model_.layers;
  sc.max_micro_batch = 1;
  sc.seq_len = model_.seq_len;
  sc.num_slots = 1;
  stage_ = std::make_unique<PrecisionStage>(Precision::Fp32, model_, sc);
  window_.assign(static_cast<std::size_t>(model_.seq_len), 0);
  hidden_.assign(static_cast<std::size_t>(model_.seq_len * model_.hidden), 0.0f);
}

TextGenerator::~TextGenerator() = default;

std::vector<float> TextGenerator::next_logits(std::span<const std::int32_t> context) {
  if (context.empty()) throw InputError("sample", "--prompt", "", "expected at least one token");
  const std::int64_t T = model_.seq_len, C = model_.hidden, V = model_.vocab;
  const std::int64_t n = std::min<std::int64_t>(static_cast<std::int64_t>(context.size()), T);
  const auto first = context.end() - n;
  for (auto it = first; it != context.end(); ++it) {
    if (*it < 0 || *it >= V) {
      throw InputError("sample", "--prompt", "",
                       "token id " + std::to_string(*it) + " is outside the model's vocabulary "
                       "of " + std::to_string(V));
    }
  }
  // The window padded at its end: attention is causal, so position n - 1 never sees the pad.
  std::fill(window_.begin(), window_.end(), 0);
  std::copy(first, context.end(), window_.begin());
  MicroBatch mb;
  mb.size = 1;
  mb.tokens = window_.data();
  stage_->forward(0, body_, mb, nullptr, reinterpret_cast<std::byte*>(hidden_.data()));
  const float* x = hidden_.data() + (n - 1) * C;
  // The head at one position: the model's norm (layer norm at the kernels' epsilon, or RMSNorm
  // at the model's), then the LM head's rows. Tensors by role: a Llama head has no norm bias.
  const UnitSlot& head = head_.layout().unit(model_.layers + 1);
  auto tensor = [&](int role) -> const float* {
    const int i = head.index_of(role);
    return i < 0 ? nullptr : head_.params() + head.tensors[static_cast<std::size_t>(i)].offset;
  };
  const float* lnf_w = tensor(kLnfW);
  const float* lnf_b = tensor(kLnfB);
  const float* wlm = tensor(kLmHeadW);
  const bool rms = model_.norm == NormKind::RmsNorm;
  double mean = 0, var = 0;
  if (!rms) {
    for (std::int64_t c = 0; c < C; ++c) mean += x[c];
    mean /= static_cast<double>(C);
  }
  for (std::int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);
  const double eps = rms ? model_.norm_eps : kLayerNormEps;
  const double rstd = 1.0 / std::sqrt(var / static_cast<double>(C) + eps);
  std::vector<double> y(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) {
    y[static_cast<std::size_t>(c)] = (x[c] - mean) * rstd * lnf_w[c] + (lnf_b ? lnf_b[c] : 0.0);
  }
  std::vector<float> logits(static_cast<std::size_t>(V));
  for (std::int64_t v = 0; v < V; ++v) {
    double dot = 0;
    const float* row = wlm + v * C;
    for (std::int64_t c = 0; c < C; ++c) dot += row[c] * y[static_cast<std::size_t>(c)];
    logits[static_cast<std::size_t>(v)] = static_cast<float>(dot);
  }
  return logits;
}

std::vector<std::int32_t> TextGenerator::generate(std::span<const std::int32_t> prompt,
                                                  const GenerateConfig& cfg) {
  if (cfg.tokens < 0) throw InputError("sample", "--tokens", "", "expected >= 0");
  std::vector<std::int32_t> out(prompt.begin(), prompt.end());
  SplitMix64 rng(cfg.seed);
  for (std::int64_t i = 0; i < cfg.tokens; ++i) {
    const std::vector<float> logits = next_logits(out);
    out.push_back(pick_token(logits, cfg, rng));
  }
  return out;
}

}  // namespace eth
