// Numeric constants shared by the reference and the fast kernels, so both compute the same
// function. Not tunables: changing one changes the model.
#pragma once

namespace eth {

inline constexpr double kLayerNormEps = 1e-5;
// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr double kGeluSqrt2OverPi = 0.79788456080286535587989211986876;
inline constexpr double kGeluCubic = 0.044715;

}  // namespace eth
