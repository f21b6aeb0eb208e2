// Distributed training on a GPU kernel set, run on the host-emulated device (its memory
// PROT_NONE outside the device layer, so any host read or write of a stage buffer, a message,
// a gradient or a weight by the runtime is a SIGSEGV that fails the test): a heterogeneous plan
// (two pipelines of unequal local batches, a partial micro-batch, tp 2 in one stage, dp 2 in
// another) with its ranks as threads sharing the device, messages and reductions device to
// device, against single-process training on the same device for 20 steps; the three
// aggregation modes and recompute bitwise; a checkpoint moved CPU plan -> emulated plan -> CPU
// plan. The same plan over MPI (each rank its own emulated device, host-staged messages) is
// tests/runtime/emulated_cli_test.cpp.
//
// The bounds, and why. The plan and the single process run the same emulated kernels on the
// same bf16 tensors: a stage boundary sends the bf16 tensor one process keeps, the tp stage
// all-reduces fp32 partial sums and rounds once where one process rounds its product, and
// gradients accumulate and all-reduce in fp32. A plan changes only the order of fp32 additions
// (weight gradients over micro-batches, pipelines and tp ranks; GEMM blocking at another batch
// size), so as on the CPU bf16 set (bf16_equivalence_test.cpp, the same argument):
//   - first step: the loss agrees to 1e-6 relative and the gradient norm to 1e-5. The gradient
//     agrees to 2^-8 (one bf16 ulp) of its largest element: the plan's GEMMs run at other row
//     counts (micro-batches of 4, 2 and 3 rows of samples, dp chunks of 2 and 1, against 9 in
//     one process), where oneDNN may cut the fp32 reduction differently, so now and then a bf16
//     activation (or activation gradient) rounds the other way, one bf16 ulp in one term of a
//     weight gradient's sum over B T rows (measured 1.5e-4 of the largest element; 1.4e-7 on
//     the CPU test's narrower model, whose GEMMs happened to round alike). A lost micro-batch
//     or a doubled shard is > 1e-1 of it;
//   - later steps: bitwise until an fp32 difference first moves a bf16 weight copy across a
//     rounding midpoint, then two bf16 trainings a few bf16 ulps apart: the loss gap stays below
//     2e-3 relative at every step; a lost micro-batch or a doubled shard moves it by > 1e-2;
//   - final weights (20 steps, lr 1e-2): AdamW moves an element by about lr a step whatever its
//     gradient's size, so weights that separated move apart by at most ~lr per step; their
//     largest difference is bounded by 20 lr = 0.2 against weights of size ~1 (the layer norms'),
//     and their relative L2 difference by 2e-2.
// Not bitwise, because the plan's micro-batches are other sizes than the single process's: the
// same kernels in the same order would be bitwise, and are where the orders are the same (the
// aggregation modes, recompute, a resume).
#include <gtest/gtest.h>

#include <cmath>

#include "emulated_dist_util.h"
#include "kernels/emulated/runtime.h"
#include "runtime/grad_sync.h"
#include "runtime/placement.h"
#include "train/checkpoint.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kSeq = 8;
constexpr double kLossTol = 2e-3;  // relative, at every step (above)

// 4 heads of 8 and ffn 64 (tp 2 divides both), vocabulary 31 (uneven over tp 2); units 0..4.
ModelSpec model() { return ModelSpec{"emu-tp", 3, 32, 4, kSeq, 31, 64}; }

TrainConfig config(const Plan& plan, const fs::path& dir, std::int64_t steps,
                   ComputeDevice device = ComputeDevice::Emulated) {
  TrainConfig c =
      test::train_config(plan.model, test::synthetic_file(dir, 6000, 31), plan.gbs, kSeq, steps);
  c.precision = Precision::Bf16;
  c.device = device;
  return c;
}

test::StageSpec stage(std::int64_t first, std::int64_t last, std::int64_t tp = 1,
                      std::int64_t dp = 1, RecomputeSet rc = {}) {
  return test::StageSpec{first, last, dp, rc, tp};
}

// Pipeline A: units 0-1 at tp 2 (the vocabulary-parallel embedding), units 2-4; micro-batch 4
// over 6 samples (the last micro-batch holds 2). Pipeline B: units 0-2 at dp 2 (chunks of 2 and
// 1), units 3-4; micro-batch 3 over 3 samples. 6 ranks, global batch 9.
Plan heterogeneous_plan(RecomputeSet rc = {}) {
  return test::make_plan(model(), kSeq,
                         {{4, 6, {stage(0, 1, 2, 1, rc), stage(2, 4, 1, 1, rc)}},
                          {3, 3, {stage(0, 2, 1, 2, rc), stage(3, 4)}}});
}

double max_relative_gap(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double g = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    g = std::max(g, std::abs(a[i] - b[i]) / std::abs(a[i]));
  }
  return g;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(a[i]) * a[i];
  }
  return std::sqrt(d / n);
}

TEST(EmulatedDist, FirstStepEqualsOneProcessToABf16Ulp) {
  const fs::path dir = test::temp_dir("emu_dist_first");
  const Plan plan = heterogeneous_plan();
  const TrainConfig c = config(plan, dir, 1);
  const test::RunResult single = test::run_single_on(c, 1);
  const test::RunResult dist = test::run_plan_on(c, plan, 1);
  const double gmax = test::max_abs(single.grads);
  ASSERT_GT(gmax, 0);
  EXPECT_LT(test::max_diff(dist.grads, single.grads), std::ldexp(1.0, -8) * gmax);
  std::printf("first step: largest gradient difference %.3g of the largest element\n",
              test::max_diff(dist.grads, single.grads) / gmax);
  EXPECT_NEAR(dist.losses[0], single.losses[0], 1e-6 * single.losses[0]);
  EXPECT_NEAR(dist.norms[0], single.norms[0], 1e-5 * single.norms[0]);
}

TEST(EmulatedDist, HeterogeneousPlanOnThreadsSharingTheDeviceTrainsLikeOneProcessFor20Steps) {
  const fs::path dir = test::temp_dir("emu_dist_20");
  const Plan plan = heterogeneous_plan();
  const std::int64_t steps = 20;
  const TrainConfig c = config(plan, dir, steps);
  const test::RunResult single = test::run_single_on(c, steps);
  const test::RunResult dist = test::run_plan_on(c, plan, steps);
  ASSERT_EQ(dist.losses.size(), static_cast<std::size_t>(steps));
  const double gap = max_relative_gap(single.losses, dist.losses);
  EXPECT_LT(gap, kLossTol);
  EXPECT_TRUE(dist.replicas_agree);
  EXPECT_LT(single.losses.back(), 0.8 * single.losses.front());  // it trained
  EXPECT_LT(test::max_diff(dist.params, single.params), 20 * 1e-2);
  const double l2 = relative_l2(single.params, dist.params);
  EXPECT_LT(l2, 2e-2);
  std::printf("20 steps: largest loss gap %.3g relative, weights %.3g relative L2, largest "
              "weight difference %.3g\n",
              gap, l2, test::max_diff(dist.params, single.params));
}

TEST(EmulatedDist, AggregationModesAndRecomputeAreBitwise) {
  // The same holders sum the same fp32 numbers in every mode (device-wise zeroes its padding on
  // the device), and recompute reruns the same kernels on the same inputs: bitwise.
  const fs::path dir = test::temp_dir("emu_dist_modes");
  const Plan plan = heterogeneous_plan();
  const TrainConfig c = config(plan, dir, 3);
  test::DistRun opt;
  const test::RunResult block = test::run_plan_on(c, plan, 3, opt);
  for (AggregationMode m : {AggregationMode::Tensor, AggregationMode::Device}) {
    opt.mode = m;
    const test::RunResult other = test::run_plan_on(c, plan, 3, opt);
    EXPECT_EQ(other.grads, block.grads) << aggregation_mode_name(m);
    EXPECT_EQ(other.params, block.params) << aggregation_mode_name(m);
    EXPECT_EQ(other.losses, block.losses) << aggregation_mode_name(m);
    EXPECT_EQ(other.norms, block.norms) << aggregation_mode_name(m);
  }
  const test::RunResult recomputed =
      test::run_plan_on(c, heterogeneous_plan(RecomputeSet::all_ops()), 3);
  EXPECT_EQ(recomputed.grads, block.grads);
  EXPECT_EQ(recomputed.params, block.params);
  EXPECT_EQ(recomputed.losses, block.losses);
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  const test::RunResult units = test::run_plan_on(c, heterogeneous_plan(unit), 3);
  EXPECT_EQ(units.losses, block.losses);
  EXPECT_EQ(units.params, block.params);
}

TEST(EmulatedDist, CheckpointMovesCpuPlanToEmulatedPlanAndBack) {
  // CPU plan steps 0-3 -> checkpoint -> emulated plan 4-7 -> checkpoint -> CPU plan 8-11.
  const fs::path dir = test::temp_dir("emu_dist_ckpt");
  const Plan plan = heterogeneous_plan();
  const std::int64_t steps = 12;
  const TrainConfig cpu = config(plan, dir, steps, ComputeDevice::Cpu);
  const TrainConfig emu = config(plan, dir, steps, ComputeDevice::Emulated);
  test::DistRun save;
  save.save_dir = dir / "a";
  const test::RunResult seg1 = test::run_plan_on(cpu, plan, 4, save);
  const fs::path at4 = checkpoint_path(dir / "a", 4);
  ASSERT_TRUE(fs::exists(at4));
  test::DistRun moved;
  moved.resume = at4;
  moved.save_dir = dir / "b";
  const test::RunResult seg2 = test::run_plan_on(emu, plan, 4, moved);
  const fs::path at8 = checkpoint_path(dir / "b", 8);
  ASSERT_TRUE(fs::exists(at8));
  test::DistRun back;
  back.resume = at8;
  const test::RunResult seg3 = test::run_plan_on(cpu, plan, 4, back);

  // Exact: the emulated plan resumed at 8 continues as the emulated plan that ran 4-11 without
  // stopping (its moments, data position and weights came back whole through the device), and
  // the CPU single process resumed from the emulated plan's checkpoint is the CPU plan's segment
  // 3 to the plan tolerance.
  test::DistRun through;
  through.resume = at4;
  const test::RunResult straight = test::run_plan_on(emu, plan, 8, through);
  test::DistRun again;
  again.resume = at8;
  const test::RunResult resumed = test::run_plan_on(emu, plan, 4, again);
  EXPECT_EQ(std::vector<double>(straight.losses.begin(), straight.losses.begin() + 4),
            seg2.losses);
  EXPECT_EQ(std::vector<double>(straight.losses.begin() + 4, straight.losses.end()),
            resumed.losses);
  EXPECT_EQ(straight.params, resumed.params);
  const test::RunResult one = test::run_single_on(cpu, 4, at8);
  EXPECT_LT(max_relative_gap(one.losses, seg3.losses), kLossTol);

  // The whole within tolerance of an uninterrupted CPU plan: the emulated segment differs from
  // the CPU's only in attention (fused online softmax against the CPU's bf16 chain: about two
  // roundings per layer, 2u L relative with u = 2^-8, L = 3 layers: tests/train/
  // emulated_train_test.cpp's bound).
  const test::RunResult whole = test::run_plan_on(cpu, plan, steps);
  std::vector<double> joined = seg1.losses;
  joined.insert(joined.end(), seg2.losses.begin(), seg2.losses.end());
  joined.insert(joined.end(), seg3.losses.begin(), seg3.losses.end());
  EXPECT_EQ(std::vector<double>(whole.losses.begin(), whole.losses.begin() + 4), seg1.losses);
  const double bound = 2.0 * std::ldexp(1.0, -8) * 3;
  EXPECT_LT(max_relative_gap(whole.losses, joined), bound);
}

TEST(EmulatedGradSync, PackedAndInPlaceCollectivesOnDeviceBuffersGiveTheHostsBits) {
  // GradSync on emulated device buffers over LocalWorld on the device (packing copies and
  // padding through the device, reductions by the device) against the same GradSync on host
  // buffers over a host LocalWorld (grad_sync_test.cpp checks those sums by hand), for every
  // mode, the placed layout (in place) and the unit-major one (packed), in 64-byte pieces at
  // most two in flight: bitwise, as the same fp32 numbers are added in the same order.
  const ModelSpec m{"tp", 3, 16, 4, 8, 31, 24};
  const Plan plan = test::make_plan(
      m, 8,
      {{2, 4, {stage(0, 1, 2, 2), stage(2, 4)}}, {1, 3, {stage(0, 2, 4), stage(3, 4, 2)}},
       {1, 1, {stage(0, 4)}}});
  const auto places = place_ranks(plan);
  const RuntimeMemory& device = runtime_memory(ComputeDevice::Emulated);
  CommOptions o;
  o.chunk_bytes = 64;
  o.window_bytes = 128;
  for (AggregationMode mode :
       {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    for (bool placed : {true, false}) {
      SCOPED_TRACE(std::string(aggregation_mode_name(mode)) + (placed ? " placed" : " packed"));
      const int n = static_cast<int>(plan.num_devices());
      LocalWorld host(n, o);
      LocalWorld on_device(n, o, *device.comm_ops());
      auto errors = run_on_threads(host, [&](Communicator comm) {
        const Communicator dev = on_device.comm(comm.rank());
        const RankPlace& me = places[static_cast<std::size_t>(comm.rank())];
        const StagePlan& st = plan.pipelines[static_cast<std::size_t>(me.pipeline)]
                                  .stages[static_cast<std::size_t>(me.stage)];
        const ParamLayout layout =
            placed ? plan_layout(plan, me.device, mode)
                   : ParamLayout(plan.model, st.first_unit, st.last_unit, st.tp, me.tp_rank);
        std::vector<float> g(static_cast<std::size_t>(layout.grad_numel()));
        for (std::size_t i = 0; i < g.size(); ++i) {
          g[i] = static_cast<float>(comm.rank() + 1) * static_cast<float>(i % 7 + 1) * 0.1f;
        }
        const std::size_t bytes = g.size() * sizeof(float);
        RuntimeBuffer d(device, bytes);
        device.comm_ops()->upload(d.data(), g.data(), bytes);
        const int color = st.tp > 1 ? static_cast<int>(stage_device(st, me.dp_rank, 0)) : -1;
        const Communicator tp_host = comm.split(color, static_cast<int>(me.tp_rank));
        const Communicator tp_dev = dev.split(color, static_cast<int>(me.tp_rank));
        GradSync on_host(plan, mode, comm, layout, tp_host);
        GradSync on_dev(plan, mode, dev, layout, tp_dev, device);
        EXPECT_EQ(on_dev.bytes_copied(), on_host.bytes_copied());
        auto* dg = reinterpret_cast<float*>(d.data());
        for (std::int64_t u = layout.last_unit(); u >= layout.first_unit(); --u) {
          on_host.start_ready(g.data(), u);
          on_dev.start_ready(dg, u);
        }
        on_host.start(g.data());
        on_host.finish(g.data());
        on_dev.start(dg);
        on_dev.finish(dg);
        std::vector<float> back(g.size());
        device.comm_ops()->download(back.data(), d.data(), bytes);
        EXPECT_EQ(back, g) << "rank " << comm.rank();
      });
      test::expect_no_errors(errors);
    }
  }
}

TEST(EmulatedDistDeathTest, AHostReadOfARanksDeviceStateDies) {
  // The guard the tests above rely on: a rank's gradients are device memory the host cannot
  // read outside the device layer.
  const fs::path dir = test::temp_dir("emu_dist_death");
  const Plan plan = test::make_plan(model(), kSeq, {{2, 2, {stage(0, 4)}}});
  DistTrainConfig dc;
  dc.train = config(plan, dir, 1);
  dc.plan = plan;
  LocalWorld world(1);
  LocalWorld device(1, {}, *runtime_memory(ComputeDevice::Emulated).comm_ops());
  DistributedTrainer t(dc, world.comm(0), device.comm(0));
  t.step();
  ASSERT_TRUE(emu::is_device_memory(t.state().grads()));
  EXPECT_DEATH(
      {
        volatile float x = t.state().grads()[0];
        (void)x;
      },
      "");
}

}  // namespace
}  // namespace eth
