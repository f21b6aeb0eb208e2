// Helpers for the runtime tests: hand-built plans over a one-node cluster of `cpu` devices, and
// runs of the same training under one process and under a plan on LocalWorld threads.
// Test-only.
#pragma once

#include <omp.h>

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/local/local_comm.h"
#include "runtime/dist_trainer.h"
#include "train/train_test_util.h"
#include "train/trainer.h"

namespace eth::test {

// Three blocks, every dimension small and distinct (5 units: embedding, 3 blocks, head).
inline ModelSpec small3() { return ModelSpec{"small3", 3, 16, 2, 8, 32, 48}; }

struct StageSpec {
  std::int64_t first = 0, last = 0, dp = 1;
  RecomputeSet recompute{};
  std::int64_t tp = 1;
};
struct PipeSpec {
  std::int64_t mbs = 1, local = 1;
  std::vector<StageSpec> stages;
};

// Devices are numbered in pipeline, stage, replica, tp rank order; gbs is the sum of the local
// batches.
inline Plan make_plan(const ModelSpec& m, std::int64_t seq, const std::vector<PipeSpec>& pipes) {
  Plan p;
  p.model = m;
  p.model_is_preset = false;
  p.seq_len = seq;
  std::int64_t next = 0;
  for (const PipeSpec& ps : pipes) {
    PipelinePlan pp;
    pp.micro_batch_size = ps.mbs;
    pp.local_batch = ps.local;
    p.gbs += ps.local;
    for (const StageSpec& ss : ps.stages) {
      StagePlan st;
      st.device_type = "cpu";
      st.dp = ss.dp;
      st.tp = ss.tp;
      st.first_unit = ss.first;
      st.last_unit = ss.last;
      st.recompute = ss.recompute;
      for (std::int64_t d = 0; d < ss.dp * ss.tp; ++d) st.devices.push_back(next++);
      pp.stages.push_back(st);
    }
    p.pipelines.push_back(pp);
  }
  return p;
}

inline ClusterSpec cpu_cluster(std::int64_t devices) {
  ClusterSpec c;
  c.nodes.push_back(NodeSpec{"cpu", devices});
  c.device_types.emplace("cpu", *find_device_type_preset("cpu"));
  return c;
}

inline TrainConfig train_config(const ModelSpec& m, const std::filesystem::path& data,
                                std::int64_t gbs, std::int64_t seq, std::int64_t steps) {
  TrainConfig c;
  c.model = m;
  c.data = data;
  c.steps = steps;
  c.global_batch = gbs;
  c.micro_batch = gbs;
  c.seq_len = seq;
  c.lr = LrSchedule{1e-2, 1e-3, 1, steps};
  c.dropout = 0.1f;
  c.seed = 7;
  return c;
}

// What a run leaves: per-step loss and norm, and the whole model's parameters, gradients of the
// last step and Adam moments in the single-process layout (units 0..U-1 back to back).
struct RunResult {
  std::vector<double> losses, norms;
  std::vector<float> params, grads, adam_m, adam_v;
  // Distributed runs: every holder of every unit (all pipelines, all dp replicas) ended with
  // bitwise the same parameters and Adam moments as pipeline 0's dp rank 0.
  bool replicas_agree = true;
};

// On one OpenMP thread (results do not depend on the count): on a shared 2-core machine the
// barriers of a second thread can turn milliseconds into seconds.
inline RunResult run_single(const TrainConfig& c, std::int64_t steps) {
  const OneThread one_thread;
  Trainer t(c);
  RunResult r;
  for (std::int64_t i = 0; i < steps; ++i) {
    const StepStats s = t.step();
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
  }
  const auto n = static_cast<std::size_t>(t.state().numel());
  r.params.assign(t.state().params(), t.state().params() + n);
  r.grads.assign(t.state().grads(), t.state().grads() + n);
  r.adam_m.assign(t.state().adam_m(), t.state().adam_m() + n);
  r.adam_v.assign(t.state().adam_v(), t.state().adam_v() + n);
  return r;
}

struct DistRun {
  AggregationMode mode = AggregationMode::Block;
  std::optional<std::filesystem::path> resume;
  std::optional<std::filesystem::path> save_dir;  // checkpoint after the last step
  CommOptions comm{};
};

// Runs `steps` steps of `plan` on plan.num_devices() threads. Every unit's state is read from
// its holders in pipeline 0 at dp rank 0 (each tp rank's rows put in their place); the test
// checks elsewhere that replicas agree.
inline RunResult run_plan(const TrainConfig& c, const Plan& plan, std::int64_t steps,
                          const DistRun& opt = {}) {
  DistTrainConfig dc;
  dc.train = c;
  dc.plan = plan;
  dc.aggregation = opt.mode;
  const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
  RunResult r;
  const auto n = static_cast<std::size_t>(full.numel());
  r.params.resize(n);
  r.grads.resize(n);
  r.adam_m.resize(n);
  r.adam_v.resize(n);
  LocalWorld world(static_cast<int>(plan.num_devices()), opt.comm);
  std::mutex mu;
  struct Copy {
    std::vector<float> params, adam_v;
    ParamLayout layout;
  };
  std::vector<Copy> copies;
  // Copies a rank's rows of every tensor of `layout` from `src` (a parameter-layout buffer, or
  // with `grads` the gradient buffer, chunk by chunk) into the whole-model `dst`.
  auto place = [&full](const ParamLayout& layout, const float* src, float* dst, bool grads) {
    for (const UnitSlot& u : layout.units()) {
      const UnitSlot& whole = full.unit(u.unit);
      for (std::size_t i = 0; i < u.tensors.size(); ++i) {
        const TensorSlot& t = u.tensors[i];
        const std::int64_t row = t.row_size();
        if (!grads) {
          std::copy_n(src + t.offset, t.desc.numel(),
                      dst + whole.tensors[i].offset + t.rows.begin * row);
          continue;
        }
        for (const GradChunk& g : t.grad) {
          std::copy_n(src + g.offset, g.rows.size() * row,
                      dst + whole.tensors[i].offset + g.rows.begin * row);
        }
      }
    }
  };
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    DistributedTrainer t(dc, comm, opt.resume);
    for (std::int64_t i = 0; i < steps; ++i) {
      const StepStats s = t.step();
      if (comm.rank() == 0) {
        r.losses.push_back(s.loss);
        r.norms.push_back(s.grad_norm);
      }
    }
    if (opt.save_dir) t.save_checkpoint(*opt.save_dir);
    const ParamLayout& layout = t.state().layout();
    std::lock_guard lock(mu);
    const std::size_t mine = static_cast<std::size_t>(t.state().numel());
    copies.push_back(Copy{{t.state().params(), t.state().params() + mine},
                          {t.state().adam_v(), t.state().adam_v() + mine},
                          layout});
    if (t.place().pipeline != 0 || t.place().dp_rank != 0) return;
    place(layout, t.state().params(), r.params.data(), false);
    place(layout, t.state().grads(), r.grads.data(), true);
    place(layout, t.state().adam_m(), r.adam_m.data(), false);
    place(layout, t.state().adam_v(), r.adam_v.data(), false);
  });
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
  }
  // Every holder's rows equal pipeline 0's, bitwise.
  for (const Copy& cp : copies) {
    std::vector<float> p(r.params), v(r.adam_v);
    place(cp.layout, cp.params.data(), p.data(), false);
    place(cp.layout, cp.adam_v.data(), v.data(), false);
    if (p != r.params || v != r.adam_v) r.replicas_agree = false;
  }
  return r;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}
inline double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return m;
}

}  // namespace eth::test
