// Gradient blocks: the byte and collective counts of the three aggregation modes worked out by
// hand on small asymmetric plans, and the properties every derivation must have (each element
// in exactly one block, one holder per pipeline per dp replica) over random plans.
#include "plan/blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "cost/fixture.h"

namespace eth {
namespace {

using test::kBlockParams;
using test::kEmbParams;
using test::kHeadParams;
using test::kTotalParams;

TEST(Blocks, AsymmetricPlanByHand) {
  // A: {0: units 0-2} {1: units 3-5}; B: {2: 0-1} {3: 2-3} {4: 4-5}. Boundaries {0, 2, 3, 4}
  // give segments [0,1] {0,2}, [2] {0,3}, [3] {1,3}, [4,5] {1,4}: four groups, none shared.
  const Plan plan = test::asymmetric_plan();
  const BlockPlan bp = derive_blocks(plan, 2.0);
  ASSERT_EQ(bp.blocks.size(), 4u);
  // Descending unit order: the order the last backward finishes the units.
  EXPECT_EQ(bp.blocks[0].holders, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(bp.blocks[0].elements, kBlockParams + kHeadParams);
  EXPECT_EQ(bp.blocks[1].holders, (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(bp.blocks[1].elements, kBlockParams);
  EXPECT_EQ(bp.blocks[2].holders, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(bp.blocks[2].elements, kBlockParams);
  EXPECT_EQ(bp.blocks[3].holders, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(bp.blocks[3].elements, kEmbParams + kBlockParams);
  EXPECT_EQ(bp.blocks[3].lowest_unit(), 0);
  EXPECT_EQ(bp.blocks[3].highest_unit(), 1);
  // tp = 1: each block merges the sharded chunk 0 of 1 and the replicated part of its range.
  EXPECT_EQ(bp.blocks[3].pieces.size(), 2u);

  // Block-wise: 4 collectives of 2 holders, every element reduced by 2 devices.
  EXPECT_EQ(bp.block_wise.collectives, 4);
  EXPECT_EQ(bp.block_wise.communicators, 4);
  EXPECT_DOUBLE_EQ(bp.block_wise.bytes_total, 2.0 * 2 * kTotalParams);
  // Busiest device: 0 holds units 0-2, 160 + 2 * 872 = 1904 elements.
  EXPECT_DOUBLE_EQ(bp.block_wise.bytes_per_device_max, 2.0 * (kEmbParams + 2 * kBlockParams));

  // Device-wise: one collective over all 5 devices, each feeding the whole model.
  EXPECT_EQ(bp.device_wise.collectives, 1);
  EXPECT_EQ(bp.device_wise.communicators, 1);
  EXPECT_DOUBLE_EQ(bp.device_wise.bytes_total, 2.0 * 5 * kTotalParams);
  EXPECT_DOUBLE_EQ(bp.device_wise.bytes_per_device_max, 2.0 * kTotalParams);

  // Tensor-wise: embedding 2 tensors + 4 blocks x 12 + head 3 = 53 collectives, the same bytes
  // as block-wise, over the same 4 groups.
  EXPECT_EQ(bp.tensor_wise.collectives, 2 + 4 * 12 + 3);
  EXPECT_EQ(bp.tensor_wise.communicators, 4);
  EXPECT_DOUBLE_EQ(bp.tensor_wise.bytes_total, 2.0 * 2 * kTotalParams);

  EXPECT_LT(bp.block_wise.bytes_total, bp.device_wise.bytes_total);
  EXPECT_LT(bp.block_wise.collectives, bp.tensor_wise.collectives);
}

TEST(Blocks, MixedTensorParallelDegreesMergeChunkZeroWithTheReplicatedPart) {
  // A: one stage, tp 2 on devices {0, 1}; B: one stage, tp 1 on device {2}. lcm = 2 chunks.
  // Chunk 0 -> A's rank 0 * 2 / 2 = 0 (device 0) and B's rank 0 (device 2); chunk 1 -> device 1
  // and device 2; the replicated part joins from rank 0: {0, 2} again, merged with chunk 0.
  Plan plan = test::asymmetric_plan();
  plan.pipelines[0].stages = {test::stage("fast", {0, 1}, 0, 5, 2, 1)};
  plan.pipelines[1].stages = {test::stage("slow", {2}, 0, 5)};
  // Replicated: wpe 4*8 = 32; per block ln1 16 + proj_b 8 + ln2 16 + fcproj_b 8 = 48; lnf 16.
  const double replicated = 32 + 4 * 48 + 16;             // 240
  const double chunk = (kTotalParams - replicated) / 2;  // every sharded dim is even: 1776
  const BlockPlan bp = derive_blocks(plan, 4.0);
  ASSERT_EQ(bp.blocks.size(), 2u);
  EXPECT_EQ(bp.blocks[0].holders, (std::vector<std::int64_t>{0, 2}));
  EXPECT_EQ(bp.blocks[0].elements, chunk + replicated);
  EXPECT_EQ(bp.blocks[0].pieces.size(), 2u);
  EXPECT_EQ(bp.blocks[1].holders, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(bp.blocks[1].elements, chunk);
  EXPECT_EQ(bp.blocks[1].pieces[0].tp_chunk, 1);
  EXPECT_EQ(bp.blocks[1].pieces[0].num_tp_chunks, 2);
  EXPECT_DOUBLE_EQ(bp.block_wise.bytes_total, 4.0 * 2 * kTotalParams);
  // Tensor-wise, per unit: sharded tensors x 2 chunks + replicated tensors:
  // embedding 1 x 2 + 1, block 6 x 2 + 6, head 1 x 2 + 2.
  EXPECT_EQ(bp.tensor_wise.collectives, 3 + 4 * 18 + 4);
  EXPECT_EQ(bp.tensor_wise.communicators, 2);
  EXPECT_EQ(bp.device_wise.collectives, 1);
  EXPECT_DOUBLE_EQ(bp.device_wise.bytes_total, 4.0 * 3 * kTotalParams);
}

TEST(Blocks, EveryDataParallelReplicaJoins) {
  Plan plan = test::asymmetric_plan();
  plan.pipelines[0].stages = {test::stage("fast", {0, 1}, 0, 5, 1, 2)};
  plan.pipelines[1].stages = {test::stage("slow", {2}, 0, 5)};
  const BlockPlan bp = derive_blocks(plan, 2.0);
  ASSERT_EQ(bp.blocks.size(), 1u);
  EXPECT_EQ(bp.blocks[0].holders, (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(bp.blocks[0].elements, kTotalParams);
  EXPECT_DOUBLE_EQ(bp.block_wise.bytes_total, 2.0 * 3 * kTotalParams);
}

TEST(Blocks, SinglePipelineNeedsNoCollective) {
  Plan plan = test::asymmetric_plan();
  plan.pipelines.pop_back();
  const BlockPlan bp = derive_blocks(plan, 2.0);
  EXPECT_EQ(bp.blocks.size(), 2u);  // one per stage: the layout is still complete
  EXPECT_EQ(bp.block_wise.collectives, 0);
  EXPECT_EQ(bp.tensor_wise.collectives, 0);
  EXPECT_EQ(bp.block_wise.bytes_total, 0.0);
  EXPECT_EQ(bp.device_wise.collectives, 1);  // two devices still reduce the padded buffer
}

TEST(Blocks, ModeNamesRoundTrip) {
  for (auto m : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    EXPECT_EQ(parse_aggregation_mode(aggregation_mode_name(m)), m);
  }
  EXPECT_FALSE(parse_aggregation_mode("blocks").has_value());
}

// Random plans on the tiny model: 1-3 pipelines, 1-4 stages, tp in 1..4 (3 makes uneven row
// chunks), dp in 1..2.
Plan random_plan(std::mt19937& rng) {
  Plan plan;
  plan.model = test::tiny_model();
  plan.seq_len = 4;
  const std::int64_t units = plan.model.num_units();
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  std::int64_t next_device = 0;
  const std::int64_t num_pipes = pick(1, 3);
  for (std::int64_t p = 0; p < num_pipes; ++p) {
    PipelinePlan pipe;
    pipe.micro_batch_size = 1;
    pipe.local_batch = 1;
    std::set<std::int64_t> cuts;  // stage starts other than 0
    const std::int64_t stages = pick(1, 4);
    while (static_cast<std::int64_t>(cuts.size()) < stages - 1) cuts.insert(pick(1, units - 1));
    std::vector<std::int64_t> starts{0};
    starts.insert(starts.end(), cuts.begin(), cuts.end());
    for (std::size_t s = 0; s < starts.size(); ++s) {
      const std::int64_t last = s + 1 < starts.size() ? starts[s + 1] - 1 : units - 1;
      const std::int64_t tp = pick(1, 4), dp = pick(1, 2);
      std::vector<std::int64_t> devs(static_cast<std::size_t>(tp * dp));
      std::iota(devs.begin(), devs.end(), next_device);
      next_device += tp * dp;
      pipe.stages.push_back(test::stage("fast", devs, starts[s], last, tp, dp));
    }
    plan.pipelines.push_back(pipe);
  }
  plan.gbs = num_pipes;
  // Half the plans number their devices backwards: pipelines and stages then list descending
  // ids, which the derivation must still turn into ascending holder lists.
  if (pick(0, 1) == 1) {
    for (auto& pipe : plan.pipelines) {
      for (auto& st : pipe.stages) {
        for (auto& d : st.devices) d = next_device - 1 - d;
      }
    }
  }
  return plan;
}

const StagePlan& stage_holding(const PipelinePlan& p, std::int64_t unit) {
  for (const auto& s : p.stages) {
    if (s.first_unit <= unit && unit <= s.last_unit) return s;
  }
  throw std::logic_error("unit not covered");
}

std::int64_t lcm_at(const Plan& plan, std::int64_t unit) {
  std::int64_t l = 1;
  for (const auto& p : plan.pipelines) l = std::lcm(l, stage_holding(p, unit).tp);
  return l;
}

TEST(Blocks, PropertiesOverRandomPlans) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    const Plan plan = random_plan(rng);
    const auto blocks = aggregation_collectives(plan, AggregationMode::Block);
    // (unit, part, chunk) -> how many pieces cover it; part: 0 sharded, 1 replicated.
    std::map<std::tuple<std::int64_t, int, std::int64_t>, int> cover;
    std::int64_t elements = 0;
    std::set<std::vector<std::int64_t>> groups;
    std::int64_t prev_highest = plan.model.num_units();
    for (const GradBlock& b : blocks) {
      EXPECT_TRUE(groups.insert(b.holders).second) << "two blocks share a holder group";
      EXPECT_TRUE(std::is_sorted(b.holders.begin(), b.holders.end()));
      EXPECT_LE(b.highest_unit(), prev_highest) << "blocks not in descending unit order";
      prev_highest = b.highest_unit();
      elements += b.elements;
      std::int64_t piece_sum = 0;
      for (const GradPiece& pc : b.pieces) {
        piece_sum += pc.elements;
        for (std::int64_t u = pc.first_unit; u <= pc.last_unit; ++u) {
          const bool sharded = pc.part == GradPart::Sharded;
          ASSERT_NE(pc.part, GradPart::Whole);
          if (sharded) {
            EXPECT_EQ(pc.num_tp_chunks, lcm_at(plan, u));
          }
          ++cover[{u, sharded ? 0 : 1, pc.tp_chunk}];
        }
        // Exactly one holder per pipeline per dp replica, at the tp rank the chunk maps to.
        std::size_t expected_holders = 0;
        for (const auto& pipe : plan.pipelines) {
          const StagePlan& st = stage_holding(pipe, pc.first_unit);
          EXPECT_EQ(&st, &stage_holding(pipe, pc.last_unit)) << "piece crosses a stage";
          const std::int64_t rank =
              pc.part == GradPart::Sharded ? pc.tp_chunk * st.tp / pc.num_tp_chunks : 0;
          for (std::int64_t d = 0; d < st.dp; ++d) {
            const std::int64_t dev = stage_device(st, d, rank);
            EXPECT_TRUE(std::binary_search(b.holders.begin(), b.holders.end(), dev));
          }
          expected_holders += static_cast<std::size_t>(st.dp);
        }
        EXPECT_EQ(b.holders.size(), expected_holders);
      }
      EXPECT_EQ(piece_sum, b.elements);
    }
    EXPECT_EQ(elements, kTotalParams);
    for (std::int64_t u = 0; u < plan.model.num_units(); ++u) {
      EXPECT_EQ((cover[{u, 1, 0}]), 1) << "replicated part of unit " << u;
      for (std::int64_t c = 0; c < lcm_at(plan, u); ++c) {
        EXPECT_EQ((cover[{u, 0, c}]), 1) << "unit " << u << " chunk " << c;
      }
    }
    EXPECT_EQ(cover.size(), [&] {
      std::size_t n = 0;
      for (std::int64_t u = 0; u < plan.model.num_units(); ++u) {
        n += 1 + static_cast<std::size_t>(lcm_at(plan, u));
      }
      return n;
    }());

    // Tensor-wise covers the same elements, one tensor chunk per collective.
    std::int64_t tensor_elements = 0;
    for (const GradBlock& b : aggregation_collectives(plan, AggregationMode::Tensor)) {
      ASSERT_EQ(b.pieces.size(), 1u);
      EXPECT_GE(b.pieces[0].tensor, 0);
      tensor_elements += b.elements;
    }
    EXPECT_EQ(tensor_elements, kTotalParams);

    // Block-wise never moves more bytes than device-wise nor issues more collectives than
    // tensor-wise; the derivation is deterministic.
    for (const auto mode :
         {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
      // aggregation_stats against a tally of its own: collectives of two or more holders, their
      // distinct groups, and each device's bytes summed over its collectives in their order.
      const std::vector<GradBlock> collectives = aggregation_collectives(plan, mode);
      std::int64_t count = 0;
      double total = 0, busiest = 0;
      std::set<std::vector<std::int64_t>> distinct;
      std::map<std::int64_t, double> per_device;
      for (const GradBlock& b : collectives) {
        if (b.holders.size() < 2) continue;
        const double bytes = static_cast<double>(b.elements) * 2.0;
        ++count;
        total += bytes * static_cast<double>(b.holders.size());
        distinct.insert(b.holders);
        for (std::int64_t d : b.holders) per_device[d] += bytes;
      }
      for (const auto& [device, bytes] : per_device) busiest = std::max(busiest, bytes);
      const AggregationStats stats = aggregation_stats(collectives, 2.0);
      EXPECT_EQ(stats.collectives, count);
      EXPECT_EQ(stats.communicators, static_cast<std::int64_t>(distinct.size()));
      EXPECT_EQ(stats.bytes_total, total);
      EXPECT_EQ(stats.bytes_per_device_max, busiest);
    }
    const BlockPlan bp = derive_blocks(plan, 2.0);
    EXPECT_LE(bp.block_wise.bytes_total, bp.device_wise.bytes_total);
    EXPECT_LE(bp.block_wise.collectives, bp.tensor_wise.collectives);
    EXPECT_EQ(bp.block_wise.communicators, bp.block_wise.collectives);
    const BlockPlan again = derive_blocks(plan, 2.0);
    ASSERT_EQ(again.blocks.size(), bp.blocks.size());
    for (std::size_t i = 0; i < bp.blocks.size(); ++i) {
      EXPECT_EQ(again.blocks[i].holders, bp.blocks[i].holders);
      EXPECT_EQ(again.blocks[i].elements, bp.blocks[i].elements);
    }
  }
}

}  // namespace
}  // namespace eth
