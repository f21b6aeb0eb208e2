#include "model/recompute.h"

#include <array>

namespace eth {

namespace {
constexpr std::array<std::string_view, kNumRecomputeOps> kNames = {
    "qkv", "attn_score", "attn_softmax", "attn_dropout", "mlp_act", "unit"};
}

std::string_view recompute_op_name(RecomputeOp op) { return kNames[static_cast<int>(op)]; }

std::optional<RecomputeOp> parse_recompute_op(std::string_view name) {
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    if (kNames[static_cast<std::size_t>(i)] == name) return static_cast<RecomputeOp>(i);
  }
  return std::nullopt;
}

std::string recompute_op_names() {
  std::string s;
  for (auto n : kNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

RecomputeSet RecomputeSet::all_ops() {
  RecomputeSet s;
  for (int i = 0; i < kNumRecomputeOps - 1; ++i) s.add(static_cast<RecomputeOp>(i));
  return s;
}

std::vector<RecomputeOp> RecomputeSet::ops() const {
  std::vector<RecomputeOp> out;
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    if (has(static_cast<RecomputeOp>(i))) out.push_back(static_cast<RecomputeOp>(i));
  }
  return out;
}

std::vector<std::string> RecomputeSet::names() const {
  std::vector<std::string> out;
  for (auto op : ops()) out.emplace_back(recompute_op_name(op));
  return out;
}

}  // namespace eth
