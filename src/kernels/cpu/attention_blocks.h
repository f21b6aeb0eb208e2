// How the fp32 and bf16 attention kernels (cpu/attention.cpp, cpu/bf16/attention.cpp) split their
// work: rows of the causal T x T matrices in blocks of kRowBlock, and the OpenMP tasks over
// (batch, kv head) and those blocks. Internal to those two files.
#pragma once

#include <cstdint>

#include "kernels/cpu/threads.h"

namespace eth::cpu::attention_detail {

inline constexpr std::int64_t kRowBlock = 64;

// Runs body(b, g, r0) over every (batch, kv head) task and its row blocks r0 in order: one
// OpenMP task per (batch, kv head) when there are at least as many as threads, else one per
// row block too (a micro-batch of one under grouped-query attention has only NKV tasks). The
// row blocks of dK, dV and dPd are independent and each GEMM runs on one thread, so the bytes
// do not depend on the split.
template <typename Body>
void for_kv_row_blocks(std::int64_t B, std::int64_t NKV, std::int64_t T, const Body& body) {
  const std::int64_t tasks = B * NKV, blocks = (T + kRowBlock - 1) / kRowBlock;
  if (tasks >= max_threads() || blocks == 1) {
#pragma omp parallel for schedule(static)
    for (std::int64_t bg = 0; bg < tasks; ++bg) {
      for (std::int64_t r0 = 0; r0 < T; r0 += kRowBlock) body(bg / NKV, bg % NKV, r0);
    }
    return;
  }
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t i = 0; i < tasks * blocks; ++i) {
    const std::int64_t bg = i / blocks;
    body(bg / NKV, bg % NKV, i % blocks * kRowBlock);
  }
}

}  // namespace eth::cpu::attention_detail
