// The memory and communication model per precision (core/precision.h): what a stage holds per
// parameter and per message element in fp32 (4 + 4 + 8, 4-byte messages), bf16 (2 + 4 + 12,
// 2-byte activations, 4-byte gradients) and the paper's 16-bit training (2 + 2 + 12, 2 and 2),
// in the predictor and in the planner's cost tables alike, and the refusals of a profile whose
// precision is not the run's. Expected values are the fixture's hand counts times the byte
// figures of kernels/README.md's "Precision" table.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/fixture.h"
#include "cost/predictor.h"
#include "search/cost_tables.h"

namespace eth::precision_test {
namespace {

constexpr double kTol = 1e-9;

ProfileDb profile_in(Precision p) {
  ProfileDb in = test::tiny_profile(), out(in.model());
  for (auto [key, e] : in.entries()) {
    e.precision = p;
    out.add(e);
  }
  return out;
}

struct Bytes {
  double weights, gradients, optimizer, activation, gradient_element;
};

TEST(PrecisionModel, StaticMemoryAndMessagesFollowTheProfilesPrecision) {
  const Plan plan = test::asymmetric_plan();
  const double params = test::kEmbParams + 2 * test::kBlockParams;  // stage 0 of pipeline A
  // One micro-batch of 2 samples x 4 tokens x hidden 8 leaves stage 0 of pipeline A.
  const double elements = 2.0 * 4 * test::tiny_model().hidden;
  const std::pair<Precision, Bytes> cases[] = {{Precision::Fp32, {4, 4, 8, 4, 4}},
                                               {Precision::Bf16, {2, 4, 12, 2, 4}},
                                               {Precision::Mixed16, {2, 2, 12, 2, 2}}};
  for (const auto& [p, b] : cases) {
    const ProfileDb db = profile_in(p);
    const auto costs = compute_stage_costs(plan, test::tiny_cluster(), db);
    const StageStaticMemory& m = costs[0].memory[0];
    EXPECT_NEAR(m.weight_bytes, b.weights * params, kTol) << precision_name(p);
    EXPECT_NEAR(m.gradient_bytes, b.gradients * params, kTol) << precision_name(p);
    EXPECT_NEAR(m.optimizer_bytes, b.optimizer * params, kTol) << precision_name(p);
    EXPECT_NEAR(costs[0].full[0].send_bytes, b.activation * elements, kTol) << precision_name(p);
    const Prediction pred = predict(plan, test::tiny_cluster(), db);
    EXPECT_EQ(pred.precision, p);
    EXPECT_EQ(pred.activation_element_bytes, b.activation);
    EXPECT_EQ(pred.gradient_element_bytes, b.gradient_element);
    // Every gradient element of the aggregation is charged at the gradient bytes.
    const AggregationStats s = aggregation_stats(aggregation_collectives(plan, pred.sync.mode), 1);
    EXPECT_NEAR(pred.sync.stats.bytes_total, b.gradient_element * s.bytes_total, kTol);
    // The planner's tables charge the same bytes per parameter and per boundary element.
    const search::UnitTable t =
        search::build_unit_table(db.lookup("fast", 1, 2).entry, plan.model, plan.seq_len);
    EXPECT_NEAR(t.static_prefix[3], (b.weights + b.gradients + b.optimizer) * params, kTol);
    EXPECT_NEAR(t.boundary_bytes, b.activation * elements, kTol);
  }
}

TEST(PrecisionModel, AProfileOfAnotherPrecisionThanTheRunIsRefused) {
  const Plan plan = test::asymmetric_plan();
  const ProfileDb bf16 = profile_in(Precision::Bf16);
  PredictOptions o;
  o.precision = Precision::Bf16;
  EXPECT_EQ(predict(plan, test::tiny_cluster(), bf16, o).precision, Precision::Bf16);
  o.precision = Precision::Fp32;
  try {
    predict(plan, test::tiny_cluster(), bf16, o);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("measured in bf16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--precision fp32"), std::string::npos) << e.what();
  }
  // Two device types profiled in different precisions cannot be one run.
  ProfileDb mixed(bf16.model());
  for (auto [key, entry] : bf16.entries()) {
    if (key.device_type == "slow") entry.precision = Precision::Fp32;
    mixed.add(entry);
  }
  EXPECT_THROW(predict(plan, test::tiny_cluster(), mixed), InputError);
}

}  // namespace
}  // namespace eth::precision_test
