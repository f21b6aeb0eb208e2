// The deterministic global sampler: step i's global batch is a fixed list of GBS samples, each a
// window of T + 1 tokens (T inputs, T shifted targets), that depends only on (token count, T,
// GBS, seed) and never on the plan. Any plan then takes contiguous chunks of that list per
// pipeline (split_contiguous), so every plan trains on exactly the same samples.
// Not a loader: callers copy the tokens out of a TokenFile themselves.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/token_file.h"

namespace eth {

struct SamplerConfig {
  std::int64_t num_tokens = 0;    // tokens in the data file
  std::int64_t seq_len = 0;       // T
  std::int64_t global_batch = 0;  // GBS, samples per step
  std::uint64_t seed = 0;
  bool shuffle = true;  // false: windows in file order (for debugging and tests)
};

// One sample of a global batch. Global sample index g = step * GBS + position in the batch; it
// keys dropout masks, so it must be the same under every plan.
struct SampleRef {
  std::int64_t global_index = 0;
  std::int64_t offset = 0;  // first token; the sample is tokens [offset, offset + T + 1)
};

// The data are cut into W = floor((N - 1) / T) non-overlapping windows starting at multiples of
// T. Epoch e visits every window once in a random order keyed by (seed, e); global sample g is
// window perm_{g / W}(g % W). So samples never repeat within an epoch, and an epoch boundary may
// fall inside a batch.
class GlobalSampler {
 public:
  // Throws InputError("data", "", ...) when the data hold fewer than T + 1 tokens.
  explicit GlobalSampler(const SamplerConfig& config);

  const SamplerConfig& config() const { return config_; }
  std::int64_t num_windows() const { return num_windows_; }
  // Token offset of global sample g. Not thread-safe (caches the current epoch's order).
  std::int64_t offset(std::int64_t global_index);
  std::vector<SampleRef> batch(std::int64_t step);

 private:
  void load_epoch(std::int64_t epoch);
  SamplerConfig config_;
  std::int64_t num_windows_ = 0;
  std::int64_t epoch_ = -1;
  std::vector<std::int64_t> order_;  // window order of epoch_ (empty when not shuffling)
};

// Contiguous chunks of a global batch, one per pipeline: chunk p is [begin, begin + size) with
// sizes local_batches[p] in order. Throws InputError when the sizes do not sum to global_batch.
struct SampleRange {
  std::int64_t begin = 0;
  std::int64_t size = 0;
};
std::vector<SampleRange> split_contiguous(std::int64_t global_batch,
                                          std::span<const std::int64_t> local_batches);

// Copies sample `s`'s T inputs and T targets out of `tokens`:
//   inputs (T), targets (T)
void gather_sample(std::int32_t* inputs, std::int32_t* targets,
                   TokenSpan tokens, const SampleRef& s, std::int64_t T);

}  // namespace eth
