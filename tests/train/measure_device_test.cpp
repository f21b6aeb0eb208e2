// Measured profiles on a GPU kernel set (train/measure_profile.h with a GPU device), and what a
// single-process run needs of a device (train/train_memory.h, behind eth train's memory check),
// both on the host-emulated GPU, whose allocator tells what really lives in device memory:
//   - the entry is bf16 under the device type asked for, its times positive and growing with the
//     micro-batch, and the fused attention's classes hold nothing;
//   - each unit's activation bytes are the device bytes one more micro-batch slot of that unit's
//     stage allocates, read off the emulated allocator, and the baseline is the device memory in
//     use before measuring (not the host's resident set);
//   - train_memory's device figure is what a Trainer allocates on the device, and eth train's
//     refusal names device memory.
// `eth profile --measure --device emulated` end to end: cmd_profile_test.cpp, beside the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "kernels/emulated/runtime.h"
#include "model/arithmetic.h"
#include "train/measure_profile.h"
#include "train/precision_stage.h"
#include "train/train_memory.h"
#include "train/trainer.h"
#include "measure_test_util.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::eth_cli;
using test::slurp;

MeasureOptions on_emulated(std::int64_t mbs, std::int64_t seq) {
  MeasureOptions o = test::quick_measure(mbs, seq);
  o.precision = Precision::Bf16;
  o.device = ComputeDevice::Emulated;
  o.device_type = "emulated";
  return o;
}

std::size_t idx(RecomputeOp op) { return static_cast<std::size_t>(op); }

TEST(MeasureDevice, EmulatedEntryIsBf16UnderItsTypeWithTimesThatGrowWithTheMicroBatch) {
  const test::OneThread one;
  MeasureOptions small = on_emulated(1, 64), big = on_emulated(16, 64);
  for (MeasureOptions* o : {&small, &big}) {
    o->repeats = 3;
    o->warmup = 1;
    o->recompute_times = true;
  }
  const ProfileEntry a = measure_profile(small), b = measure_profile(big);
  EXPECT_EQ(a.key, (ProfileKey{"emulated", 1, 1}));
  EXPECT_EQ(b.key, (ProfileKey{"emulated", 1, 16}));
  EXPECT_EQ(a.precision, Precision::Bf16);
  EXPECT_EQ(a.source, "measured");
  EXPECT_GT(a.optimizer_ms, 0.0);
  double blocks_a = 0, blocks_b = 0;
  for (std::size_t u = 0; u < a.units.size(); ++u) {
    for (const ProfileEntry* e : {&a, &b}) {
      EXPECT_GT(e->units[u].forward_ms, 0.0) << "unit " << u;
      EXPECT_GT(e->units[u].backward_ms, 0.0) << "unit " << u;
      // Fused attention: nothing of the attention classes is saved, so recomputing them is free.
      for (RecomputeOp op :
           {RecomputeOp::AttnScore, RecomputeOp::AttnSoftmax, RecomputeOp::AttnDropout}) {
        EXPECT_EQ(e->units[u].activation.op[idx(op)], 0.0) << "unit " << u;
        EXPECT_EQ(e->units[u].recompute_ms[idx(op)], 0.0) << "unit " << u;
      }
    }
    if (u > 0 && u + 1 < a.units.size()) {
      blocks_a += a.units[u].forward_ms + a.units[u].backward_ms;
      blocks_b += b.units[u].forward_ms + b.units[u].backward_ms;
      // A difference of two timed backwards: at micro-batch 1 it can be within the noise of an
      // idle machine (measured as 0 there), at 16 a whole forward clearly shows.
      EXPECT_GE(a.units[u].recompute_ms[idx(RecomputeOp::Unit)], 0.0) << "unit " << u;
      EXPECT_GT(b.units[u].recompute_ms[idx(RecomputeOp::Unit)], 0.0) << "unit " << u;
    }
  }
  // 16 times the tokens; the emulated device adds a fixed cost per call (its page protection),
  // so only "more than twice" is claimed.
  EXPECT_GT(blocks_b, 2 * blocks_a) << blocks_a << " ms at mbs 1, " << blocks_b << " at mbs 16";
}

// The device bytes a one-unit stage of `slots` micro-batch slots allocates, by the emulated
// allocator (allocations of multiples of 256 bytes are not rounded: the sizes below are).
double stage_device_bytes(const MeasureOptions& o, std::int64_t u, std::int64_t slots) {
  StageComputeConfig cfg;
  cfg.first_unit = cfg.last_unit = u;
  cfg.max_micro_batch = o.micro_batch;
  cfg.seq_len = o.seq_len;
  cfg.num_slots = slots;
  cfg.dropout = o.dropout;
  const std::size_t before = emu::allocated_bytes();
  const PrecisionStage sc(Precision::Bf16, o.model, cfg, nullptr, ComputeDevice::Emulated);
  return static_cast<double>(emu::allocated_bytes() - before);
}

TEST(MeasureDevice, ActivationBytesAreWhatEachSlotAllocatesInDeviceMemory) {
  const test::OneThread one;
  for (float dropout : {0.0f, 0.1f}) {
    MeasureOptions o = on_emulated(2, 64);  // N = 128 tokens: every buffer a multiple of 256 B
    o.dropout = dropout;
    const ProfileEntry e = measure_profile(o);
    for (std::int64_t u = 0; u < o.model.num_units(); ++u) {
      SCOPED_TRACE("unit " + std::to_string(u) + ", dropout " + std::to_string(dropout));
      const double slot1 = stage_device_bytes(o, u, 1), slot2 = stage_device_bytes(o, u, 2);
      EXPECT_EQ(e.units[static_cast<std::size_t>(u)].activation.total(), slot2 - slot1);
    }
  }
}

TEST(MeasureDevice, BaselineIsTheDeviceMemoryInUseNotTheHostsResidentSet) {
  const test::OneThread one;
  // Something else already on the device: 3 MiB.
  const std::size_t before = emu::allocated_bytes();
  const DeviceBytes other(ComputeDevice::Emulated, std::size_t{3} << 20);
  const ProfileEntry e = measure_profile(on_emulated(1, 32));
  EXPECT_EQ(e.process_baseline_bytes, static_cast<double>(before + (std::size_t{3} << 20)));
  // Measuring frees every buffer it made.
  EXPECT_EQ(emu::allocated_bytes(), before + (std::size_t{3} << 20));
}

TEST(MeasureDevice, Fp32AndNeighboursOnADeviceAreRefusedByFlag) {
  MeasureOptions o = on_emulated(1, 32);
  o.precision = Precision::Fp32;
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--precision"),
            std::string::npos);
  o = on_emulated(1, 32);
  o.optimizer_neighbours = 1;
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--optimizer-neighbours"),
            std::string::npos);
  // The peak is device bytes: no 64 MiB cache flush, which the same run on the CPU counts.
  o = on_emulated(1, 32);
  MeasureOptions host = o;
  host.device = ComputeDevice::Cpu;
  host.cold_cache = true;
  o.cold_cache = true;
  EXPECT_LT(measure_peak_bytes(o), measure_peak_bytes(host) - 60e6);
}

// ---- what a run needs of its device --------------------------------------------------------

TrainConfig run_on(ComputeDevice d, const fs::path& data, std::int64_t micro_batch) {
  TrainConfig c;
  c.model = load_model("tiny");
  c.data = data;
  c.steps = 2;
  c.global_batch = 8;
  c.micro_batch = micro_batch;
  c.seq_len = 64;
  c.precision = Precision::Bf16;
  c.device = d;
  c.dropout = 0.1f;
  return c;
}

TEST(TrainMemory, TheDeviceFigureIsWhatTheTrainerAllocatesOnTheDevice) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("train_memory");
  const fs::path data = test::synthetic_file(dir, 20000, 256);
  // Three allocations (state, arena, io), each rounded up to 256 bytes by the allocator.
  const auto rounded = [](double bytes) { return std::ceil(bytes / 256) * 256; };
  for (std::int64_t mb : {4, 8}) {
    SCOPED_TRACE("micro-batch " + std::to_string(mb));
    const TrainConfig cfg = run_on(ComputeDevice::Emulated, data, mb);
    const TrainMemory need = train_memory(cfg);
    EXPECT_TRUE(need.on_device);
    EXPECT_GT(need.io_bytes, 1000.0);  // the targets of 256 tokens or more: not lost in rounding
    const std::size_t before = emu::allocated_bytes();
    Trainer t(cfg);
    const double got = static_cast<double>(emu::allocated_bytes() - before);
    EXPECT_EQ(got, rounded(need.state_bytes) + rounded(need.arena_bytes) + rounded(need.io_bytes));
    // A step allocates nothing more on the device.
    t.step();
    EXPECT_EQ(static_cast<double>(emu::allocated_bytes() - before), got);
  }
  // On the CPU nothing is device memory, and the fused attention's arena is the smaller one
  // (the CPU chain keeps P).
  const TrainMemory cpu = train_memory(run_on(ComputeDevice::Cpu, data, 4));
  const TrainMemory emu = train_memory(run_on(ComputeDevice::Emulated, data, 4));
  EXPECT_EQ(cpu.device_bytes(), 0.0);
  EXPECT_EQ(cpu.total_host_bytes(), cpu.host_bytes + cpu.state_bytes + cpu.arena_bytes +
                                        cpu.io_bytes);
  EXPECT_EQ(emu.total_host_bytes(), emu.host_bytes);
  EXPECT_LT(emu.arena_bytes, cpu.arena_bytes);
}

TEST(TrainMemory, EthTrainOnTheEmulatedDeviceRefusesByDeviceMemory) {
  const fs::path dir = test::temp_dir("train_memory_cli");
  const fs::path data = test::synthetic_file(dir, 20000, 256), out = dir / "eth.stdout",
                 err = dir / "eth.stderr";
  // gpt2-small's logits alone at 100000 x 1024 tokens are 20 PB: past any device and host.
  EXPECT_EQ(eth_cli("train --device emulated --model gpt2-small --data " + data.string() +
                        " --batch 100000 --steps 1",
                    dir)
                .code,
            2);
  const std::string msg = slurp(err);
  EXPECT_NE(msg.find("--batch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("of device memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--device emulated"), std::string::npos) << msg;
}

}  // namespace
}  // namespace eth
