// The predictor on the hand-made two-pipeline fixture: T_p to the microsecond, memory peaks,
// gradient synchronization with and without overlap, the ideal bound and MFU, each with the
// arithmetic written out; then properties (more bandwidth never slows a plan down).
#include "cost/predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "cost/fixture.h"
#include "search/cost_tables.h"

namespace eth::predictor_test {
namespace {

constexpr double kLat = 0.01;   // p2p latency, ms
constexpr double kColl = 0.05;  // collective latency, ms
constexpr double kUs = 1e-3;    // one microsecond, in ms

PredictOptions options(AggregationMode mode, bool overlap) {
  PredictOptions o;
  o.aggregation = mode;
  o.collective_latency_ms = kColl;
  o.p2p_latency_ms = kLat;
  o.overlap = overlap;
  return o;
}

// T_p = sum_s (F_s + B_s + 2 send_s) + (k - 2) max_s (F_s + B_s) + max_s (F'_s + B'_s).
// A (fast, m = 2, k = 3, last micro-batch 1 sample = half size):
//   stage 0: F 2.1, B 4.2, send 1 + lat; stage 1: F 2.5, B 5.0.
//   fill = (2.1 + 4.2 + 2 (1 + lat)) + (2.5 + 5.0) = 15.8 + 2 lat
//   + 1 x max(6.3, 7.5) + max(3.15, 3.75)            = 15.8 + 7.5 + 3.75 + 2 lat = 27.07
// B (slow, m = 1, k = 3, all full): stage 0 F 1.1 B 2.2; stage 1 F 2.0 B 4.6 (recompute 2 x
// 0.3); stage 2 F 1.5 B 3.0; sends 1 + lat after stages 0 and 1.
//   fill = 3.3 + 6.6 + 4.5 + 4 (1 + lat) = 18.4 + 4 lat; + 6.6 + 6.6  = 31.6 + 4 lat = 31.64
constexpr double kTA = 15.8 + 7.5 + 3.75 + 2 * kLat;
constexpr double kTB = 18.4 + 6.6 + 6.6 + 4 * kLat;

TEST(Predictor, PipelineTimesByHand) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, false));
  ASSERT_EQ(p.pipelines.size(), 2u);
  EXPECT_NEAR(p.pipelines[0].time_ms, kTA, kUs);
  EXPECT_NEAR(p.pipelines[1].time_ms, kTB, kUs);
  EXPECT_EQ(p.pipelines[0].bottleneck_stage, 1);
  EXPECT_EQ(p.pipelines[1].bottleneck_stage, 1);
  EXPECT_EQ(p.pipelines[0].last_microbatch_size, 1);
  EXPECT_NEAR(p.pipeline_ms, kTB, kUs);
}

TEST(Predictor, SingleMicrobatchAndUniformClosedForm) {
  // k = 1: the pipeline runs the one (last) micro-batch through every stage and back.
  Plan plan = test::asymmetric_plan();
  plan.pipelines[0].local_batch = 1;  // m = 2, one micro-batch of 1 sample
  plan.pipelines.pop_back();
  plan.gbs = 1;
  const Prediction p = predict(plan, test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, false));
  EXPECT_NEAR(p.pipelines[0].time_ms, 1.05 + 2.1 + 2 * (0.5 + kLat) + 1.25 + 2.5, kUs);

  // Uniform stages, free communication, full micro-batches: the exact 1F1B makespan
  // (S - 1 + k)(f + b); GPipe (S - 1 + k) f + (S - 1 + k) b. Stage costs built directly.
  PipelineCosts c;
  StageCost s;
  s.forward_ms = 1.0;
  s.backward_ms = 2.0;
  c.full = {s, s, s, s};
  c.last = c.full;
  EXPECT_NEAR(pipeline_time_ms(c, 5, "1f1b"), (4 - 1 + 5) * 3.0, 1e-12);
  EXPECT_NEAR(pipeline_time_ms(c, 5, "gpipe"), (4 - 1 + 5) * 1.0 + (4 - 1 + 5) * 2.0, 1e-12);
}

// Workspace of a stage of several units with blocks (stage_costs_test.cpp derives it): at 2
// samples 1920 bytes, at 1 sample half of it; mlp_act recomputed adds one block's copy (500).
constexpr double kWs2 = 1920, kWs1 = 960;
// Activation messages: 64 bytes a sample (T x C x 2); a stage receives from each neighbour,
// has up to two gradient sends pending (1F1B, k >= 2) and a forward activation per micro-batch
// in flight (message_buffer_bytes).
constexpr double kSample = 64;

TEST(Predictor, MemoryPeakIsStaticPlusInFlightActivations) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, false));
  // B: S = 3, k = 3; stage s (1-based) keeps min(S - s + 1, k) = 3, 2, 1 micro-batches.
  // Per micro-batch: stage 1 = embedding 200 + block 1500; stage 2 = 2 blocks at 1000 (mlp_act
  // recomputed); stage 3 = block 1500 + head 200. Messages (1 sample): stage 1 receives one
  // gradient and sends 3 activations, stage 2 receives 2, sends 2 gradients and 2 activations,
  // stage 3 receives one activation and sends 2 gradients.
  const auto& b = p.pipelines[1].stages;
  const double static1 = 16 * (test::kEmbParams + test::kBlockParams) + kWs1 + 4 * kSample;
  const double static2 = 16 * (2 * test::kBlockParams) + kWs1 + 500 + 6 * kSample;
  const double static3 = 16 * (test::kBlockParams + test::kHeadParams) + kWs1 + 3 * kSample;
  EXPECT_EQ(b[0].in_flight, 3);
  EXPECT_EQ(b[1].in_flight, 2);
  EXPECT_EQ(b[2].in_flight, 1);
  EXPECT_NEAR(b[0].memory.total(), static1 + 3 * 1700.0, 1e-6);
  EXPECT_NEAR(b[1].memory.total(), static2 + 2 * 2000.0, 1e-6);
  EXPECT_NEAR(b[2].memory.total(), static3 + 1 * 1700.0, 1e-6);
  EXPECT_NEAR(b[1].memory.optimizer_state, 12 * 2 * test::kBlockParams, 1e-6);
  EXPECT_NEAR(b[1].memory.messages, 6 * kSample, 1e-6);
  // Mixed16 (the paper's GPU training) reduces in place: no collective temporaries.
  EXPECT_EQ(b[1].memory.collective_buffers, 0.0);
  // A: S = 2, k = 3: min(2, 3) = 2 full micro-batches (3200 bytes each) at stage 1, 1 at stage 2.
  const auto& a = p.pipelines[0].stages;
  EXPECT_NEAR(a[0].memory.activations, 2 * 3200.0, 1e-6);
  EXPECT_NEAR(a[1].memory.activations, 1 * 3200.0, 1e-6);
  EXPECT_NEAR(a[0].memory.workspace, kWs2, 1e-6);
  EXPECT_NEAR(a[0].memory.messages, 3 * 2 * kSample, 1e-6);  // 2 samples a buffer
  // Devices carry their stage's peak; everything fits in 1e5 bytes.
  ASSERT_EQ(p.devices.size(), 5u);
  EXPECT_EQ(p.devices[3].device, 3);
  EXPECT_EQ(p.devices[3].pipeline, 1);
  EXPECT_EQ(p.devices[3].stage, 1);
  EXPECT_NEAR(p.devices[3].peak_bytes, static2 + 4000.0, 1e-6);
  EXPECT_TRUE(p.fits);
}

TEST(Predictor, GpipeKeepsEveryMicrobatchInAFullSlot) {
  Plan plan = test::asymmetric_plan();
  plan.schedule = "gpipe";
  const Prediction p = predict(plan, test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, false));
  // A: k = 3; the runtime's arena has a slot of a full micro-batch for each, the half-size last
  // one included: 3 x 3200 at stage 1.
  EXPECT_EQ(p.pipelines[0].stages[0].in_flight, 3);
  EXPECT_NEAR(p.pipelines[0].stages[0].memory.activations, 3 * 3200.0, 1e-6);
}

// The fixture's profile as ETH's CPU runtime measures it (fp32, Open MPI collectives).
ProfileDb fp32_profile() {
  const ProfileDb mixed = test::tiny_profile();
  ProfileDb db(mixed.model());
  for (const auto& [key, e] : mixed.entries()) {
    ProfileEntry f = e;
    f.precision = Precision::Fp32;
    db.add(f);
  }
  return db;
}

TEST(Predictor, AggregatingDevicesHoldTheirCollectiveTemporariesUpToTheWindow) {
  // Both pipelines hold every unit, so every device feeds all of its stage's gradients (fp32,
  // 4 bytes each) into two-holder collectives; with every piece posted at once it holds that
  // much again in temporaries, with a window per holder group at most the window per group.
  // Block-wise groups (holders): units 0-1 {0, 2}, 2 {0, 3}, 3 {1, 3}, 4-5 {1, 4}; device 0
  // (fast stage 0, units 0-2) joins the first two, device 3 (slow stage 1, units 2-3) the
  // middle two.
  PredictOptions o = options(AggregationMode::Block, false);
  const Prediction all = predict(test::asymmetric_plan(), test::tiny_cluster(), fp32_profile(), o);
  const double fast0 = 4 * (test::kEmbParams + 2 * test::kBlockParams);
  const double slow1 = 4 * (2 * test::kBlockParams);
  EXPECT_NEAR(all.pipelines[0].stages[0].memory.collective_buffers, fast0, 1e-9);
  EXPECT_NEAR(all.pipelines[1].stages[1].memory.collective_buffers, slow1, 1e-9);
  // A window of 4000 bytes: group {0, 2} feeds 4 x 1032 = 4128 (capped), {0, 3} 4 x 872 = 3488
  // (not capped).
  o.collective_window_bytes = 4000;
  const Prediction windowed =
      predict(test::asymmetric_plan(), test::tiny_cluster(), fp32_profile(), o);
  EXPECT_NEAR(windowed.pipelines[0].stages[0].memory.collective_buffers, 4000 + 3488, 1e-9);
  EXPECT_NEAR(windowed.pipelines[1].stages[1].memory.collective_buffers, 2 * 3488, 1e-9);
  o.collective_window_bytes = 1000;
  const Prediction tight = predict(test::asymmetric_plan(), test::tiny_cluster(), fp32_profile(), o);
  EXPECT_NEAR(tight.pipelines[0].stages[0].memory.collective_buffers, 2 * 1000, 1e-9);
  EXPECT_NEAR(all.pipelines[0].stages[0].memory.total() - fast0,
              tight.pipelines[0].stages[0].memory.total() - 2000, 1e-6);

  // One pipeline alone aggregates nothing.
  Plan single = test::asymmetric_plan();
  single.pipelines.resize(1);
  single.gbs = single.pipelines[0].local_batch;
  const Prediction alone = predict(single, test::tiny_cluster(), fp32_profile(),
                                   options(AggregationMode::Block, false));
  EXPECT_EQ(alone.pipelines[0].stages[0].memory.collective_buffers, 0.0);
}

TEST(Predictor, PlannerTablesChargeAtLeastThePredictor) {
  // The planner's range memory (search/cost_tables.h) at a stage's share, in-flight count and
  // recompute set is an upper bound of the predictor's peak for that stage, so a plan the
  // search accepts fits under the predictor; it exceeds it by no more than the messages of a
  // middle stage (3 buffers) and the one-unit workspace slack.
  for (const auto& [profile, window] :
       {std::pair{test::tiny_profile(), kUnboundedCollectiveWindow},
        std::pair{fp32_profile(), kUnboundedCollectiveWindow}, std::pair{fp32_profile(), 1000.0}}) {
    const Plan plan = test::asymmetric_plan();
    PredictOptions o = options(AggregationMode::Block, false);
    o.collective_window_bytes = window;
    const Prediction p = predict(plan, test::tiny_cluster(), profile, o);
    search::CostTables tables(profile, plan.seq_len, true, window);
    for (std::size_t pi = 0; pi < plan.pipelines.size(); ++pi) {
      const PipelinePlan& pipe = plan.pipelines[pi];
      for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
        const StagePlan& st = pipe.stages[s];
        const StagePrediction& sp = p.pipelines[pi].stages[s];
        const auto& sets = search::recompute_candidates();
        const int rc = static_cast<int>(
            std::find(sets.begin(), sets.end(), st.recompute) - sets.begin());
        ASSERT_LT(rc, search::kNumRecomputeCandidates);
        const search::UnitTable& t = tables.get(st.device_type, st.tp, pipe.micro_batch_size);
        const double planner =
            search::range_memory(t, sp.in_flight, st.first_unit, st.last_unit + 1, rc);
        EXPECT_GE(planner, sp.memory.total() - 1e-6) << "pipeline " << pi << " stage " << s;
        // Beyond a middle stage's messages, the planner charges each unit of a tp-1 range a
        // group's window where the predictor charges the groups the device joins.
        const double units = static_cast<double>(st.last_unit - st.first_unit + 1);
        const double slack = std::isinf(window) ? 0.0 : units * window;
        EXPECT_LE(planner, sp.memory.total() + 3 * t.boundary_bytes + slack + 1e-6)
            << "pipeline " << pi << " stage " << s;
      }
    }
  }
}

TEST(Predictor, OversubscribedDevicesAreFlagged) {
  ClusterSpec cluster = test::tiny_cluster();
  // fast gets 40000 bytes: stage 1 needs 16 * 1904 + 1920 + 2 * 3200 + 3 * 128 = 39168, stage 2
  // 16 * 1888 + 1920 + 3200 + 3 * 128 = 35712: both fit. slow gets 20000 bytes: stage 1 needs
  // 16 * 1032 + 960 + 3 * 1700 + 4 * 64 = 22828 and stage 2
  // 16 * 1744 + 1460 + 2 * 2000 + 6 * 64 = 33748 (both overflow), stage 3
  // 16 * 1016 + 960 + 1700 + 3 * 64 = 19108 (fits). (Messages: two gradient sends pending.)
  cluster.device_types["fast"].memory_gb = 40000e-9;
  cluster.device_types["slow"].memory_gb = 20000e-9;
  const Prediction p = predict(test::asymmetric_plan(), cluster, test::tiny_profile(),
                               options(AggregationMode::Block, false));
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.oversubscribed, (std::vector<std::int64_t>{2, 3}));
  EXPECT_FALSE(p.pipelines[1].stages[0].fits);
  EXPECT_TRUE(p.pipelines[1].stages[2].fits);
  EXPECT_NEAR(p.pipelines[0].stages[0].memory.total(), 39168, 1e-6);
  EXPECT_NEAR(p.pipelines[1].stages[1].memory.total(), 33748, 1e-6);
  EXPECT_NEAR(p.pipelines[1].stages[2].memory.total(), 19108, 1e-6);
}

// Block order [4,5]{1,4}, [3]{1,3}, [2]{0,3}, [0,1]{0,2}; every pair crosses nodes (1e6 B/s).
// A two-holder ring moves 2 (n-1)/n = 1 x its bytes: 2 bytes per element / 1e6 B/s = 2e-3 ms
// per element, plus kColl.
constexpr double d45 = (872 + 144) * 2e-3 + kColl;
constexpr double d3 = 872 * 2e-3 + kColl;
constexpr double d2 = 872 * 2e-3 + kColl;
constexpr double d01 = (160 + 872) * 2e-3 + kColl;
constexpr double kOptimizer = 3.792 * 1904 / 3792;  // fast stage 0, the largest

TEST(Predictor, SyncWithoutOverlapIsOneChainAfterThePipelines) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, false));
  // Each block shares a device with the next, so they run back to back after max T_p.
  EXPECT_NEAR(p.sync.end_ms, kTB + d45 + d3 + d2 + d01, kUs);
  EXPECT_NEAR(p.sync.exposed_ms, d45 + d3 + d2 + d01, kUs);
  EXPECT_NEAR(p.sync.busy_ms, std::max({d45 + d3, d3 + d2, d2 + d01}), kUs);  // devices 1, 3, 0
  EXPECT_NEAR(p.optimizer_ms, kOptimizer, kUs);
  EXPECT_NEAR(p.iteration_ms, kTB + d45 + d3 + d2 + d01 + kOptimizer, kUs);
}

TEST(Predictor, SyncWithOverlapStartsBlocksAsBackwardPassesThem) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, true));
  // Last backward leaves stage 0 at T_p, stage s earlier by B'_j + send_j of stages j < s.
  // Inside a stage, unit u is done once units first..u-1 remain (last micro-batch sizes).
  // [4,5]: dev 1 (A stage 1, after unit 3's 1.0): kTA - (2.1 + 0.5 + lat) - 1.0
  //        dev 4 (B stage 2): kTB - (2.2 + 1 + lat) - (4.6 + 1 + lat)
  const double r45 = std::max(kTA - (2.1 + 0.5 + kLat) - 1.0, kTB - 8.8 - 2 * kLat);
  const double e45 = r45 + d45;
  // [3]: dev 1: kTA - (2.1 + 0.5 + lat); dev 3 (B stage 1, after unit 2's 2.3): kTB - 3.2 - lat
  //      - 2.3; device 1 is free at e45.
  const double e3 = std::max({kTA - 2.6 - kLat, kTB - 3.2 - kLat - 2.3, e45}) + d3;
  // [2]: dev 0 (A stage 0, after units 0, 1: 0.1 + 1.0): kTA - 1.1; dev 3: kTB - 3.2 - lat.
  const double e2 = std::max({kTA - 1.1, kTB - 3.2 - kLat, e3}) + d2;
  // [0,1]: dev 0: kTA; dev 2: kTB.
  const double e01 = std::max({kTA, kTB, e2}) + d01;
  EXPECT_NEAR(p.sync.end_ms, e01, kUs);
  EXPECT_NEAR(p.sync.exposed_ms, e01 - kTB, kUs);
  EXPECT_NEAR(p.iteration_ms, kTB + (e01 - kTB) + kOptimizer, kUs);
  // Overlap only ever hides time.
  const Prediction no = predict(test::asymmetric_plan(), test::tiny_cluster(),
                                test::tiny_profile(), options(AggregationMode::Block, false));
  EXPECT_LT(p.iteration_ms, no.iteration_ms);
}

TEST(Predictor, RingAllReduceArithmetic) {
  const ClusterSpec c = test::tiny_cluster();
  // Three slow devices in one node: 2 (3-1)/3 x 3000 bytes / 64000 B/s = 0.0625 s.
  EXPECT_NEAR(ring_allreduce_ms(c, {2, 3, 4}, 3000, 0.5), 2.0 * 2 / 3 * 3000 / 64000 * 1e3 + 0.5,
              1e-9);
  // Ring 0 -> 1 -> 2 -> 0: links 128000 (fast, intra), 1e6 and 1e6 B/s (inter): the slowest
  // bounds the ring.
  EXPECT_NEAR(ring_allreduce_ms(c, {0, 1, 2}, 3000, 0.0), 2.0 * 2 / 3 * 3000 / 128000 * 1e3,
              1e-9);
  // Two devices across nodes: only the inter-node link.
  EXPECT_NEAR(ring_allreduce_ms(c, {1, 2}, 3000, 0.0), 2.0 * 1 / 2 * 3000 / 1e6 * 1e3, 1e-9);
  EXPECT_EQ(ring_allreduce_ms(c, {3}, 3000, 0.5), 0.0);
}

// One node of 4 "host" devices whose links run at 1e9 B/s (8 Gbit/s) but which share one
// memory system moving 1e9 B/s in all (node_shared_bandwidth_gbps 8), like CPU ranks on a host.
ClusterSpec shared_host(bool shared) {
  ClusterSpec c;
  c.name = "host";
  c.nodes = {{"host", 4}};
  DeviceType t{"host", 1, 1, 8, std::nullopt, 1.0};
  if (shared) t.node_shared_bandwidth_gbps = 8;
  c.device_types["host"] = t;
  c.custom_types = {"host"};
  return c;
}

TEST(Predictor, ASharedNodeMovesEveryHoldersShareThroughItsMemory) {
  const ClusterSpec c = shared_host(true);
  // Two holders: the ring moves 2 (2-1)/2 x 1e6 = 1e6 bytes per holder (1 ms on its link);
  // both shares pass through the node's memory: 2e6 bytes at 1e9 B/s = 2 ms.
  EXPECT_NEAR(ring_allreduce_ms(c, {0, 1}, 1e6, 0.0), 2.0, 1e-9);
  // All four: 4 x 2 (3/4) x 1e6 = 2 (n-1) x 1e6 = 6e6 bytes: 6 ms (the links alone: 1.5 ms).
  EXPECT_NEAR(ring_allreduce_ms(c, {0, 1, 2, 3}, 1e6, 0.5), 6.5, 1e-9);
  EXPECT_NEAR(ring_allreduce_ms(shared_host(false), {0, 1, 2, 3}, 1e6, 0.0), 1.5, 1e-9);
}

// Two pipelines cut at the same unit: two disjoint pairs, {0, 2} (units 0-2: embedding and two
// blocks, 160 + 2 x 872 = 1904 elements) and {1, 3} (two blocks and the head, 1888, issued
// first); devices 0, 1 are pipeline 0's stages and 2, 3 pipeline 1's.
Plan two_pairs_plan() {
  Plan plan = test::asymmetric_plan();
  plan.pipelines.resize(2);
  std::int64_t dev = 0;
  for (PipelinePlan& pipe : plan.pipelines) {
    pipe.stages.resize(2);
    for (std::size_t s = 0; s < 2; ++s) {
      StagePlan& st = pipe.stages[s];
      st.device_type = "host";
      st.tp = 1;
      st.dp = 1;
      st.recompute = {};
      st.first_unit = s == 0 ? 0 : 3;
      st.last_unit = s == 0 ? 2 : 5;
      st.devices = {s == 0 ? dev : dev + 1};
    }
    dev += 2;
  }
  return plan;
}

TEST(Predictor, ASharedNodeRunsOneCollectiveAtATime) {
  const Plan plan = two_pairs_plan();
  PredictOptions o;
  o.collective_latency_ms = 0;
  // fp32 gradients: a pair moves 2 x bytes through the shared memory at 1e9 B/s.
  const double first = 2.0 * 1888 * 4 / 1e9 * 1e3, second = 2.0 * 1904 * 4 / 1e9 * 1e3;
  const SyncPrediction shared =
      predict_aggregation(plan, shared_host(true), AggregationMode::Block, o);
  EXPECT_NEAR(shared.end_ms, first + second, 1e-9) << "one after the other";
  // Separate links (no shared figure): each pair at 1e6 bytes per ms, side by side.
  const SyncPrediction apart =
      predict_aggregation(plan, shared_host(false), AggregationMode::Block, o);
  EXPECT_NEAR(apart.end_ms, std::max(first, second) / 2, 1e-9) << "side by side";
}

TEST(Predictor, ACollectiveIsPostedAsTheRuntimeCutsIt) {
  const ClusterSpec host = shared_host(true);  // ClusterIndex keeps a reference to it
  const ClusterIndex c(host);
  // A pair on the shared host moves 2 x b bytes through its memory at 1e9 B/s: 2e-6 ms a byte.
  PredictOptions o;
  o.collective_latency_ms = 0.05;
  o.collective_chunk_bytes = 1e5;
  o.collective_piece_latency_ms = 0.15;
  // 2.5 pieces: 3 to post (0.45 ms); the transfer 0.5 ms plus the collective latency.
  const CollectiveTime t = collective_time(c, {0, 1}, 2.5e5, o);
  EXPECT_EQ(t.pieces, 3);
  EXPECT_NEAR(t.issue_ms, 0.45, 1e-12);
  EXPECT_NEAR(t.transfer_ms, ring_allreduce_ms(c, {0, 1}, 2.5e5, 0.05), 1e-12);
  EXPECT_NEAR(t.transfer_ms, 0.55, 1e-12);
  EXPECT_NEAR(t.alone_ms(), 0.55, 1e-12);
  // Exactly two pieces; one when uncut (an infinite chunk); nothing for one holder.
  EXPECT_EQ(collective_time(c, {0, 1}, 2e5, o).pieces, 2);
  o.collective_chunk_bytes = kUnboundedCollectiveWindow;
  EXPECT_EQ(collective_time(c, {0, 1}, 2.5e5, o).pieces, 1);
  EXPECT_EQ(collective_time(c, {0}, 2.5e5, o).alone_ms(), 0.0);
}

TEST(Predictor, PiecesArePostedWhileEarlierOnesMove) {
  PredictOptions o;
  o.collective_latency_ms = 0;
  o.collective_chunk_bytes = 1000;
  o.collective_piece_latency_ms = 0.005;
  // {1, 3} first: 7552 bytes, 8 pieces to post (0.04 ms) against 7552 x 2e-6 = 0.015104 ms of
  // transfer: posting bounds it, 0.04. {0, 2}: 7616 bytes, 8 pieces; its holders post from 0,
  // its bytes move once the shared memory is free (0.015104) and take 0.015232: it ends when
  // its posting does, 0.04.
  const Plan plan = two_pairs_plan();
  const SyncPrediction p = predict_aggregation(plan, shared_host(true), AggregationMode::Block, o);
  EXPECT_NEAR(p.end_ms, 0.04, 1e-12);
  EXPECT_NEAR(p.busy_ms, 0.04, 1e-12);
  // Pieces of 100 bytes: 76 and 77 to post, 0.38 and 0.385 ms, the pairs side by side.
  o.collective_chunk_bytes = 100;
  EXPECT_NEAR(predict_aggregation(plan, shared_host(true), AggregationMode::Block, o).end_ms,
              77 * 0.005, 1e-12);
  // Pieces of 10000 bytes: one each, posted in 0.005 ms, so the transfers bound it, one after
  // the other through the shared memory: 0.015104 + 0.015232.
  o.collective_chunk_bytes = 1e4;
  EXPECT_NEAR(predict_aggregation(plan, shared_host(true), AggregationMode::Block, o).end_ms,
              (7552 + 7616) * 2e-6, 1e-12);
}

TEST(Predictor, SmallCollectivesAmongLargeOnesCostTheirTransfersOnly) {
  // Whenever posting is faster than moving the bytes, the pieces' latency hides behind the
  // transfers and the term is their sum, however the bytes are cut into collectives: block-
  // and tensor-wise alike.
  const Plan plan = two_pairs_plan();
  PredictOptions o;
  o.collective_latency_ms = 0;
  o.collective_chunk_bytes = 1000;
  o.collective_piece_latency_ms = 1e-4;  // 100 ns a piece, while 1000 bytes move in 2 us
  const double transfers = (7552 + 7616) * 2e-6;
  EXPECT_NEAR(predict_aggregation(plan, shared_host(true), AggregationMode::Block, o).end_ms,
              transfers, 1e-12);
  EXPECT_NEAR(predict_aggregation(plan, shared_host(true), AggregationMode::Tensor, o).end_ms,
              transfers, 1e-12);
}

TEST(Predictor, TensorWiseNeverBelowBlockWiseWhateverThePieces) {
  // Tensor-wise moves block-wise's bytes over the same holders in more, smaller collectives;
  // priced piece by piece it may not come out cheaper.
  for (const auto& [plan, cluster] : {std::pair{test::asymmetric_plan(), test::tiny_cluster()},
                                      std::pair{two_pairs_plan(), shared_host(true)}}) {
    for (double chunk : {64.0, 1000.0, 1e5, kUnboundedCollectiveWindow}) {
      for (double latency : {0.0, 1e-4, 0.01, 1.0}) {
        PredictOptions o;
        o.collective_chunk_bytes = chunk;
        o.collective_piece_latency_ms = latency;
        const double block =
            predict_aggregation(plan, cluster, AggregationMode::Block, o).end_ms;
        const double tensor =
            predict_aggregation(plan, cluster, AggregationMode::Tensor, o).end_ms;
        EXPECT_GE(tensor, block - 1e-9) << chunk << " " << latency;
      }
    }
  }
}

TEST(Predictor, ModesDifferAsTheirCountsSay) {
  const auto plan = test::asymmetric_plan();
  const auto cluster = test::tiny_cluster();
  const auto profile = test::tiny_profile();
  const Prediction dev = predict(plan, cluster, profile, options(AggregationMode::Device, false));
  // Device-wise: one ring 0-1-2-3-4-0 whose slowest link is slow's intra-node 64000 B/s:
  // 2 x 4/5 x 3792 x 2 bytes / 64000 B/s.
  EXPECT_NEAR(dev.sync.exposed_ms, 2.0 * 4 / 5 * 3792 * 2 / 64000 * 1e3 + kColl, kUs);
  EXPECT_EQ(dev.sync.stats.collectives, 1);
  const Prediction ten = predict(plan, cluster, profile, options(AggregationMode::Tensor, false));
  EXPECT_EQ(ten.sync.stats.collectives, 53);
  ASSERT_EQ(ten.sync_all_modes.size(), 3u);
  EXPECT_EQ(ten.sync_all_modes[0].mode, AggregationMode::Block);
  EXPECT_EQ(ten.sync_all_modes[0].stats.collectives, 4);
}

TEST(Predictor, IdealBoundAndUtilization) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, true));
  // Block forward FLOPs per token (C = 8, F = 32, T = 4): 2 (4 C^2 + 2 C F) + 4 T C = 1664;
  // head 2 C V = 256; embedding 0. Model FLOPs = 3 x 32 tokens x (4 x 1664 + 256) = 663552.
  const double model_flops = 3.0 * 32 * (4 * 1664 + 256);
  EXPECT_DOUBLE_EQ(p.model_flops, model_flops);
  // Effective FLOPS from the block timing: fast mbs 2 = 3 x 8 tokens x 1664 / 3 ms (mbs 1 gives
  // the same), slow mbs 1 = 3 x 4 x 1664 / 3 ms. Plan devices: 2 fast + 3 slow.
  const double fast = 3.0 * 8 * 1664 / 3e-3, slow = 3.0 * 4 * 1664 / 3e-3;
  EXPECT_NEAR(p.ideal_iteration_ms, model_flops / (2 * fast + 3 * slow) * 1e3, 1e-9);
  EXPECT_LT(p.ideal_iteration_ms, p.iteration_ms);
  // Tokens: 8 x 4 per iteration; peak 2 x 100 + 3 x 50 TFLOPS.
  EXPECT_NEAR(p.tokens_per_s, 32 / (p.iteration_ms * 1e-3), 1e-6);
  EXPECT_NEAR(p.mfu, model_flops / (p.iteration_ms * 1e-3) / 350e12, 1e-18);
}

TEST(Predictor, MoreBandwidthNeverRaisesPredictedTime) {
  const auto plan = test::asymmetric_plan();
  const auto profile = test::tiny_profile();
  for (auto mode : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    for (bool overlap : {false, true}) {
      ClusterSpec c = test::tiny_cluster();
      double prev = predict(plan, c, profile, options(mode, overlap)).iteration_ms;
      for (int step = 0; step < 6; ++step) {
        // Alternate which link gets faster: inter-node, then the two intra-node links.
        if (step % 3 == 0) c.inter_node_bandwidth_gbps *= 2.5;
        if (step % 3 == 1) c.device_types["fast"].intra_node_bandwidth_gbps *= 2.5;
        if (step % 3 == 2) c.device_types["slow"].intra_node_bandwidth_gbps *= 2.5;
        const double t = predict(plan, c, profile, options(mode, overlap)).iteration_ms;
        EXPECT_LE(t, prev + 1e-12) << aggregation_mode_name(mode) << " overlap " << overlap;
        prev = t;
      }
    }
  }
}

TEST(Predictor, JsonCarriesTheHeadlineFigures) {
  const Prediction p = predict(test::asymmetric_plan(), test::tiny_cluster(), test::tiny_profile(),
                               options(AggregationMode::Block, true));
  const Json j = prediction_to_json(p);
  EXPECT_DOUBLE_EQ(j.at("iteration_ms").get<double>(), p.iteration_ms);
  EXPECT_DOUBLE_EQ(j.at("ideal_iteration_ms").get<double>(), p.ideal_iteration_ms);
  ASSERT_EQ(j.at("pipelines").size(), 2u);
  EXPECT_DOUBLE_EQ(j.at("pipelines")[1].at("time_ms").get<double>(), p.pipelines[1].time_ms);
  EXPECT_EQ(j.at("pipelines")[1].at("stages").size(), 3u);
  EXPECT_EQ(j.at("pipelines")[1].at("stages")[1].at("units")[0].get<int>(), 2);
  EXPECT_EQ(j.at("sync").at("mode").get<std::string>(), "block");
  EXPECT_EQ(j.at("devices").size(), 5u);
}

}  // namespace
}  // namespace eth::predictor_test
