// The fused attention kernels' view of a call once its arguments are checked: where the heads
// sit and the score scale (AttnGeometry), and the dropout key in the form the keep rule reads it
// (AttnDrop). Shared by the CUDA kernels (cuda/attention.cu) and the host-emulated device's
// (emulated/attention.cpp), which run the same algorithm; each checks the arguments and throws
// its own error first. Plain C++, compiled by nvcc and by the host compiler.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/philox.h"

namespace eth::cuda::launch {

struct AttnGeometry {
  std::int64_t T, C, NH, hs;
  std::int64_t W;    // qkv row width, C + 2 NKV hs
  QkvGroups groups;  // where each head's columns sit in a qkv row
  float scale;       // 1 / sqrt(hs)
};

struct AttnDrop {
  std::uint64_t seed;
  std::int64_t step, unit;
  std::uint16_t op;
  std::uint32_t threshold;
  float keep_scale;  // 1 / (1 - p); 0 when p = 0 (no dropout)
  std::int64_t sample0, head0;
};

// NH > 0 dividing C, NKV > 0 dividing NH (the callers' checks).
inline AttnGeometry attn_geometry(std::int64_t T, std::int64_t C, std::int64_t NH,
                                  std::int64_t NKV) {
  const std::int64_t hs = C / NH;
  return {T,
          C,
          NH,
          hs,
          C + 2 * NKV * hs,
          QkvGroups{hs, NH / NKV},
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs)))};
}

// d.p in [0, 1) (the callers' check).
inline AttnDrop attn_drop(const AttnDropout& d) {
  return {d.stream.seed,
          d.stream.step,
          d.stream.unit,
          static_cast<std::uint16_t>(d.stream.op),
          philox::dropout_threshold(d.p),
          d.p > 0.0f ? 1.0f / (1.0f - d.p) : 0.0f,
          d.sample0,
          d.head0};
}

}  // namespace eth::cuda::launch
