// Helpers shared by the trainer tests: small models, temporary folders, token files. Test-only.
#pragma once

#include <omp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "model/model_spec.h"
#include "test_util.h"
#include "train/stage_compute.h"
#include "train/trainer.h"

namespace eth::test {

// Two blocks, every dimension small but none equal to another (so a swapped dimension shows).
inline ModelSpec small_model() { return ModelSpec{"small", 2, 16, 2, 8, 32, 48}; }

inline std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() /
           ("eth_train_test_" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

inline std::vector<std::int32_t> random_tokens(std::uint64_t seed, std::size_t n, std::int64_t V) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> d(0, V - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = static_cast<std::int32_t>(d(gen));
  return v;
}

// A micro-batch of B samples at step 5 starting at global sample 40 (keys its dropout masks),
// its loss the mean over its B * T tokens.
inline MicroBatch micro_batch(const std::vector<std::int32_t>& tokens,
                              const std::vector<std::int32_t>& targets, std::int64_t B,
                              std::int64_t T) {
  MicroBatch mb;
  mb.step = 5;
  mb.first_sample = 40;
  mb.size = B;
  mb.tokens = tokens.data();
  mb.targets = targets.data();
  mb.loss_scale = 1.0 / static_cast<double>(B * T);
  return mb;
}

inline std::filesystem::path synthetic_file(const std::filesystem::path& dir, std::int64_t tokens,
                                            std::int64_t vocab, std::uint64_t seed = 1) {
  SyntheticSpec s;
  s.num_tokens = tokens;
  s.vocab = vocab;
  s.seed = seed;
  const auto path = dir / "data.bin";
  write_token_file(path, synthetic_tokens(s));
  return path;
}

// Runs a scope on one OpenMP thread. For the tests that call thousands of tiny kernels: on a
// shared 2-core machine each parallel region's barrier can wait a whole scheduler slice, which
// turns seconds into minutes. Results do not depend on the thread count (tests/kernels checks
// that), so nothing is lost.
class OneThread {
 public:
  OneThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(saved_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int saved_;
};

// A short fp32 run of `m` on `data`: global batch 4 in micro-batches of 2, lr 1e-2 decaying to
// 1e-3 over `steps`, seed 5.
inline TrainConfig short_run(const ModelSpec& m, const std::filesystem::path& data,
                             std::int64_t steps) {
  TrainConfig c;
  c.model = m;
  c.data = data;
  c.steps = steps;
  c.global_batch = 4;
  c.micro_batch = 2;
  c.lr = LrSchedule{1e-2, 1e-3, 0, steps};
  c.seed = 5;
  return c;
}

using eth::test::error_of;
using eth::test::slurp;

}  // namespace eth::test
