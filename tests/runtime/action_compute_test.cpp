// The decorators of a compute action (runtime/action_compute.h) around a fake kernel that
// records what it was handed: sample gathering puts each micro-batch's tokens and targets,
// worked out here from the global batch, in its slot, where its backward finds them; tracing
// records each action as its event; emulation makes an action of a nominal length last at least
// that long and hands a finished unit's gradient on no earlier than the emulated device would.
#include "runtime/action_compute.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace eth::action_compute_test {
namespace {

struct Seen {
  ActionKind kind = ActionKind::Forward;
  std::int64_t microbatch = 0;
  MicroBatch batch;
  std::vector<std::int32_t> tokens, targets;
};

// The innermost layer: records each call, runs the backward's unit_done for `units` (highest
// first, as a backward finishes them), and reports `seconds`.
class Recorder final : public ActionCompute {
 public:
  explicit Recorder(std::vector<Seen>* seen, std::vector<std::int64_t> units = {})
      : seen_(seen), units_(std::move(units)) {}
  double run(ComputeCall& c) override {
    Seen s;
    s.kind = c.kind;
    s.microbatch = c.microbatch;
    s.batch = c.batch;
    if (c.batch.tokens != nullptr) {
      const std::int64_t n = c.batch.size * kSeq;
      s.tokens.assign(c.batch.tokens, c.batch.tokens + n);
      s.targets.assign(c.batch.targets, c.batch.targets + n);
    }
    seen_->push_back(std::move(s));
    if (c.unit_done) {
      for (std::int64_t u : units_) c.unit_done(u);
    }
    return 0.25;
  }
  static constexpr std::int64_t kSeq = 4;

 private:
  std::vector<Seen>* seen_;
  std::vector<std::int64_t> units_;
};

ComputeCall call(ActionKind kind, std::int64_t microbatch, Chunk chunk, const StepInput* in) {
  ComputeCall c;
  c.kind = kind;
  c.microbatch = microbatch;
  c.chunk = chunk;
  c.input = in;
  return c;
}

TEST(ActionCompute, GatheringPutsEachMicroBatchsSamplesInItsSlotForItsBackward) {
  constexpr std::int64_t T = Recorder::kSeq;
  std::vector<std::uint16_t> data(200);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint16_t>(i * 3 % 97);
  std::vector<SampleRef> batch;
  for (std::int64_t k = 0; k < 12; ++k) batch.push_back(SampleRef{100 + k, (k * 13) % 150});
  StepInput in;
  in.step = 6;
  in.batch = batch;
  in.tokens = data;
  in.loss_scale = 0.125;
  // The pipeline's samples start at 2 in the global batch, micro-batches of 3; this replica
  // takes at most 2 samples of each; two slots.
  const SampleLayout layout{2, 3, T, 2, 2};
  std::vector<Seen> seen;
  auto compute = gather_samples(std::make_unique<Recorder>(&seen), layout);
  // What sample g of the global batch holds: tokens [offset, offset + T) and the next ones.
  auto expect_samples = [&](const Seen& s, std::int64_t first_global, const char* what) {
    ASSERT_EQ(s.tokens.size(), static_cast<std::size_t>(s.batch.size * T)) << what;
    for (std::int64_t b = 0; b < s.batch.size; ++b) {
      const SampleRef& r = batch[static_cast<std::size_t>(first_global + b)];
      for (std::int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(s.tokens[static_cast<std::size_t>(b * T + t)],
                  data[static_cast<std::size_t>(r.offset + t)])
            << what;
        EXPECT_EQ(s.targets[static_cast<std::size_t>(b * T + t)],
                  data[static_cast<std::size_t>(r.offset + t + 1)])
            << what;
      }
    }
  };
  ComputeCall f0 = call(ActionKind::Forward, 0, {1, 2}, &in);  // global samples 3, 4
  EXPECT_EQ(compute->run(f0), 0.25);
  ComputeCall f1 = call(ActionKind::Forward, 1, {0, 1}, &in);  // global sample 5
  compute->run(f1);
  // The backward of micro-batch 0 reads its slot, whatever the input holds by then.
  std::vector<std::uint16_t> other(200, 1);
  StepInput changed = in;
  changed.tokens = other;
  ComputeCall b0 = call(ActionKind::Backward, 0, {1, 2}, &changed);
  compute->run(b0);
  ComputeCall f2 = call(ActionKind::Forward, 2, {0, 2}, &in);  // global samples 8, 9; slot 0
  compute->run(f2);
  ASSERT_EQ(seen.size(), 4u);
  expect_samples(seen[0], 3, "F0");
  expect_samples(seen[1], 5, "F1");
  expect_samples(seen[2], 3, "B0");
  expect_samples(seen[3], 8, "F2");
  EXPECT_EQ(seen[0].batch.first_sample, 103);  // the sample's global index
  EXPECT_EQ(seen[1].batch.first_sample, 105);
  EXPECT_EQ(seen[3].batch.first_sample, 108);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.batch.step, 6);
    EXPECT_EQ(s.batch.loss_scale, 0.125);
  }
  EXPECT_EQ(seen[0].batch.size, 2);
  EXPECT_EQ(seen[1].batch.size, 1);
}

TEST(ActionCompute, TracingRecordsEachActionAsItsEventOnlyInChosenSteps) {
  std::vector<Seen> seen;
  TraceRecorder trace({5});
  auto compute = trace_compute(std::make_unique<Recorder>(&seen), &trace);
  trace.begin_step(4);  // not chosen
  ComputeCall f = call(ActionKind::Forward, 3, {0, 1}, nullptr);
  compute->run(f);
  trace.end_step();
  EXPECT_TRUE(trace.events().empty());
  trace.begin_step(5);
  compute->run(f);
  ComputeCall b = call(ActionKind::Backward, 4, {0, 1}, nullptr);
  EXPECT_EQ(compute->run(b), 0.25);
  trace.end_step();
  std::vector<std::pair<TraceKind, std::int64_t>> got;
  for (const TraceEvent& e : trace.events()) {
    if (e.kind == TraceKind::Forward || e.kind == TraceKind::Backward) {
      got.emplace_back(e.kind, e.microbatch);
      EXPECT_EQ(e.step, 5);
      EXPECT_LE(e.start_ns, e.end_ns);
    }
  }
  EXPECT_EQ(got, (std::vector<std::pair<TraceKind, std::int64_t>>{{TraceKind::Forward, 3},
                                                                 {TraceKind::Backward, 4}}));
  EXPECT_EQ(seen.size(), 3u);  // every call reached the kernel, traced or not
  auto plain = trace_compute(std::make_unique<Recorder>(&seen), nullptr);
  EXPECT_EQ(plain->run(f), 0.25);
}

// Lower bounds only: a sleep to a deadline on the monotonic clock never ends early. Each action
// gets an emulator of its own, so no lateness carried from an earlier op shortens it.
TEST(ActionCompute, EmulationLastsTheNominalLengthAndHandsUnitsOnAtTheirOffsets) {
  NominalStageTimes n;
  n.forward_ms = 3;
  n.last_forward_ms = 6;
  n.backward_ms = 4;
  n.last_backward_ms = 5;
  n.unit_backward_ms = {1, 3};  // units 4 and 5: unit 5's gradient after 3 ms, unit 4's after 4
  n.last_unit_backward_ms = {2, 3};
  std::vector<Seen> seen;
  for (std::int64_t mb : {0, 1}) {  // 1 is the last of 2 micro-batches
    Emulator emulator(2.0);
    auto compute = emulate_compute(
        std::make_unique<Recorder>(&seen, std::vector<std::int64_t>{5, 4}), emulator, n, 2, 4);
    const std::int64_t f0 = TraceRecorder::now_ns();
    ComputeCall f = call(ActionKind::Forward, mb, {0, 1}, nullptr);
    const double forward = compute->run(f);
    const double want_f = mb == 0 ? n.forward_ms : n.last_forward_ms;
    EXPECT_GE(forward, want_f * 1e-3) << "micro-batch " << mb;
    EXPECT_GE(TraceRecorder::now_ns() - f0, nominal_ns(want_f));
  }
  for (std::int64_t mb : {0, 1}) {
    Emulator emulator(2.0);
    auto compute = emulate_compute(
        std::make_unique<Recorder>(&seen, std::vector<std::int64_t>{5, 4}), emulator, n, 2, 4);
    std::vector<std::pair<std::int64_t, std::int64_t>> done;  // unit, ns after the call
    ComputeCall b = call(ActionKind::Backward, mb, {0, 1}, nullptr);
    std::int64_t t0 = 0;
    b.unit_done = [&](std::int64_t u) { done.emplace_back(u, TraceRecorder::now_ns() - t0); };
    t0 = TraceRecorder::now_ns();
    const double wall = compute->run(b);
    ASSERT_EQ(done.size(), 2u) << "a hand-over outlived its op";
    EXPECT_EQ(done[0].first, 5);
    EXPECT_EQ(done[1].first, 4);
    const std::vector<double>& parts = mb == 0 ? n.unit_backward_ms : n.last_unit_backward_ms;
    EXPECT_GE(done[0].second, nominal_ns(parts[1])) << "micro-batch " << mb;
    EXPECT_GE(done[1].second, nominal_ns(parts[0] + parts[1])) << "micro-batch " << mb;
    EXPECT_GE(wall, (mb == 0 ? n.backward_ms : n.last_backward_ms) * 1e-3);
  }
  // Without a stretch a unit is handed on as the kernel finishes it, inside the call.
  Emulator plain(1.0);
  auto direct = emulate_compute(std::make_unique<Recorder>(&seen, std::vector<std::int64_t>{7}),
                                plain, std::nullopt, 1, 7);
  std::vector<std::int64_t> units;
  ComputeCall b = call(ActionKind::Backward, 0, {0, 1}, nullptr);
  b.unit_done = [&](std::int64_t u) { units.push_back(u); };
  direct->run(b);
  EXPECT_EQ(units, std::vector<std::int64_t>{7});
}

}  // namespace
}  // namespace eth::action_compute_test
