// Small builders for the simulator tests: plans from a compact description (device ids handed
// out in order) and stage costs written by hand, so expected times can be derived in the test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/stage_costs.h"
#include "plan/plan.h"

namespace eth::test {

// 4 transformer blocks: units 0..5.
inline ModelSpec sim_model(std::int64_t layers = 4) {
  return ModelSpec{"custom", layers, 8, 2, 4, 16, 32};
}

struct StageSpec {
  std::int64_t first_unit, last_unit;
  std::int64_t tp = 1, dp = 1;
  std::string type = "A100";
};
struct PipeSpec {
  std::int64_t micro_batch_size, local_batch;
  std::vector<StageSpec> stages;
};

inline Plan make_plan(const ModelSpec& m, const std::vector<PipeSpec>& pipes) {
  Plan plan;
  plan.model = m;
  plan.model_is_preset = false;
  plan.seq_len = m.seq_len;
  std::int64_t next = 0;
  for (const auto& ps : pipes) {
    PipelinePlan pp;
    pp.micro_batch_size = ps.micro_batch_size;
    pp.local_batch = ps.local_batch;
    plan.gbs += ps.local_batch;
    for (const auto& ss : ps.stages) {
      StagePlan st;
      st.device_type = ss.type;
      st.tp = ss.tp;
      st.dp = ss.dp;
      st.first_unit = ss.first_unit;
      st.last_unit = ss.last_unit;
      for (std::int64_t i = 0; i < ss.tp * ss.dp; ++i) st.devices.push_back(next++);
      pp.stages.push_back(st);
    }
    plan.pipelines.push_back(pp);
  }
  return plan;
}

// One stage's cost: forward f, backward split over its units as given (sums to backward),
// activation send time, activation bytes per micro-batch.
inline StageCost stage_cost(double f, std::vector<double> unit_b, double send, double act = 0) {
  StageCost c;
  c.forward_ms = f;
  for (double b : unit_b) c.backward_ms += b;
  c.unit_backward_ms = std::move(unit_b);
  c.unit_forward_ms.assign(c.unit_backward_ms.size(),
                           f / static_cast<double>(c.unit_backward_ms.size()));
  c.send_ms = send;
  c.activation_bytes = act;
  return c;
}

// Every stage of every pipeline costs f and b (b spread evenly over the stage's units), sends
// cost `send`, the optimizer `opt`; activations `act` bytes, static memory `stat` bytes.
inline std::vector<PipelineCosts> uniform_costs(const Plan& plan, double f, double b,
                                                double send = 0, double opt = 0, double act = 0,
                                                double stat = 0) {
  std::vector<PipelineCosts> out;
  for (const auto& pipe : plan.pipelines) {
    PipelineCosts pc;
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      const auto n = static_cast<std::size_t>(pipe.stages[s].num_units());
      const bool last = s + 1 == pipe.stages.size();
      StageCost c =
          stage_cost(f, std::vector<double>(n, b / static_cast<double>(n)), last ? 0 : send, act);
      c.backward_ms = b;
      pc.full.push_back(c);
      pc.last.push_back(c);
      StageStaticMemory m;
      m.weight_bytes = stat;
      pc.memory.push_back(m);
      pc.optimizer_ms.push_back(opt);
    }
    out.push_back(pc);
  }
  return out;
}

}  // namespace eth::test
