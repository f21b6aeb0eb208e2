// The numeric precision of training, and what it costs: the precision a run trains in (`eth
// train --precision`), the one a profile was measured in, and the bytes per parameter and per
// element that the memory and communication models charge for it. One table, read by the
// predictor, the planner and the runtime's docs alike (kernels/README.md, "Precision", says why
// each buffer has its type). Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace eth {

enum class Precision : std::uint8_t {
  Fp32,     // ETH's runtime: fp32 weights, activations, gradients and Adam moments
  Bf16,     // ETH's runtime: bf16 compute copy and activations; fp32 gradients, masters, moments
  Mixed16,  // the paper's GPU training: 16-bit weights, gradients and activations, fp32 masters
            // and moments. What analytic and Metis profiles describe; ETH's runtime cannot run it.
};

// Bytes per parameter (per device holding it) and per element moved, in one precision.
struct PrecisionBytes {
  double weights = 0;          // the weights the kernels read
  double gradients = 0;        // parameter gradients (accumulated over micro-batches)
  double optimizer_state = 0;  // fp32 master weights where they are separate, and the 2 moments
  double activation = 0;       // an activation or activation-gradient element between stages
  double gradient_element = 0;  // a gradient element in the all-reduces across pipelines
  double tp_element = 0;        // an element of a tensor-parallel all-reduce (partial sums)
  constexpr double per_parameter() const { return weights + gradients + optimizer_state; }
};

constexpr PrecisionBytes precision_bytes(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return {4, 4, 8, 4, 4, 4};
    case Precision::Bf16:
      // fp32 gradients and fp32 tp partial sums: rounding once, where one process rounds.
      return {2, 4, 12, 2, 4, 4};
    case Precision::Mixed16:
      break;
  }
  return {2, 2, 12, 2, 2, 2};
}

constexpr std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32:
      return "fp32";
    case Precision::Bf16:
      return "bf16";
    case Precision::Mixed16:
      break;
  }
  return "mixed16";
}

// "fp32", "bf16", "mixed16"; nullopt for anything else.
constexpr std::optional<Precision> parse_precision(std::string_view s) {
  for (Precision p : {Precision::Fp32, Precision::Bf16, Precision::Mixed16}) {
    if (s == precision_name(p)) return p;
  }
  return std::nullopt;
}

// The precisions ETH's CPU runtime trains in (--precision): fp32 and bf16.
constexpr bool runtime_precision(Precision p) { return p != Precision::Mixed16; }

}  // namespace eth
