// The CPU's arithmetic peak, measured now: independent fused multiply-adds (fp32) and bf16 dot
// products (VDPBF16PS, where the CPU has it) in registers, on every bench thread at once. It is
// the ceiling of any implementation's GFLOP/s on this machine, so a bench can say when a target
// ratio against another framework is above what the hardware allows. Dispatches on the running
// CPU (cpu_features), never on the build machine's.
#pragma once

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <sys/sysinfo.h>

#include <chrono>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace bench {

namespace peak_detail {

constexpr long kIterations = 20'000'000;  // ~0.1-0.2 s a thread on the CPUs seen

// The sum of every lane of the accumulators (_mm512_reduce_add_ps trips GCC 12's
// uninitialized-use warning inside its own header).
__attribute__((target("avx512f"))) inline float sum_lanes(const __m512 (&a)[12]) {
  __m512 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, a[k]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float t = 0;
  for (float l : lanes) t += l;
  return t;
}

// 12 independent accumulators: more than the FMA latency x pipes of the CPUs seen, so the loop
// runs at issue rate. Returns a value derived from them (kept live).
__attribute__((target("avx512f,avx512bf16"))) inline float bf16_dot_loop() {
  __m512 a[12];
  for (__m512& r : a) r = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = x;  // bf16 1.0
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12  // the accumulators must stay in registers: spilled, the loop runs at half
    for (__m512& r : a) r = _mm512_dpbf16_ps(r, x, y);
  }
  return sum_lanes(a);
}

__attribute__((target("avx512f"))) inline float fp32_fma512_loop() {
  __m512 a[12];
  for (__m512& r : a) r = _mm512_setzero_ps();
  const __m512 u = _mm512_set1_ps(1.0001f), v = _mm512_set1_ps(0.9999f);
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (__m512& r : a) r = _mm512_fmadd_ps(u, v, r);
  }
  return sum_lanes(a);
}

__attribute__((target("avx2,fma"))) inline float fp32_fma256_loop() {
  __m256 a[12];
  for (__m256& r : a) r = _mm256_setzero_ps();
  const __m256 u = _mm256_set1_ps(1.0001f), v = _mm256_set1_ps(0.9999f);
  for (long i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
    for (__m256& r : a) r = _mm256_fmadd_ps(u, v, r);
  }
  alignas(32) float lanes[8];
  __m256 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, a[k]);
  _mm256_store_ps(lanes, s);
  float t = 0;
  for (float l : lanes) t += l;
  return t;
}

// Runs `loop` on `threads` threads at once, thread t on CPU t mod the CPUs online (an OpenMP
// runtime may have bound the calling thread to one CPU, and new threads inherit that); flop/s
// over the wall time of them all.
inline double run_on(int threads, float (*loop)(), double flops_per_iteration) {
  std::vector<std::thread> pool;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  const int cpus = std::max(1, get_nprocs());
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(t % cpus, &one);
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);  // best effort
      sink[static_cast<std::size_t>(t)] = loop();
    });
  }
  for (std::thread& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float keep = 0;
  for (float v : sink) keep = keep + v;
  return static_cast<double>(threads) * static_cast<double>(kIterations) * flops_per_iteration / s;
}

}  // namespace peak_detail

struct ArithmeticPeak {
  double fp32_flops = 0;  // flop/s on all the threads together
  double bf16_flops = 0;  // 0: no bf16 dot-product instructions
  const char* fp32_instr = "";
};

// Best of three tries (a try that shared a core with something else reads low).
inline ArithmeticPeak measure_arithmetic_peak(int threads) {
  using namespace peak_detail;
  const eth::cpu::CpuFeatures& f = eth::cpu::cpu_features();
  ArithmeticPeak p;
  for (int r = 0; r < 3; ++r) {
    if (f.avx512f) {
      p.fp32_instr = "VFMADD zmm";
      p.fp32_flops = std::max(p.fp32_flops, run_on(threads, fp32_fma512_loop, 12.0 * 32));
    } else if (f.avx2 && f.fma) {
      p.fp32_instr = "VFMADD ymm";
      p.fp32_flops = std::max(p.fp32_flops, run_on(threads, fp32_fma256_loop, 12.0 * 16));
    }
    if (f.avx512_bf16) p.bf16_flops = std::max(p.bf16_flops, run_on(threads, bf16_dot_loop, 12.0 * 64));
  }
  return p;
}

}  // namespace bench
