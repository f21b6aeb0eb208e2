// The planner end to end on small clusters: plans checked by a validator written here (not the
// planner's code path), the optimized search against the exhaustive one, determinism, odd
// clusters, and the no-fit message.
#include "search/planner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cluster/cluster_spec.h"
#include "cost/predictor.h"
#include "plan/validate.h"
#include "profile/analytic.h"
#include "test_util.h"

namespace eth {
namespace {

// 8 blocks of hidden 256: about 12.6 MB of static state (16 B/param) per block, so a device of
// 50-80 MB holds a few blocks and memory shapes the plans.
ModelSpec small_model() { return ModelSpec{"small", 8, 256, 8, 128, 1024, 1024}; }

ClusterSpec make_cluster(const std::string& json) {
  const Json j = Json::parse(json);
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

const char* kTypes = R"("device_types": {
    "fast": {"tflops": 100, "memory_gb": 0.08, "intra_node_bandwidth_gbps": 800},
    "mid":  {"tflops": 60,  "memory_gb": 0.06, "intra_node_bandwidth_gbps": 400},
    "slow": {"tflops": 40,  "memory_gb": 0.05, "intra_node_bandwidth_gbps": 400}},
  "inter_node_bandwidth_gbps": 100)";

ClusterSpec cluster_of(const std::string& nodes) {
  return make_cluster(std::string("{\"nodes\": [") + nodes + "], " + kTypes + "}");
}

ProfileDb profile_for(const ModelSpec& m, const ClusterSpec& c) {
  return analytic_profile_db(m, c, {1, 2, 4}, {1, 2, 4, 8}, m.seq_len);
}

PlannerOptions small_options() {
  PlannerOptions o;
  o.micro_batch_sizes = {1, 2, 4, 8};
  o.tp = {1, 2, 4};
  return o;
}

// The rules every plan obeys, checked from the plan alone, and memory per the predictor.
void expect_valid(const Plan& plan, const ClusterSpec& c, const ProfileDb& db, std::int64_t gbs) {
  const std::int64_t U = plan.model.num_units();
  std::int64_t total = 0;
  std::set<std::int64_t> seen;
  for (const auto& p : plan.pipelines) {
    EXPECT_GE(p.local_batch, 1);
    EXPECT_GE(p.micro_batch_size, 1);
    EXPECT_LE(p.micro_batch_size, p.local_batch);
    total += p.local_batch;
    std::int64_t next = 0;
    for (const auto& s : p.stages) {
      EXPECT_EQ(s.first_unit, next) << "units must be contiguous from 0";
      EXPECT_LE(s.first_unit, s.last_unit);
      next = s.last_unit + 1;
      EXPECT_EQ(static_cast<std::int64_t>(s.devices.size()), s.tp * s.dp);
      for (std::int64_t id : s.devices) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, c.num_devices());
        EXPECT_TRUE(seen.insert(id).second) << "device " << id << " used twice";
        EXPECT_EQ(c.device(id).device_type, s.device_type);
        EXPECT_EQ(c.device(id).node, c.device(s.devices.front()).node) << "stage spans nodes";
      }
    }
    EXPECT_EQ(next, U) << "a pipeline must cover every unit exactly once";
  }
  EXPECT_EQ(total, gbs);
  EXPECT_TRUE(validate_plan(plan, c).empty());
  const Prediction pred = predict(plan, c, db);
  EXPECT_TRUE(pred.fits);
  for (const auto& d : pred.devices) EXPECT_LE(d.peak_bytes, d.capacity_bytes) << d.device;
}

PlannerResult run(PlanMethod m, const ClusterSpec& c, std::int64_t gbs, const PlannerOptions& o) {
  const ModelSpec model = small_model();
  const ProfileDb db = profile_for(model, c);
  PlannerResult r = plan_training(m, model, c, db, gbs, model.seq_len, o);
  expect_valid(r.plan, c, db, gbs);
  return r;
}

// The H200 preset (the GPU of docs/gpu.md) plans and predicts like the H100 it shares compute
// and links with, with 141/80 of its memory: where memory does not bind, the same plan shape and
// the same predicted time; every device's capacity in the prediction scales by 141/80.
TEST(Planner, H200PresetPlansLikeH100WithItsMemory) {
  const std::optional<DeviceType> h200 = find_device_type_preset("H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_EQ(h200->tflops, 989);
  EXPECT_EQ(h200->memory_gb, 141);
  const ClusterSpec c200 = make_cluster(R"({"nodes": [{"device_type": "H200", "devices": 4}]})");
  const ClusterSpec c100 = make_cluster(R"({"nodes": [{"device_type": "H100", "devices": 4}]})");
  const PlannerResult r200 = run(PlanMethod::Eth, c200, 16, small_options());
  const PlannerResult r100 = run(PlanMethod::Eth, c100, 16, small_options());
  EXPECT_DOUBLE_EQ(r200.prediction.iteration_ms, r100.prediction.iteration_ms);
  ASSERT_EQ(r200.plan.pipelines.size(), r100.plan.pipelines.size());
  for (std::size_t p = 0; p < r200.plan.pipelines.size(); ++p) {
    EXPECT_EQ(r200.plan.pipelines[p].stages.size(), r100.plan.pipelines[p].stages.size());
    EXPECT_EQ(r200.plan.pipelines[p].micro_batch_size, r100.plan.pipelines[p].micro_batch_size);
  }
  ASSERT_EQ(r200.prediction.devices.size(), r100.prediction.devices.size());
  for (std::size_t d = 0; d < r200.prediction.devices.size(); ++d) {
    EXPECT_NEAR(r200.prediction.devices[d].capacity_bytes,
                r100.prediction.devices[d].capacity_bytes * 141.0 / 80.0,
                1e-9 * r200.prediction.devices[d].capacity_bytes);
  }
}

// Over a slow network, 1F1B's round trips bind: a stage-0 micro-batch j + S waits for j to
// come back through every stage and link. Recomputed here from the predicted stages (F, B, send,
// full and last): the predictor's pipeline time and the search's own objective both charge at
// least that chain, which the closed form alone (bottleneck slots) falls short of here.
TEST(Planner, SlowLinksChargeTheRoundTripsOfTheSteadyState) {
  ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 1},
      {"device_type": "fast", "devices": 1}, {"device_type": "fast", "devices": 1},
      {"device_type": "fast", "devices": 1})");
  c.inter_node_bandwidth_gbps = 2;  // a hidden state of a micro-batch: ~0.3-2 ms
  const PlannerResult r = run(PlanMethod::Eth, c, 32, small_options());
  bool binds = false;
  for (const auto& pp : r.prediction.pipelines) {
    const auto S = static_cast<std::int64_t>(pp.stages.size());
    const std::int64_t k = pp.num_microbatches, a = (k - 1) / S, b = (k - 1) % S;
    if (S < 2 || a < 1) continue;
    double trip = 0, last_trip = 0, slot = 0;
    for (const auto& st : pp.stages) {
      trip += st.forward_ms + st.backward_ms + 2 * st.send_ms;
      last_trip += st.last_forward_ms + st.last_backward_ms + 2 * st.last_send_ms;
      slot = std::max(slot, st.forward_ms + st.backward_ms);
    }
    const double first = pp.stages[0].forward_ms + pp.stages[0].backward_ms;
    const double chain =
        static_cast<double>(a) * trip + last_trip + static_cast<double>(b) * first;
    const double closed = trip + static_cast<double>(k - 1) * slot;
    binds = binds || chain > 1.01 * closed;
    EXPECT_GE(pp.time_ms, chain * (1 - 1e-12));
    EXPECT_GE(r.objective_ms, chain * (1 - 1e-9));
  }
  EXPECT_TRUE(binds) << "no pipeline is bound by its round trips: the test tests nothing";
}

TEST(Planner, EveryMethodGivesAValidPlanAndEthIsNeverSlowerThanLayer) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 2},
      {"device_type": "fast", "devices": 2}, {"device_type": "slow", "devices": 2},
      {"device_type": "slow", "devices": 2})");
  const PlannerResult eth = run(PlanMethod::Eth, c, 64, small_options());
  const PlannerResult layer = run(PlanMethod::Layer, c, 64, small_options());
  const PlannerResult uniform = run(PlanMethod::Uniform, c, 64, small_options());
  EXPECT_LE(eth.prediction.iteration_ms, layer.prediction.iteration_ms);
  // Uniform ignores types: nothing here makes it faster than eth.
  EXPECT_LE(eth.prediction.iteration_ms, uniform.prediction.iteration_ms);
  // The ideal bound is a bound.
  EXPECT_LE(eth.prediction.ideal_iteration_ms, eth.prediction.iteration_ms);
  // Every generated candidate was either evaluated or skipped for a reason.
  EXPECT_EQ(eth.stats.generated, eth.stats.evaluated + eth.stats.skipped_total());
  EXPECT_GT(eth.stats.cache_hits, 0);
  // The plan file carries the prediction and the statistics.
  EXPECT_DOUBLE_EQ(eth.plan.predicted->at("iteration_ms").get<double>(),
                   eth.prediction.iteration_ms);
  EXPECT_EQ(eth.plan.search->at("generated").get<std::int64_t>(), eth.stats.generated);
  for (const auto& p : eth.plan.pipelines) {
    for (const auto& s : p.stages) EXPECT_TRUE(s.predicted_peak_memory_bytes.has_value());
  }
}

// The pure family alone (the paper's TypeSplit-HPP): every pipeline holds one device type, the
// optimized search finds the exhaustive search's optimum of that smaller space, and full eth,
// whose space contains it, is never slower.
TEST(Planner, PureOnlyKeepsEveryPipelineOnOneType) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 4},
      {"device_type": "slow", "devices": 4})");
  PlannerOptions pure = small_options();
  pure.pure_only = true;
  PlannerOptions exhaustive = pure;
  exhaustive.cpc = exhaustive.ses = exhaustive.oso = exhaustive.dpo = false;
  for (std::int64_t gbs : {16, 45}) {
    const PlannerResult p = run(PlanMethod::Eth, c, gbs, pure);
    EXPECT_EQ(p.family, "pure");
    for (const auto& pipe : p.plan.pipelines) {
      for (const auto& s : pipe.stages) EXPECT_EQ(s.device_type, pipe.stages[0].device_type);
    }
    const PlannerResult b = run(PlanMethod::Eth, c, gbs, exhaustive);
    EXPECT_DOUBLE_EQ(p.best_objective_ms, b.best_objective_ms) << "gbs " << gbs;
    const PlannerResult full = run(PlanMethod::Eth, c, gbs, small_options());
    EXPECT_LE(full.prediction.iteration_ms, p.prediction.iteration_ms) << "gbs " << gbs;
  }
}

TEST(Planner, OptimizedSearchAtAlphaZeroEqualsExhaustiveSearch) {
  const std::string clusters[] = {
      R"({"device_type": "fast", "devices": 2}, {"device_type": "slow", "devices": 2})",
      R"({"device_type": "fast", "devices": 4}, {"device_type": "slow", "devices": 2})",
      R"({"device_type": "fast", "devices": 2}, {"device_type": "mid", "devices": 2},
         {"device_type": "slow", "devices": 3})",
  };
  for (const auto& nodes : clusters) {
    const ClusterSpec c = cluster_of(nodes);
    PlannerOptions fast = small_options();
    fast.alpha = 0;
    PlannerOptions slow = fast;
    slow.cpc = slow.ses = slow.oso = slow.dpo = false;
    for (std::int64_t gbs : {16, 45}) {
      const PlannerResult a = run(PlanMethod::Eth, c, gbs, fast);
      const PlannerResult b = run(PlanMethod::Eth, c, gbs, slow);
      EXPECT_DOUBLE_EQ(a.best_objective_ms, b.best_objective_ms) << nodes << " gbs " << gbs;
      // The exhaustive search evaluates everything; the optimized one at most that.
      EXPECT_LE(a.stats.evaluated, b.stats.evaluated);
      EXPECT_EQ(b.stats.cache_hits, 0);
    }
  }
}

// Memory-tight clusters: the bounds that prune (stage speeds, memory capacity, the first phase
// of the unit split) must never cut the optimum.
TEST(Planner, OptimizedSearchEqualsExhaustiveWhenMemoryIsTight) {
  const std::string clusters[] = {
      R"({"device_type": "mid", "devices": 4}, {"device_type": "slow", "devices": 4})",
      R"({"device_type": "fast", "devices": 1}, {"device_type": "slow", "devices": 4},
         {"device_type": "slow", "devices": 2})",
  };
  for (const auto& nodes : clusters) {
    const ClusterSpec c = cluster_of(nodes);
    PlannerOptions fast = small_options();
    PlannerOptions slow = fast;
    slow.cpc = slow.ses = slow.oso = slow.dpo = false;
    for (std::int64_t gbs : {8, 31}) {
      const PlannerResult a = run(PlanMethod::Eth, c, gbs, fast);
      const PlannerResult b = run(PlanMethod::Eth, c, gbs, slow);
      EXPECT_DOUBLE_EQ(a.best_objective_ms, b.best_objective_ms) << nodes << " gbs " << gbs;
      EXPECT_EQ(a.stats.generated, a.stats.evaluated + a.stats.skipped_total());
    }
  }
}

// The layer baseline is Metis/HexiScale-style: one replicated shape, equal data, one micro-batch
// size, and no operator-level recompute (nothing or the whole unit per stage) unless asked.
TEST(Planner, LayerBaselineHasNoOperatorRecomputeUnlessAsked) {
  const ClusterSpec c = cluster_of(R"({"device_type": "mid", "devices": 4},
      {"device_type": "slow", "devices": 4})");
  PlannerOptions o = small_options();
  const PlannerResult layer = run(PlanMethod::Layer, c, 30, o);
  const auto& pipes = layer.plan.pipelines;
  ASSERT_FALSE(pipes.empty());
  for (const auto& p : pipes) {
    EXPECT_EQ(p.micro_batch_size, pipes.front().micro_batch_size);
    EXPECT_LE(std::abs(p.local_batch - pipes.front().local_batch), 1);
    ASSERT_EQ(p.stages.size(), pipes.front().stages.size());
    for (std::size_t s = 0; s < p.stages.size(); ++s) {
      const RecomputeSet& r = p.stages[s].recompute;
      EXPECT_TRUE(r.empty() || r.ops() == std::vector<RecomputeOp>{RecomputeOp::Unit});
      EXPECT_EQ(p.stages[s].device_type, pipes.front().stages[s].device_type);
      EXPECT_EQ(p.stages[s].first_unit, pipes.front().stages[s].first_unit);
      EXPECT_EQ(p.stages[s].tp, pipes.front().stages[s].tp);
    }
  }
  o.layer_operator_recompute = true;
  const PlannerResult layer_mo = run(PlanMethod::Layer, c, 30, o);
  EXPECT_LE(layer_mo.prediction.iteration_ms, layer.prediction.iteration_ms);
  const PlannerResult eth = run(PlanMethod::Eth, c, 30, small_options());
  EXPECT_LE(eth.prediction.iteration_ms, layer.prediction.iteration_ms);
  EXPECT_LE(eth.prediction.iteration_ms, layer_mo.prediction.iteration_ms);
}

TEST(Planner, DeterministicAndIndependentOfIdenticalNodeOrder) {
  const ClusterSpec a = cluster_of(R"({"device_type": "fast", "devices": 2},
      {"device_type": "slow", "devices": 2}, {"device_type": "fast", "devices": 2},
      {"device_type": "slow", "devices": 2})");
  const ClusterSpec b = cluster_of(R"({"device_type": "slow", "devices": 2},
      {"device_type": "slow", "devices": 2}, {"device_type": "fast", "devices": 2},
      {"device_type": "fast", "devices": 2})");
  const PlannerResult a1 = run(PlanMethod::Eth, a, 48, small_options());
  const PlannerResult a2 = run(PlanMethod::Eth, a, 48, small_options());
  EXPECT_EQ(plan_to_json(a1.plan).dump(), plan_to_json(a2.plan).dump());
  const PlannerResult b1 = run(PlanMethod::Eth, b, 48, small_options());
  EXPECT_DOUBLE_EQ(a1.best_objective_ms, b1.best_objective_ms);
  EXPECT_NEAR(a1.prediction.iteration_ms, b1.prediction.iteration_ms,
              1e-9 * a1.prediction.iteration_ms);
}

TEST(Planner, ThreeTypesUnevenNodesAndOddBatch) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 3},
      {"device_type": "fast", "devices": 1}, {"device_type": "mid", "devices": 2},
      {"device_type": "slow", "devices": 4}, {"device_type": "slow", "devices": 1})");
  for (auto m : {PlanMethod::Eth, PlanMethod::Layer}) {
    const PlannerResult r = run(m, c, 37, small_options());
    EXPECT_GT(r.prediction.iteration_ms, 0);
  }
}

TEST(Planner, SmallLocalBatchesKeepMicroBatchWithinThem) {
  // A fast device alone gets 12 of 16 samples while 16 was its best micro-batch size: the plan
  // must say micro-batch 12 (found on the emulated CPU cluster, where it once said 16 / 12).
  const ClusterSpec c = load_cluster("cpu-emulated");
  const ModelSpec m = model_preset("tiny");
  PlannerOptions o;
  o.tp = {1};
  const ProfileDb db = analytic_profile_db(m, c, {1}, o.micro_batch_sizes, 64);
  for (std::int64_t gbs : {5, 12, 16, 30}) {
    const PlannerResult r = plan_training(PlanMethod::Eth, m, c, db, gbs, 64, o);
    expect_valid(r.plan, c, db, gbs);
  }
}

// Grouped-query attention: tp must divide the kv heads as well as the query heads. The profile
// is the multi-head twin's (the same shapes), which does cover tp 4, so only the planner's own
// constraint keeps tp 4 out: with tp 4 alone the twin plans it and the GQA model has no plan.
TEST(Planner, NeverPlansTpThatDoesNotDivideKvHeads) {
  ModelSpec gqa = small_model();  // 8 heads
  gqa.kv_heads = 2;
  ModelSpec twin = small_model();
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 4},
      {"device_type": "slow", "devices": 4})");
  const ProfileDb twin_db = profile_for(twin, c);
  ProfileDb db(gqa);
  for (const auto& [key, entry] : twin_db.entries()) db.add(entry);
  PlannerOptions only4 = small_options();
  only4.tp = {4};
  bool twin_uses_4 = false;
  const PlannerResult t = plan_training(PlanMethod::Eth, twin, c, twin_db, 16, twin.seq_len, only4);
  for (const auto& p : t.plan.pipelines) {
    for (const auto& s : p.stages) twin_uses_4 |= s.tp == 4;
  }
  EXPECT_TRUE(twin_uses_4);
  for (PlanMethod method : {PlanMethod::Eth, PlanMethod::Uniform, PlanMethod::Layer}) {
    EXPECT_NE(test::error_of([&] {
                plan_training(method, gqa, c, db, 16, gqa.seq_len, only4);
              }),
              "(no error)");
    const PlannerResult r =
        plan_training(method, gqa, c, db, 16, gqa.seq_len, small_options());
    for (const auto& p : r.plan.pipelines) {
      for (const auto& s : p.stages) EXPECT_LE(s.tp, 2);
    }
    EXPECT_TRUE(validate_plan(r.plan, c).empty());
  }
}

TEST(Planner, NoFitNamesTheOverflowingDevice) {
  const ClusterSpec c = make_cluster(R"({"nodes": [{"device_type": "tinyfast", "devices": 2},
      {"device_type": "tinyslow", "devices": 2}], "device_types": {
      "tinyfast": {"tflops": 100, "memory_gb": 0.03, "intra_node_bandwidth_gbps": 800},
      "tinyslow": {"tflops": 40, "memory_gb": 0.02, "intra_node_bandwidth_gbps": 800}}})");
  const ModelSpec model = small_model();
  const ProfileDb db = profile_for(model, c);
  try {
    plan_training(PlanMethod::Eth, model, c, db, 16, model.seq_len, small_options());
    FAIL() << "a model four times the cluster's memory must not plan";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no eth plan fits memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("overflows stage"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device type tiny"), std::string::npos) << msg;
    EXPECT_NE(msg.find("over by"), std::string::npos) << msg;
    // MB-sized devices read in MB: the figure the user wrote (0.03 or 0.02 GB), not "0.00 GB".
    EXPECT_TRUE(msg.find("of its 30.0 MB") != std::string::npos ||
                msg.find("of its 20.0 MB") != std::string::npos)
        << msg;
  }
}

TEST(Planner, BadOptionsNameTheFlag) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 2})");
  const ModelSpec model = small_model();
  const ProfileDb db = profile_for(model, c);
  auto message = [&](std::int64_t gbs, PlannerOptions o) -> std::string {
    try {
      plan_training(PlanMethod::Eth, model, c, db, gbs, model.seq_len, o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(0, small_options()).find("--gbs"), std::string::npos);
  PlannerOptions o = small_options();
  o.alpha = 1.5;
  EXPECT_NE(message(8, o).find("--alpha"), std::string::npos);
  o = small_options();
  o.micro_batch_sizes = {0};
  EXPECT_NE(message(8, o).find("--micro-batch-sizes"), std::string::npos);
}

// The partition limit bounds the search's time: when it binds the plan is the best of what was
// visited, no better than the full search's, and the result says which limit bound.
TEST(Planner, PartitionLimitIsReportedWhenItBinds) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 4},
      {"device_type": "mid", "devices": 4}, {"device_type": "slow", "devices": 4})");
  const ModelSpec model = small_model();
  const ProfileDb db = profile_for(model, c);
  const PlannerResult full = plan_training(PlanMethod::Eth, model, c, db, 32, model.seq_len,
                                           small_options());
  EXPECT_TRUE(full.stats.limits.empty());
  EXPECT_FALSE(full.plan.search->contains("limits_reached"));
  PlannerOptions o = small_options();
  o.max_partitions = 3;
  const PlannerResult cut = plan_training(PlanMethod::Eth, model, c, db, 32, model.seq_len, o);
  EXPECT_EQ(cut.stats.limits.at("max_partitions"), 3);
  EXPECT_EQ(cut.plan.search->at("limits_reached").at("max_partitions"), 3);
  EXPECT_GE(cut.best_objective_ms, full.best_objective_ms);
  expect_valid(cut.plan, c, db, 32);
}

// With more devices than the global batch has samples, no cover of the cluster fits the
// pipeline limit (each pipeline takes a sample): the refusal names that limit and its count.
TEST(Planner, RefusalNamesTheSearchLimitThatBound) {
  const ClusterSpec c = cluster_of(R"({"device_type": "fast", "devices": 64},
      {"device_type": "slow", "devices": 64})");
  const ModelSpec model = ModelSpec{"small", 2, 256, 8, 128, 1024, 1024};
  const ProfileDb db = profile_for(model, c);
  try {
    plan_training(PlanMethod::Eth, model, c, db, 2, model.seq_len, small_options());
    FAIL() << "128 devices, 4 units, tp <= 4: at least 8 pipelines, and gbs 2 allows 2";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no eth plan within the search limits"), std::string::npos) << msg;
    EXPECT_NE(msg.find("partitions need more than 2 pipelines (every pipeline takes at least one "
                       "sample of the global batch of 2)"),
              std::string::npos)
        << msg;
  }
}

TEST(Planner, PaperPresetsPlanAndEthBeatsBaselines) {
  for (const char* name : {"350m-a100-rtx3090", "1.3b-910b2-910b4"}) {
    const ClusterSpec c = load_cluster(name);
    const ModelSpec model = model_preset(name[0] == '3' ? "gpt3-350m" : "gpt3-1.3b");
    const ProfileDb db = analytic_profile_db(model, c, {1, 2}, {1, 2, 4, 8}, model.seq_len);
    PlannerOptions o;
    o.tp = {1, 2};
    o.micro_batch_sizes = {1, 2, 4, 8};
    double eth_ms = 0;
    for (auto m : {PlanMethod::Eth, PlanMethod::Layer, PlanMethod::Uniform}) {
      const PlannerResult r = plan_training(m, model, c, db, 128, model.seq_len, o);
      expect_valid(r.plan, c, db, 128);
      if (m == PlanMethod::Eth) eth_ms = r.prediction.iteration_ms;
      EXPECT_LE(eth_ms, r.prediction.iteration_ms) << name << " " << plan_method_name(m);
    }
  }
}

}  // namespace
}  // namespace eth
