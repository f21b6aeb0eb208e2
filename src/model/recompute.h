// The operators whose saved activations a stage may drop in forward and recompute in backward,
// as a small value set. Names are the ones plans and profiles use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace eth {

// Each operator class names the activations kept for one operator's backward (docs/profile.md):
//   qkv          Q, K, V projections (needed by QK^T and by score x V)
//   attn_score   the dropped-out attention probabilities (needed by score x V)
//   attn_softmax the softmax output (needed by the softmax backward)
//   attn_dropout the attention dropout mask
//   mlp_act      the GELU output (needed by the second MLP matmul)
//   unit         everything but the unit's input: full recompute of the unit
enum class RecomputeOp : std::uint8_t { Qkv, AttnScore, AttnSoftmax, AttnDropout, MlpAct, Unit };
inline constexpr int kNumRecomputeOps = 6;

std::string_view recompute_op_name(RecomputeOp op);
std::optional<RecomputeOp> parse_recompute_op(std::string_view name);
std::string recompute_op_names();  // "qkv, attn_score, ..." for error messages

class RecomputeSet {
 public:
  RecomputeSet() = default;
  static RecomputeSet from_bits(std::uint8_t bits) { RecomputeSet s; s.bits_ = bits; return s; }
  static RecomputeSet all_ops();  // the five operator classes (not Unit)

  bool has(RecomputeOp op) const { return bits_ & bit(op); }
  void add(RecomputeOp op) { bits_ = static_cast<std::uint8_t>(bits_ | bit(op)); }
  bool empty() const { return bits_ == 0; }
  bool full_unit() const { return has(RecomputeOp::Unit); }
  std::uint8_t bits() const { return bits_; }
  std::vector<RecomputeOp> ops() const;
  std::vector<std::string> names() const;
  bool operator==(const RecomputeSet&) const = default;

 private:
  static std::uint8_t bit(RecomputeOp op) {
    return static_cast<std::uint8_t>(1u << static_cast<unsigned>(op));
  }
  std::uint8_t bits_ = 0;
};

}  // namespace eth
