// The predictor's activation memory of a stage (in-flight slots x held bytes + workspace,
// cost/stage_costs.h) against the arena the runtime plans for that stage
// (PrecisionStage::planned_arena_bytes): embedding, middle and head stages, fp32 and bf16,
// several micro-batch sizes, recompute sets, dropout and tp 2. The profile entry the predictor
// reads is built as `eth profile --measure` builds it, from the runtime's one-unit buffers; the
// stages here hold several units and several slots, which the predictor composes on its own.
#include <gtest/gtest.h>

#include <algorithm>

#include "cost/predictor.h"
#include "train/arena_profile.h"
#include "train/precision_stage.h"

namespace eth {
namespace {

using test::aligned_model;
using test::arena_profile_entry;
using test::unit_activation;

StageComputeConfig unit_range(std::int64_t first, std::int64_t last, std::int64_t mbs,
                              std::int64_t slots, RecomputeSet rc, float dropout, std::int64_t tp) {
  return test::unit_range(aligned_model(), first, last, mbs, slots, rc, dropout, tp);
}

ClusterSpec cpu_cluster(std::int64_t devices) {
  ClusterSpec c;
  c.name = "cpus";
  c.nodes = {{"cpu", devices}};
  c.inter_node_bandwidth_gbps = 10;
  c.device_types["cpu"] = DeviceType{"cpu", 1, 100, 100, std::nullopt, 1.0};
  c.custom_types = {"cpu"};
  return c;
}

// One pipeline over `cuts` (first unit of each stage), tp `tp` per stage, every stage with `rc`.
Plan pipeline(const std::vector<std::int64_t>& cuts, std::int64_t mbs, std::int64_t k,
              RecomputeSet rc, std::int64_t tp) {
  const ModelSpec m = aligned_model();
  Plan plan;
  plan.model = m;
  plan.model_is_preset = false;
  plan.seq_len = m.seq_len;
  PipelinePlan pipe;
  pipe.micro_batch_size = mbs;
  pipe.local_batch = mbs * k;
  std::int64_t device = 0;
  for (std::size_t s = 0; s < cuts.size(); ++s) {
    StagePlan st;
    st.device_type = "cpu";
    st.tp = tp;
    st.first_unit = cuts[s];
    st.last_unit = s + 1 < cuts.size() ? cuts[s + 1] - 1 : m.num_units() - 1;
    st.recompute = rc;
    for (std::int64_t t = 0; t < tp; ++t) st.devices.push_back(device++);
    pipe.stages.push_back(st);
  }
  plan.gbs = pipe.local_batch;
  plan.pipelines = {pipe};
  return plan;
}

struct Case {
  Precision precision;
  std::int64_t mbs;
  RecomputeSet rc;
  float dropout;
  std::int64_t tp;
};

RecomputeSet set_of(std::initializer_list<RecomputeOp> ops) {
  RecomputeSet s;
  for (RecomputeOp op : ops) s.add(op);
  return s;
}

TEST(ArenaModel, ProfiledUnitBytesAreTheRuntimesActivationBytes) {
  // The one-unit differences above are StageCompute's own per-unit figures at tp 1.
  const ModelSpec m = aligned_model();
  for (Precision p : {Precision::Fp32, Precision::Bf16}) {
    for (std::int64_t u = 0; u < m.num_units(); ++u) {
      const PrecisionStage sc(p, m, unit_range(u, u, 2, 1, {}, 0.1f, 1));
      const ActivationBytes& want = sc.activation_bytes(u);
      const ActivationBytes got = unit_activation(p, m, u, 2, 0.1f, 1);
      EXPECT_DOUBLE_EQ(got.total(), want.total()) << "unit " << u;
      EXPECT_DOUBLE_EQ(got.unit_input, want.unit_input) << "unit " << u;
      for (std::size_t k = 0; k < want.op.size(); ++k) {
        EXPECT_DOUBLE_EQ(got.op[k], want.op[k]) << "unit " << u << " class " << k;
      }
    }
  }
}

TEST(ArenaModel, PredictedActivationMemoryIsThePlannedArena) {
  const ModelSpec m = aligned_model();  // units: 0 embedding, 1-4 blocks, 5 head
  std::vector<Case> cases;
  for (Precision p : {Precision::Fp32, Precision::Bf16}) {
    for (std::int64_t mbs : {1, 2, 3}) {
      cases.push_back({p, mbs, {}, 0.0f, 1});
      cases.push_back({p, mbs, set_of({RecomputeOp::AttnSoftmax, RecomputeOp::MlpAct}), 0.1f, 1});
      cases.push_back({p, mbs, set_of({RecomputeOp::Unit}), 0.1f, 1});
    }
    cases.push_back({p, 2, {}, 0.1f, 2});
    cases.push_back({p, 2, set_of({RecomputeOp::Unit}), 0.0f, 2});
  }
  // Stages: embedding alone, embedding + block, middle blocks, block + head, head alone.
  const std::vector<std::vector<std::int64_t>> layouts = {{0, 1, 3, 5}, {0, 2, 4}};
  for (const Case& c : cases) {
    ProfileDb profile(m);
    profile.add(arena_profile_entry(c.precision, m, c.mbs, c.dropout, c.tp));
    for (const auto& cuts : layouts) {
      const std::int64_t k = 5;  // micro-batches: more than stages, so in-flight is S - s
      const Plan plan = pipeline(cuts, c.mbs, k, c.rc, c.tp);
      PredictOptions po;
      po.precision = c.precision;
      const Prediction pred =
          predict(plan, cpu_cluster(static_cast<std::int64_t>(cuts.size()) * c.tp), profile, po);
      const auto S = static_cast<std::int64_t>(cuts.size());
      for (std::int64_t s = 0; s < S; ++s) {
        const StagePlan& st = plan.pipelines[0].stages[static_cast<std::size_t>(s)];
        const StagePrediction& sp = pred.pipelines[0].stages[static_cast<std::size_t>(s)];
        ASSERT_EQ(sp.in_flight, S - s);
        const auto arena = PrecisionStage::planned_arena_bytes(
            c.precision, m,
            unit_range(st.first_unit, st.last_unit, c.mbs, S - s, c.rc, c.dropout, c.tp));
        EXPECT_DOUBLE_EQ(sp.memory.activations + sp.memory.workspace,
                         static_cast<double>(arena))
            << precision_name(c.precision) << " mbs " << c.mbs << " tp " << c.tp << " dropout "
            << c.dropout << " recompute bits " << int(c.rc.bits()) << " units "
            << st.first_unit << ".." << st.last_unit << " slots " << S - s;
      }
    }
  }
}

}  // namespace
}  // namespace eth
