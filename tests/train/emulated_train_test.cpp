// The GPU trainer (GpuKernels over an Api: the model state in device memory, tokens and targets
// uploaded, the loss read once per step, the gradient norm and AdamW on the device, checkpoints
// downloaded and uploaded) run on the host-emulated GPU, against the CPU bf16 trainer.
//
// The tolerance. Both sets store activations and the weight copy in bf16 (unit roundoff
// u = 2^-8) and keep fp32 masters, moments and gradients; their kernels are the same CPU bf16
// kernels (tests/kernels/emulated_kernels_test.cpp: bit for bit) except attention. The CPU set
// runs the unfused chain (scores and P stored in bf16, then P V), the emulated one the fused
// online softmax (fp32 scores and P in registers, one bf16 rounding of the output). So per layer
// the attention output differs by about the two extra roundings of the CPU chain, 2u relative
// per element, with opposite-signed errors across elements; everything after it is the same
// arithmetic on inputs that differ by that much. A mean token loss and a gradient norm are sums
// over many elements, where such independent errors mostly cancel, so a bound that holds for
// the worst case, all L layers' 2u adding in one direction, is
//   |loss_emulated - loss_cpu| <= 2 u L * loss,   |norm_emulated / norm_cpu - 1| <= 2 u L
// (tiny, L = 4: 3.1%; gpt2-small, L = 12: 9.4%). The measured differences are far below
// (printed by each test); a kernel that is wrong (a transposed operand, a missing scale, a lost
// loss term) moves the gradient norm by much more than this.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/emulated/runtime.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "train/state_backend.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

constexpr double kU = 1.0 / 256.0;  // bf16 unit roundoff, 2^-8

double bf16_tolerance(const ModelSpec& m) { return 2.0 * kU * static_cast<double>(m.layers); }

TrainConfig config(const ModelSpec& model, const fs::path& data, ComputeDevice device) {
  TrainConfig c;
  c.model = model;
  c.data = data;
  c.steps = 12;
  c.global_batch = 4;
  c.micro_batch = 2;  // two micro-batches: the loss scalar is added to on the device
  c.seq_len = 32;
  c.lr = LrSchedule{3e-3, 3e-4, 2, 12};
  c.seed = 5;
  c.precision = Precision::Bf16;
  c.device = device;
  return c;
}

std::vector<float> download(const ModelState& s, const float* p, std::int64_t n) {
  std::vector<float> h(static_cast<std::size_t>(n));
  s.backend().download(h.data(), p, n);
  return h;
}

struct Losses {
  std::vector<double> loss, norm;
};

Losses run_steps(Trainer& t, std::int64_t until) {
  Losses r;
  while (t.next_step() < until) {
    const StepStats s = t.step();
    r.loss.push_back(s.loss);
    r.norm.push_back(s.grad_norm);
  }
  return r;
}

void expect_close_step(const char* what, const ModelSpec& m, const StepStats& emu,
                       const StepStats& cpu) {
  const double tol = bf16_tolerance(m);
  std::printf("%s: loss cpu %.6f emulated %.6f (rel %.2e); grad norm cpu %.6f emulated %.6f "
              "(rel %.2e); tolerance %.2e\n",
              what, cpu.loss, emu.loss, std::abs(emu.loss / cpu.loss - 1), cpu.grad_norm,
              emu.grad_norm, std::abs(emu.grad_norm / cpu.grad_norm - 1), tol);
  EXPECT_NEAR(emu.loss, cpu.loss, tol * cpu.loss) << what;
  EXPECT_NEAR(emu.grad_norm / cpu.grad_norm, 1.0, tol) << what;
}

TEST(EmulatedTrainer, TheStateLivesInDeviceMemory) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_state");
  const ModelSpec m = model_preset("tiny");
  Trainer t(config(m, test::synthetic_file(dir, 20000, m.vocab), ComputeDevice::Emulated));
  const ModelState& s = t.state();
  EXPECT_FALSE(s.backend().host_visible());
  for (const void* p : {static_cast<const void*>(s.params()), static_cast<const void*>(s.grads()),
                        static_cast<const void*>(s.adam_m()), static_cast<const void*>(s.adam_v()),
                        static_cast<const void*>(s.params_bf16())}) {
    EXPECT_TRUE(emu::is_device_memory(p));
  }
}

TEST(EmulatedTrainer, OneStepOfTinyMatchesTheCpuBf16Trainer) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_one_tiny");
  const ModelSpec m = model_preset("tiny");
  const fs::path data = test::synthetic_file(dir, 20000, m.vocab);
  Trainer cpu(config(m, data, ComputeDevice::Cpu));
  Trainer emu(config(m, data, ComputeDevice::Emulated));
  // The same initialization: the state's init is a pure function of the seed, uploaded.
  EXPECT_EQ(download(emu.state(), emu.state().params(), emu.state().numel()),
            std::vector<float>(cpu.state().params(), cpu.state().params() + cpu.state().numel()));
  expect_close_step("tiny, T 32, step 0", m, emu.step(), cpu.step());
}

// gpt2-small whole (12 layers, vocabulary 50257) at T = 32, one micro-batch of 1: the lm head
// and the embedding dominate the step; the state's 124 M parameters (initialized, uploaded,
// summed) dominate the test.
TEST(EmulatedTrainer, OneStepOfGpt2SmallAtAShortSequenceMatchesTheCpuBf16Trainer) {
  const fs::path dir = test::temp_dir("emu_one_gpt2");
  const ModelSpec m = model_preset("gpt2-small");
  const fs::path data = test::synthetic_file(dir, 4096, m.vocab);
  TrainConfig c = config(m, data, ComputeDevice::Cpu);
  c.global_batch = 1;
  c.micro_batch = 1;
  c.steps = 1;
  c.lr = LrSchedule{3e-4, 3e-5, 0, 1};
  // The step's loss and gradient norm without its AdamW pass (124 M parameters twice over).
  auto gradients = [](const TrainConfig& cfg) {
    Trainer t(cfg);
    StepStats s;
    s.loss = t.compute_gradients();
    s.grad_norm = std::sqrt(grad_sum_squares(t.state()));
    return s;
  };
  const StepStats cpu_step = gradients(c);
  c.device = ComputeDevice::Emulated;
  const StepStats emu_step = gradients(c);
  expect_close_step("gpt2-small, T 32, B 1, step 0", m, emu_step, cpu_step);
}

TEST(EmulatedTrainer, SeveralStepsOfTinyLowerTheLossAndStayWithinToleranceOfTheCpu) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_steps");
  const ModelSpec m = model_preset("tiny");
  const fs::path data = test::synthetic_file(dir, 20000, m.vocab);
  Trainer cpu(config(m, data, ComputeDevice::Cpu));
  Trainer emu(config(m, data, ComputeDevice::Emulated));
  const Losses c = run_steps(cpu, 12), e = run_steps(emu, 12);
  const double tol = bf16_tolerance(m);
  for (std::size_t i = 0; i < c.loss.size(); ++i) {
    std::printf("step %zu: loss cpu %.6f emulated %.6f\n", i, c.loss[i], e.loss[i]);
    EXPECT_NEAR(e.loss[i], c.loss[i], tol * c.loss[i]) << "step " << i;
  }
  // Synthetic data has structure to learn (data/tokenize.h): 12 steps at lr 3e-3 take the loss
  // well below its start (ln 256 = 5.55 at initialization).
  EXPECT_LT(e.loss.back(), e.loss.front() - 0.1);
  EXPECT_LT(e.loss.back(), c.loss.front());
}

TEST(EmulatedTrainer, RecomputeChangesNoLossOrGradientBitwise) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_recompute");
  const ModelSpec m = model_preset("tiny");
  TrainConfig c = config(m, test::synthetic_file(dir, 20000, m.vocab), ComputeDevice::Emulated);
  c.dropout = 0.1f;  // the masks are regenerated in recompute, not stored
  c.steps = 2;
  auto run = [&](RecomputeSet rc) {
    c.recompute = rc;
    Trainer t(c);
    std::pair<Losses, std::vector<float>> r;
    r.first = run_steps(t, 2);
    r.second = download(t.state(), t.state().params(), t.state().numel());
    return r;
  };
  const auto base = run(RecomputeSet{});
  std::vector<RecomputeSet> sets;
  for (int op = 0; op < kNumRecomputeOps; ++op) {
    RecomputeSet s;
    s.add(static_cast<RecomputeOp>(op));
    sets.push_back(s);
  }
  sets.push_back(RecomputeSet::all_ops());
  for (const RecomputeSet& s : sets) {
    const auto r = run(s);
    EXPECT_EQ(r.first.loss, base.first.loss) << "recompute bits " << int(s.bits());
    EXPECT_EQ(r.first.norm, base.first.norm) << "recompute bits " << int(s.bits());
    EXPECT_EQ(r.second, base.second) << "recompute bits " << int(s.bits());  // the updated masters
  }
}

// All four fp32 buffers of a checkpoint, read into a host (CPU) state.
struct Tensors {
  std::vector<float> p, m, v;
  bool operator==(const Tensors&) const = default;
};
Tensors read_tensors(const fs::path& ckpt, const ModelSpec& model) {
  ModelState s(model, 0, model.num_units() - 1, 1, 0, Precision::Bf16);
  load_checkpoint(ckpt, s);
  const auto n = static_cast<std::size_t>(s.numel());
  return {{s.params(), s.params() + n}, {s.adam_m(), s.adam_m() + n}, {s.adam_v(), s.adam_v() + n}};
}

// Steps 0-3 on the CPU, 4-7 on the emulated device, 8-11 on the CPU, each segment resumed from
// the checkpoint the one before wrote.
TEST(EmulatedTrainer, ACheckpointMovesCpuToEmulatedToCpu) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_ckpt");
  const ModelSpec m = model_preset("tiny");
  const fs::path data = test::synthetic_file(dir, 20000, m.vocab);
  const TrainConfig on_cpu = config(m, data, ComputeDevice::Cpu);
  const TrainConfig on_emu = config(m, data, ComputeDevice::Emulated);

  Trainer all_cpu(on_cpu);  // the uninterrupted CPU run; its step-4 checkpoint starts segment 2
  const Losses cpu_0_3 = run_steps(all_cpu, 4);
  const fs::path c4 = all_cpu.save_checkpoint(dir / "cpu");
  const Losses cpu_4_11 = run_steps(all_cpu, 12);

  // Segment 2: the CPU checkpoint on the device. Loaded and written back untouched it is the
  // same tensors (upload, download: no rounding); then steps 4-7, and its step-8 checkpoint.
  Trainer seg2(on_emu, c4);
  EXPECT_EQ(read_tensors(seg2.save_checkpoint(dir / "emu_reload"), m), read_tensors(c4, m));
  const Losses emu_4_7 = run_steps(seg2, 8);
  const fs::path e8 = seg2.save_checkpoint(dir / "emu");
  // The uninterrupted emulated run from the same checkpoint: steps 4-7 bitwise, and 8-11
  // bitwise those of an emulated run resumed from e8 (the device's own round trip is exact).
  Trainer emu_whole(on_emu, c4);
  const Losses emu_4_11 = run_steps(emu_whole, 12);
  EXPECT_EQ(std::vector<double>(emu_4_11.loss.begin(), emu_4_11.loss.begin() + 4), emu_4_7.loss);
  Trainer emu_resumed(on_emu, e8);
  EXPECT_EQ(run_steps(emu_resumed, 12).loss,
            std::vector<double>(emu_4_11.loss.begin() + 4, emu_4_11.loss.end()));

  // Segment 3: the emulated checkpoint on the CPU, the same tensors when written back, then
  // steps 8-11 bitwise those of a second CPU run resumed from it.
  Trainer seg3(on_cpu, e8);
  EXPECT_EQ(read_tensors(seg3.save_checkpoint(dir / "cpu_reload"), m), read_tensors(e8, m));
  const Losses cpu_8_11 = run_steps(seg3, 12);
  Trainer cpu_again(on_cpu, e8);
  EXPECT_EQ(run_steps(cpu_again, 12).loss, cpu_8_11.loss);

  // The whole, against the all-CPU run.
  std::vector<double> moved = cpu_0_3.loss;
  moved.insert(moved.end(), emu_4_7.loss.begin(), emu_4_7.loss.end());
  moved.insert(moved.end(), cpu_8_11.loss.begin(), cpu_8_11.loss.end());
  std::vector<double> all = cpu_0_3.loss;
  all.insert(all.end(), cpu_4_11.loss.begin(), cpu_4_11.loss.end());
  ASSERT_EQ(moved.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(moved[i], all[i], bf16_tolerance(m) * all[i]) << "step " << i;
  }
}

// The trainer's device memory is out of the host's reach: a direct read of a parameter pointer
// of the emulated state is a SIGSEGV, while the download path reads the same values.
TEST(EmulatedTrainerDeathTest, AHostReadOfTheStateDiesAndTheDownloadWorks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("emu_death");
  const ModelSpec m = model_preset("tiny");
  const fs::path data = test::synthetic_file(dir, 20000, m.vocab);
  Trainer emu(config(m, data, ComputeDevice::Emulated));
  Trainer cpu(config(m, data, ComputeDevice::Cpu));
  const float* p = emu.state().params();
  EXPECT_DEATH(
      {
        volatile float x = p[0];
        (void)x;
      },
      "");
  const std::vector<float> got = download(emu.state(), p, 8);
  EXPECT_EQ(got, std::vector<float>(cpu.state().params(), cpu.state().params() + 8));
}

}  // namespace
}  // namespace eth
