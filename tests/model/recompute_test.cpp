// Recompute operator classes and sets: names round-trip and are listed in order, and a set
// holds exactly the classes added to it (checked against the bit each class is given here).
#include "model/recompute.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace eth::recompute_test {
namespace {

TEST(Recompute, NamesRoundTrip) {
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    const auto op = static_cast<RecomputeOp>(i);
    EXPECT_EQ(parse_recompute_op(recompute_op_name(op)), op);
  }
  EXPECT_EQ(parse_recompute_op("attention"), std::nullopt);
  EXPECT_EQ(recompute_op_names(), "qkv, attn_score, attn_softmax, attn_dropout, mlp_act, unit");
  RecomputeSet s;
  s.add(RecomputeOp::MlpAct);
  s.add(RecomputeOp::Qkv);
  EXPECT_EQ(s.names(), (std::vector<std::string>{"qkv", "mlp_act"}));
}


TEST(Recompute, SetsHoldExactlyWhatWasAdded) {
  RecomputeSet s;
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.full_unit());
  s.add(RecomputeOp::AttnDropout);
  s.add(RecomputeOp::Qkv);
  s.add(RecomputeOp::AttnDropout);  // twice is once
  EXPECT_EQ(s.bits(), (1u << 0) | (1u << 3));
  EXPECT_EQ(s.ops(), (std::vector<RecomputeOp>{RecomputeOp::Qkv, RecomputeOp::AttnDropout}));
  for (int i = 0; i < kNumRecomputeOps; ++i) {
    const auto op = static_cast<RecomputeOp>(i);
    EXPECT_EQ(s.has(op), op == RecomputeOp::Qkv || op == RecomputeOp::AttnDropout);
  }
  EXPECT_EQ(RecomputeSet::from_bits(s.bits()), s);
  EXPECT_FALSE(s.empty());
  // The five operator classes, not the whole unit.
  const RecomputeSet all = RecomputeSet::all_ops();
  EXPECT_EQ(all.bits(), 0x1Fu);
  EXPECT_FALSE(all.full_unit());
  EXPECT_EQ(all.names(), (std::vector<std::string>{"qkv", "attn_score", "attn_softmax",
                                                   "attn_dropout", "mlp_act"}));
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  EXPECT_TRUE(unit.full_unit());
  EXPECT_EQ(unit.names(), (std::vector<std::string>{"unit"}));
}

}  // namespace
}  // namespace eth::recompute_test
