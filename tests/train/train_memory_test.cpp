// What a single-process run allocates (train/train_memory.h), against bytes worked out by hand
// for a small model, and the stage's arena against what a stage of that run really allocates.
#include "train/train_memory.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/arithmetic.h"
#include "train/precision_stage.h"
#include "train_test_util.h"

namespace eth::train_memory_test {
namespace {

// small_model: 2 blocks, C 16, 2 heads, T 8, V 32, ffn 48. Parameters: wte 32 x 16 + wpe
// 8 x 16 = 640; a block 2 x 16 (ln1) + 48 x 16 + 48 (qkv) + 16 x 16 + 16 (proj) + 2 x 16 (ln2)
// + 48 x 16 + 48 (fc) + 16 x 48 + 16 (fcproj) = 2752; the head 2 x 16 + 32 x 16 = 544.
constexpr std::int64_t kSmallParams = 640 + 2 * 2752 + 544;  // 6688

TrainConfig run(Precision precision, ComputeDevice device, std::int64_t micro,
                std::int64_t global) {
  TrainConfig c;
  c.model = test::small_model();
  c.micro_batch = micro;
  c.global_batch = global;
  c.precision = precision;
  c.device = device;
  return c;
}

StageComputeConfig whole_stage(const TrainConfig& c, std::int64_t mb) {
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = c.model.num_units() - 1;
  sc.max_micro_batch = mb;
  sc.seq_len = c.model.seq_len;
  sc.num_slots = 1;
  return sc;
}

TEST(TrainMemory, Fp32OnTheCpuIsAllHostMemoryOfTheHandWorkedSizes) {
  ASSERT_EQ(total_params(test::small_model()), kSmallParams);
  const TrainConfig c = run(Precision::Fp32, ComputeDevice::Cpu, 2, 4);
  const TrainMemory r = train_memory(c);
  // Parameters, gradients and two moments of 6688 floats: 26752 bytes each, a whole number of
  // 64-byte lines.
  EXPECT_EQ(r.state_bytes, 4 * 26752.0);
  EXPECT_EQ(r.io_bytes, 64.0);  // two loss scalars, one cache line
  // Tokens and targets of a micro-batch of 2 x 8 (int32), and 4 sample references of 16 bytes.
  EXPECT_EQ(r.host_bytes, 2 * 16 * 4 + 4 * 16.0);
  PrecisionStage stage(Precision::Fp32, c.model, whole_stage(c, 2));
  EXPECT_EQ(r.arena_bytes, static_cast<double>(stage.arena_bytes_total()));
  EXPECT_FALSE(r.on_device);
  EXPECT_EQ(r.device_bytes(), 0.0);
  EXPECT_EQ(r.total_host_bytes(), r.host_bytes + r.state_bytes + r.arena_bytes + r.io_bytes);
}

TEST(TrainMemory, Bf16AddsTheComputeCopyAndAMicroBatchLargerThanTheBatchIsTheBatch) {
  const TrainConfig c = run(Precision::Bf16, ComputeDevice::Cpu, 8, 4);
  const TrainMemory r = train_memory(c);
  EXPECT_EQ(r.state_bytes, 4 * 26752.0 + 13376.0);  // 6688 bf16: 13376 bytes, 209 lines
  EXPECT_EQ(r.host_bytes, 2 * 32 * 4 + 4 * 16.0);   // a micro-batch of 4 samples, not 8
  PrecisionStage stage(Precision::Bf16, c.model, whole_stage(c, 4));
  EXPECT_EQ(r.arena_bytes, static_cast<double>(stage.arena_bytes_total()));
}

TEST(TrainMemory, OnTheEmulatedDeviceStateArenaAndIoAreDeviceMemory) {
  const TrainConfig c = run(Precision::Bf16, ComputeDevice::Emulated, 2, 4);
  const TrainMemory r = train_memory(c);
  EXPECT_TRUE(r.on_device);
  EXPECT_EQ(r.state_bytes, 4 * 26752.0 + 13376.0);
  EXPECT_EQ(r.io_bytes, 64.0 + 64.0);  // and the 16 int32 targets the head reads there
  PrecisionStage stage(Precision::Bf16, c.model, whole_stage(c, 2), nullptr,
                       ComputeDevice::Emulated);
  EXPECT_EQ(r.arena_bytes, static_cast<double>(stage.arena_bytes_total()));
  EXPECT_EQ(r.device_bytes(), r.state_bytes + r.arena_bytes + r.io_bytes);
  EXPECT_EQ(r.total_host_bytes(), r.host_bytes);
}

TEST(TrainMemory, ARunPastAnyMachineGetsAFiniteFigureToRefuse) {
  TrainConfig c = run(Precision::Fp32, ComputeDevice::Cpu, 1'000'000'000'000, 1'000'000'000'000);
  c.model = model_preset("gpt2-small");
  const TrainMemory r = train_memory(c);
  EXPECT_TRUE(std::isfinite(r.arena_bytes));
  EXPECT_GT(r.arena_bytes, 1e15);
  EXPECT_GT(r.total_host_bytes(), 1e15);
}

}  // namespace
}  // namespace eth::train_memory_test
