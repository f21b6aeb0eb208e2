// Distributed runs on a GPU kernel set for the tests: a plan's ranks as threads sharing the
// emulated device (LocalWorld for host values, a second LocalWorld carrying device buffers
// device to device), and single-process runs on the same device, each returning what
// runtime_test_util.h's runs return, the state downloaded through its backend (a host read of
// the emulated device's memory would be a SIGSEGV). Test-only.
#pragma once

#include <omp.h>

#include <mutex>
#include <optional>

#include "runtime/device_memory_policy.h"
#include "train/state_backend.h"
#include "runtime_test_util.h"

namespace eth::test {

// Every state buffer of `state` on the host (downloaded), in its own layout.
struct HostState {
  std::vector<float> params, grads, adam_m, adam_v;
};
inline HostState download_state(const ModelState& s) {
  HostState h;
  const auto n = static_cast<std::size_t>(s.numel());
  h.params.resize(n);
  h.adam_m.resize(n);
  h.adam_v.resize(n);
  h.grads.resize(static_cast<std::size_t>(s.layout().grad_numel()));
  s.backend().download(h.params.data(), s.params(), s.numel());
  s.backend().download(h.adam_m.data(), s.adam_m(), s.numel());
  s.backend().download(h.adam_v.data(), s.adam_v(), s.numel());
  s.backend().download(h.grads.data(), s.grads(), s.layout().grad_numel());
  return h;
}

// Single-process training on c.device.
inline RunResult run_single_on(const TrainConfig& c, std::int64_t steps,
                               const std::optional<std::filesystem::path>& resume = {}) {
  const OneThread one_thread;
  Trainer t(c, resume);
  RunResult r;
  for (std::int64_t i = 0; i < steps; ++i) {
    const StepStats s = t.step();
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
  }
  HostState h = download_state(t.state());
  r.params = std::move(h.params);
  r.grads = std::move(h.grads);
  r.adam_m = std::move(h.adam_m);
  r.adam_v = std::move(h.adam_v);
  return r;
}

// Copies a rank's rows of every tensor of `layout` from `src` (a parameter-layout buffer, or
// with `grads` the gradient buffer, chunk by chunk) into the whole-model `dst` laid out by `full`.
inline void place_rows(const ParamLayout& full, const ParamLayout& layout, const float* src,
                       float* dst, bool grads) {
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
}

// `steps` steps of `plan` on plan.num_devices() threads on c.device (the CPU too, for the
// checkpoint tests), as run_plan does; with save_dir a checkpoint after the last step.
inline RunResult run_plan_on(const TrainConfig& c, const Plan& plan, std::int64_t steps,
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
  const int ranks = static_cast<int>(plan.num_devices());
  LocalWorld world(ranks, opt.comm);
  const DeviceMemoryOps* ops = runtime_memory(c.device).comm_ops();
  std::optional<LocalWorld> device_world;
  if (ops != nullptr) device_world.emplace(ranks, opt.comm, *ops);
  std::mutex mu;
  std::vector<std::pair<HostState, ParamLayout>> copies;
  auto errors = run_on_threads(world, [&](Communicator comm) {
    omp_set_num_threads(1);
    const Communicator dev = device_world ? device_world->comm(comm.rank()) : comm;
    DistributedTrainer t(dc, comm, dev, opt.resume);
    for (std::int64_t i = 0; i < steps; ++i) {
      const StepStats s = t.step();
      if (comm.rank() == 0) {
        r.losses.push_back(s.loss);
        r.norms.push_back(s.grad_norm);
      }
    }
    if (opt.save_dir) t.save_checkpoint(*opt.save_dir);
    HostState h = download_state(t.state());
    const ParamLayout& layout = t.state().layout();
    std::lock_guard lock(mu);
    if (t.place().pipeline == 0 && t.place().dp_rank == 0) {
      place_rows(full, layout, h.params.data(), r.params.data(), false);
      place_rows(full, layout, h.grads.data(), r.grads.data(), true);
      place_rows(full, layout, h.adam_m.data(), r.adam_m.data(), false);
      place_rows(full, layout, h.adam_v.data(), r.adam_v.data(), false);
    }
    copies.emplace_back(std::move(h), layout);
  });
  for (std::size_t i = 0; i < errors.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
  }
  for (const auto& [h, layout] : copies) {
    std::vector<float> p(r.params), v(r.adam_v);
    place_rows(full, layout, h.params.data(), p.data(), false);
    place_rows(full, layout, h.adam_v.data(), v.data(), false);
    if (p != r.params || v != r.adam_v) r.replicas_agree = false;
  }
  return r;
}

}  // namespace eth::test
