// Per-unit timing with StageCompute over one-unit ranges. See measure_profile.h.
#include "train/measure_profile.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/limits.h"
#include "data/tokenize.h"
#include "kernels/cpu/bf16/convert.h"
#include "kernels/cpu/optimizer.h"
#include "kernels/cpu/threads.h"
#include "kernels/rng.h"
#include "model/arithmetic.h"
#include "train/optimizer.h"
#include "train/precision_stage.h"

namespace eth {

namespace {

using Clock = std::chrono::steady_clock;

// What an op costs, in ms: on the CPU on one thread this thread's CPU time, the measure the
// runtime's emulation stretches (runtime/emulation.h) and one a shared machine's waits for a
// core do not inflate; on several threads the wall time. The emulated device runs every call to
// completion on the calling thread, so it is timed the same way. On cuda the wall time from a
// synchronized start to the end of everything queued (kernels return before they finish).
class OpTimer {
 public:
  explicit OpTimer(ComputeDevice d)
      : device_(d), cpu_(d != ComputeDevice::Cuda && cpu::max_threads() == 1) {
    restart();
  }
  void restart() {
    synchronize_device(device_);
    wall0_ = Clock::now();
    if (cpu_) cpu0_ = thread_cpu_ms();
  }
  double ms() const {
    synchronize_device(device_);
    if (cpu_) return thread_cpu_ms() - cpu0_;
    return std::chrono::duration<double, std::milli>(Clock::now() - wall0_).count();
  }

 private:
  static double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
  }
  ComputeDevice device_;
  bool cpu_;
  Clock::time_point wall0_;
  double cpu0_ = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::int64_t resolved_seq(const MeasureOptions& opt) {
  return opt.seq_len == 0 ? opt.model.seq_len : opt.seq_len;
}

// The size checks (everything but memory), shared by the public check and measure_profile.
void check_sizes(const MeasureOptions& opt) {
  const ModelSpec& m = opt.model;
  const std::int64_t T = resolved_seq(opt);
  if (opt.micro_batch < 1) {
    throw InputError("profile", "--micro-batch-sizes", "",
                     "expected sizes >= 1, got " + std::to_string(opt.micro_batch));
  }
  if (T < 1 || T > m.seq_len) {
    throw InputError("profile", "--seq", "",
                     "expected 1.." + std::to_string(m.seq_len) + " (model " + m.name +
                         "'s position table), got " + std::to_string(T));
  }
  if (opt.threads < 0) {
    throw InputError("profile", "--threads", "",
                     "expected >= 1 (0: the caller's), got " + std::to_string(opt.threads));
  }
  if (opt.optimizer_neighbours < 0) {
    throw InputError("profile", "--optimizer-neighbours", "",
                     "expected >= 0, got " + std::to_string(opt.optimizer_neighbours));
  }
  if (!(opt.dropout >= 0 && opt.dropout < 1)) {
    throw InputError("profile", "--dropout", "",
                     "expected a probability in [0, 1), got " + std::to_string(opt.dropout));
  }
  if (!runtime_precision(opt.precision)) {
    throw InputError("profile", "--precision", "", "expected fp32 or bf16");
  }
  if (is_gpu_device(opt.device) && opt.precision != Precision::Bf16) {
    throw InputError("profile", "--precision", "",
                     std::string("expected bf16 on device ") + compute_device_name(opt.device) +
                         " (the GPU kernel set's only precision), got " +
                         std::string(precision_name(opt.precision)));
  }
  if (is_gpu_device(opt.device) && opt.optimizer_neighbours > 0) {
    throw InputError("profile", "--optimizer-neighbours", "",
                     std::string("expected 0 on device ") + compute_device_name(opt.device) +
                         " (a GPU's optimizer step streams its own memory), got " +
                         std::to_string(opt.optimizer_neighbours));
  }
}

StageComputeConfig unit_config(const MeasureOptions& opt, std::int64_t u) {
  StageComputeConfig cfg;
  cfg.first_unit = cfg.last_unit = u;
  cfg.max_micro_batch = opt.micro_batch;
  cfg.seq_len = resolved_seq(opt);
  cfg.dropout = opt.dropout;
  cfg.seed = opt.seed;
  return cfg;
}

struct Timing {
  double forward_ms = 0;
  double backward_ms = 0;
};

// Streams 64 MiB (twice the largest last-level cache seen on these machines) through the
// caches, so the next op finds its weights and activations in memory, as a step's other work
// (or another rank sharing the core) would have left them.
class CacheEvictor {
 public:
  CacheEvictor() : buffer_(std::size_t{16} << 20, 1.0f) {}
  ~CacheEvictor() {
    if (sink_ == -1) std::abort();  // keeps the passes from being optimized away
  }
  CacheEvictor(const CacheEvictor&) = delete;
  CacheEvictor& operator=(const CacheEvictor&) = delete;
  void evict() {
    for (float& x : buffer_) x += 1.0f;
    sink_ += static_cast<double>(buffer_[static_cast<std::size_t>(passes_++ % 4096)]);
  }

 private:
  std::vector<float> buffer_;
  double sink_ = 0;
  std::int64_t passes_ = 0;
};

// Inputs of one unit: tokens and targets for the ends (host arrays: the stage uploads them), a
// random activation in between (in the measured precision's element type, on the measured
// device); the evictor when ops are timed cold.
struct UnitInputs {
  std::vector<std::int32_t> tokens, targets;
  DeviceBytes x, dy, dx, out;
  CacheEvictor* cold = nullptr;
};

Timing time_unit(PrecisionStage& sc, ModelState& st, UnitInputs& in,
                 const MeasureOptions& opt, std::int64_t T) {
  MicroBatch mb;
  mb.size = opt.micro_batch;
  mb.tokens = in.tokens.data();
  mb.targets = in.targets.data();
  mb.loss_scale = 1.0 / static_cast<double>(opt.micro_batch * T);
  const bool has_head = sc.config().last_unit == st.model().num_units() - 1;
  const bool has_embed = sc.config().first_unit == 0;
  std::vector<double> fwd, bwd;
  for (int r = 0; r < opt.warmup + opt.repeats; ++r) {
    if (in.cold != nullptr) in.cold->evict();
    OpTimer t(opt.device);
    sc.forward(0, st, mb, has_embed ? nullptr : in.x.data(), has_head ? nullptr : in.out.data());
    const double f = t.ms();
    if (in.cold != nullptr) in.cold->evict();
    t.restart();
    sc.backward(0, st, mb, has_head ? nullptr : in.dy.data(), has_embed ? nullptr : in.dx.data());
    const double b = t.ms();
    (void)sc.take_loss();  // the losses are not what is measured; keep the sum from growing
    if (r >= opt.warmup) {
      fwd.push_back(f);
      bwd.push_back(b);
    }
  }
  return {median(fwd), median(bwd)};
}

// Restores the caller's OpenMP thread count when measuring ends (or throws).
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(cpu::max_threads()) {
    if (threads > 0) cpu::set_max_threads(threads);
  }
  ~ThreadScope() { cpu::set_max_threads(saved_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int saved_;
};

// Elements of each of the four arrays a neighbour streams: 64 MiB in all, past any L3 here.
constexpr std::int64_t kNeighbourElements = std::int64_t{4} << 20;

// Threads that each stream AdamW over buffers of their own from the moment the timed op starts
// (go()) until it ends (stop()): the node's other devices taking their optimizer steps at the
// same moment, as every rank does right after the gradient sync. The step is bound by memory
// bandwidth, which the node's cores share: with one neighbour in lockstep it measured 3.7 ms
// against 2.7 alone (bench-4x256, bf16), what the runs' traces showed (3.5-4.6 ms).
class OptimizerNeighbours {
 public:
  explicit OptimizerNeighbours(int count) {
    for (int k = 0; k < count; ++k) threads_.emplace_back([this] { work(); });
  }
  ~OptimizerNeighbours() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  OptimizerNeighbours(const OptimizerNeighbours&) = delete;
  OptimizerNeighbours& operator=(const OptimizerNeighbours&) = delete;

  // Starts every neighbour and returns once each is streaming.
  void go() {
    if (threads_.empty()) return;
    std::unique_lock<std::mutex> lock(mu_);
    ++round_;
    streaming_.store(round_);
    cv_.notify_all();
    cv_.wait(lock, [this] { return started_ == threads_.size(); });
    started_ = 0;
  }
  void stop() { streaming_.store(0); }

 private:
  void work() {
    cpu::set_max_threads(1);
    const auto n = static_cast<std::size_t>(kNeighbourElements);
    std::vector<float> p(n, 1.0f), m(n, 0.0f), v(n, 0.0f), g(n, 1e-3f);
    cpu::AdamWScalars sc;
    sc.lr = 1e-4f;
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return quit_ || round_ != seen; });
        if (quit_) return;
        seen = round_;
        ++started_;
      }
      cv_.notify_all();
      // Until stop(), or a stop() and the next go() while this pass ran (rounds count from 1).
      while (streaming_.load() == seen) cpu::adamw_update(p.data(), m.data(), v.data(), g.data(),
                                                kNeighbourElements, sc);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> streaming_{0};  // the round being streamed; 0: none
  bool quit_ = false;
  std::uint64_t round_ = 0;
  std::size_t started_ = 0;
};

// The whole model's optimizer step as the trainers run it: the gradient norm (one pass over the
// gradients) and AdamW (parameters, gradients and both moments), over the whole model's state
// from memory, not from cache (always cold: a step's forward and backward would have evicted
// the state), while opt.optimizer_neighbours other cores stream their own steps. Timing one
// unit at a time instead keeps it in cache and reads 5-10x too fast.
double measure_optimizer_ms(const MeasureOptions& opt, CacheEvictor* cold) {
  ModelState st(opt.model, 0, opt.model.num_units() - 1, 1, 0, opt.precision,
                state_backend_maker(opt.device));
  st.init(opt.seed);
  OptimizerNeighbours neighbours(opt.optimizer_neighbours);
  std::vector<double> times;
  double sink = 0;
  for (int r = 0; r < opt.warmup + opt.repeats; ++r) {
    if (cold != nullptr) cold->evict();
    neighbours.go();
    const OpTimer t(opt.device);
    sink += grad_sum_squares(st);
    adamw_update(st, AdamWConfig{}, 1e-4, r, 1.0);
    const double ms = t.ms();
    neighbours.stop();
    if (r >= opt.warmup) times.push_back(ms);
  }
  if (sink == -1) std::abort();  // keeps the norm from being optimized away
  return median(times);
}

// A time (or difference of times) under the timer's resolution is noise, and a profile refuses
// positive times below limits::kMinTimeMs (a difference of two close medians can land there):
// it costs nothing measurable.
double measurable(double ms) { return ms < limits::kMinTimeMs ? 0.0 : ms; }

UnitProfile measure_unit(const MeasureOptions& opt, std::int64_t u, UnitInputs& in) {
  const ModelSpec& m = opt.model;
  const std::int64_t T = resolved_seq(opt);
  ModelState st(m, u, u, 1, 0, opt.precision, state_backend_maker(opt.device));
  st.init(opt.seed);
  const StageComputeConfig cfg = unit_config(opt, u);
  UnitProfile up;
  up.params = unit_params(m, u);
  PrecisionStage sc(opt.precision, m, cfg, nullptr, opt.device);
  const Timing base = time_unit(sc, st, in, opt, T);
  up.forward_ms = measurable(base.forward_ms);
  up.backward_ms = measurable(base.backward_ms);
  up.activation = sc.activation_bytes(u);
  if (opt.recompute_times) {
    for (int k = 0; k < kNumRecomputeOps; ++k) {
      const auto op = static_cast<RecomputeOp>(k);
      // Classes that hold nothing here (all of them outside blocks except the full unit, the
      // dropout classes without dropout) cost nothing to recompute.
      const bool holds =
          op == RecomputeOp::Unit || up.activation.op[static_cast<std::size_t>(k)] > 0;
      if (!holds) continue;
      StageComputeConfig rc_cfg = cfg;
      rc_cfg.recompute.add(op);
      PrecisionStage rc(opt.precision, m, rc_cfg, nullptr, opt.device);
      const Timing t = time_unit(rc, st, in, opt, T);
      up.recompute_ms[static_cast<std::size_t>(k)] =
          measurable(t.backward_ms - base.backward_ms);
    }
  }
  return up;
}

}  // namespace

double process_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      // "VmRSS:    123456 kB"
      return std::strtod(line.c_str() + 6, nullptr) * 1024.0;
    }
  }
  return 0;
}

double measure_peak_bytes(const MeasureOptions& opt) {
  check_sizes(opt);
  const ModelSpec& m = opt.model;
  const double n = static_cast<double>(opt.micro_batch * resolved_seq(opt));
  double most = 0;
  // Masters, gradients and both moments in fp32, and the bf16 compute copy in bf16.
  const auto state_bytes = [&](std::int64_t params) {
    return 4.0 * static_cast<double>(arena_bytes<float>(params)) +
           (opt.precision == Precision::Bf16 ? arena_bytes<Bf16>(params) : 0.0);
  };
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    const double state = state_bytes(unit_params(m, u));
    const double arena = static_cast<double>(
        PrecisionStage::planned_arena_bytes(opt.precision, m, unit_config(opt, u), opt.device));
    most = std::max(most, state + 2.0 * arena);
  }
  // The optimizer step holds the whole model's state, and each neighbour its four arrays.
  const double whole = state_bytes(total_params(m)) +
                       opt.optimizer_neighbours * 16.0 * static_cast<double>(kNeighbourElements);
  most = std::max(most, whole);
  const double evictor = opt.cold_cache && !is_gpu_device(opt.device) ? 64.0 * 1024 * 1024 : 0;
  return most + 4.0 * n * static_cast<double>(m.hidden) * precision_bytes(opt.precision).activation +
         evictor;
}

void check_measure_options(const MeasureOptions& opt, double memory_limit_bytes) {
  check_sizes(opt);
  const double need = measure_peak_bytes(opt);
  if (need > memory_limit_bytes) {
    throw InputError("profile", "--micro-batch-sizes", "",
                     "micro-batch size " + std::to_string(opt.micro_batch) + " at sequence " +
                         std::to_string(resolved_seq(opt)) + " needs " +
                         std::to_string(std::llround(need / 1e6)) + " MB to measure, more than " +
                         std::to_string(std::llround(memory_limit_bytes / 1e6)) +
                         " MB available; use smaller sizes or --seq");
  }
}

ProfileEntry measure_profile(const MeasureOptions& opt) {
  check_sizes(opt);
  ETH_CHECK(opt.repeats >= 1 && opt.warmup >= 0, "measure_profile: need at least one repeat");
  const ModelSpec& m = opt.model;
  const std::int64_t T = resolved_seq(opt);
  const bool gpu = is_gpu_device(opt.device);
  const ThreadScope threads(opt.threads);
  ProfileEntry e;
  // On a GPU the device memory held besides the model: read before the first buffer, and again
  // below once every buffer is freed (the matmul library's workspace appears on first use).
  const double baseline_given = opt.process_baseline_bytes;
  if (baseline_given >= 0) {
    e.process_baseline_bytes = baseline_given;
  } else {
    e.process_baseline_bytes =
        gpu ? device_memory(opt.device).in_use_bytes : process_resident_bytes();
  }
  e.key = ProfileKey{opt.device_type, 1, opt.micro_batch};
  e.seq_len = T;
  e.source = "measured";
  e.precision = opt.precision;
  {
    const std::int64_t n = opt.micro_batch * T;
    UnitInputs in;
    SplitMix64 rng(opt.seed);
    in.tokens.resize(static_cast<std::size_t>(n));
    in.targets.resize(static_cast<std::size_t>(n));
    for (auto& t : in.tokens)
      t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(m.vocab)));
    for (auto& t : in.targets)
      t = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(m.vocab)));
    const std::int64_t nc = n * m.hidden;
    std::vector<float> x(static_cast<std::size_t>(nc)), dy(x.size());
    normal_fill(x.data(), RngStream{opt.seed, 1, 0, RngOp::Init}, 1.0f, 0, 0, nc);
    normal_fill(dy.data(), RngStream{opt.seed, 1, 0, RngOp::Init}, 1e-3f, 1, 0, nc);
    const std::size_t bytes = static_cast<std::size_t>(nc) *
                              static_cast<std::size_t>(precision_bytes(opt.precision).activation);
    for (auto* b : {&in.x, &in.dy, &in.dx, &in.out}) *b = DeviceBytes(opt.device, bytes);
    if (opt.precision == Precision::Bf16) {
      std::vector<Bf16> h(static_cast<std::size_t>(nc));
      cpu::bf16::convert_to_bf16(h.data(), x.data(), nc);
      in.x.upload(h.data(), bytes);
      cpu::bf16::convert_to_bf16(h.data(), dy.data(), nc);
      in.dy.upload(h.data(), bytes);
    } else {
      in.x.upload(x.data(), bytes);
      in.dy.upload(dy.data(), bytes);
    }
    // The host's caches only: a GPU's are not the host's.
    std::optional<CacheEvictor> evictor;
    if (!gpu) evictor.emplace();
    if (opt.cold_cache && evictor) in.cold = &*evictor;
    for (std::int64_t u = 0; u < m.num_units(); ++u) e.units.push_back(measure_unit(opt, u, in));
    e.optimizer_ms = measure_optimizer_ms(opt, evictor ? &*evictor : nullptr);
  }
  if (gpu && baseline_given < 0) {
    e.process_baseline_bytes =
        std::max(e.process_baseline_bytes, device_memory(opt.device).in_use_bytes);
  }
  return e;
}

}  // namespace eth
