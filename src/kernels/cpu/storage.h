// Element access shared by the fp32 and bf16 kernels: an element-wise kernel is one template
// over its storage types that widens every element to float when it reads it (`widen`) and
// rounds when it stores (`narrow<T>`). For float both are the identity, so the fp32
// instantiation is the fp32 kernel, bit for bit; for Bf16 they are kernels/bf16.h's conversions.
// Internal linkage, as vec_math.h, for the same reason (-march=native translation units).
#pragma once

#include <type_traits>

#include "kernels/bf16.h"

namespace eth::cpu {
namespace {

inline float widen(float x) { return x; }
inline float widen(Bf16 x) { return float_from_bf16(x); }

template <typename T>
inline T narrow(float x) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, Bf16>);
  if constexpr (std::is_same_v<T, Bf16>) {
    return bf16_from_float(x);
  } else {
    return x;
  }
}

}  // namespace
}  // namespace eth::cpu
