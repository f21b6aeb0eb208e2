// Global sampler and plan splitting. See sampler.h.
#include "data/sampler.h"

#include <numeric>
#include <string>

#include "core/error.h"
#include "data/tokenize.h"

namespace eth {

GlobalSampler::GlobalSampler(const SamplerConfig& config) : config_(config) {
  ETH_CHECK(config.seq_len >= 1 && config.global_batch >= 1, "sampler: T and GBS must be >= 1");
  if (config.num_tokens < config.seq_len + 1) {
    throw InputError("data", "", "",
                     "too few tokens: " + std::to_string(config.num_tokens) +
                         ", a sample of sequence length " + std::to_string(config.seq_len) +
                         " needs " + std::to_string(config.seq_len + 1));
  }
  num_windows_ = (config.num_tokens - 1) / config.seq_len;
}

void GlobalSampler::load_epoch(std::int64_t epoch) {
  if (epoch == epoch_) return;
  order_.resize(static_cast<std::size_t>(num_windows_));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  // The epoch's own stream: the seed and the epoch go through splitmix64 once each, so nearby
  // seeds or epochs give unrelated orders.
  SplitMix64 keyer(config_.seed);
  SplitMix64 rng(keyer.next() ^ SplitMix64(static_cast<std::uint64_t>(epoch)).next());
  for (std::size_t i = order_.size() - 1; i > 0; --i) {
    std::swap(order_[i], order_[rng.below(i + 1)]);
  }
  epoch_ = epoch;
}

std::int64_t GlobalSampler::offset(std::int64_t global_index) {
  ETH_CHECK(global_index >= 0, "sampler: negative sample index");
  const std::int64_t window = global_index % num_windows_;
  if (!config_.shuffle) return window * config_.seq_len;
  load_epoch(global_index / num_windows_);
  return order_[static_cast<std::size_t>(window)] * config_.seq_len;
}

std::vector<SampleRef> GlobalSampler::batch(std::int64_t step) {
  ETH_CHECK(step >= 0, "sampler: negative step");
  std::vector<SampleRef> out(static_cast<std::size_t>(config_.global_batch));
  for (std::int64_t b = 0; b < config_.global_batch; ++b) {
    const std::int64_t g = step * config_.global_batch + b;
    out[static_cast<std::size_t>(b)] = {g, offset(g)};
  }
  return out;
}

std::vector<SampleRange> split_contiguous(std::int64_t global_batch,
                                          std::span<const std::int64_t> local_batches) {
  std::vector<SampleRange> out;
  std::int64_t begin = 0;
  for (std::size_t p = 0; p < local_batches.size(); ++p) {
    if (local_batches[p] < 0) {
      throw InputError("data", "", "local_batches[" + std::to_string(p) + "]",
                       "expected >= 0, got " + std::to_string(local_batches[p]));
    }
    out.push_back({begin, local_batches[p]});
    begin += local_batches[p];
  }
  if (begin != global_batch) {
    throw InputError("data", "", "local_batches",
                     "must sum to the global batch " + std::to_string(global_batch) + ", got " +
                         std::to_string(begin));
  }
  return out;
}

void gather_sample(std::int32_t* inputs, std::int32_t* targets,
                   TokenSpan tokens, const SampleRef& s, std::int64_t T) {
  ETH_CHECK(s.offset >= 0 && s.offset + T + 1 <= static_cast<std::int64_t>(tokens.size()),
            "sample window past the end of the data");
  // Ids are below the model's vocabulary (checked when the file is opened), so they fit int32.
  const auto o = static_cast<std::size_t>(s.offset);
  for (std::size_t t = 0; t < static_cast<std::size_t>(T); ++t) {
    inputs[t] = static_cast<std::int32_t>(tokens[o + t]);
    targets[t] = static_cast<std::int32_t>(tokens[o + t + 1]);
  }
}

}  // namespace eth
