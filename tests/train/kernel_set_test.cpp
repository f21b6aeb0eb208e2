// The backend seam: the concept KernelSet accepts every set the stage is instantiated with and
// rejects a set missing an entry or with an entry of the wrong signature (at compile time); the
// fused attention type saves only lse, (B,NH,T) fp32, classed as `other`, and builds the
// kernels' dropout key from the stage's; the loss scalar sums micro-batches in forward order
// and is reset by take_loss().
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/api.h"
#include "train/attention_fused.h"
#include "train/gpu_kernels.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/kernel_set_concept.h"
#include "train/model_state.h"
#include "train/stage_compute.h"
#include "train_test_util.h"

namespace eth {
namespace {

// ---- the concept, at compile time --------------------------------------------------------

static_assert(KernelSet<CpuKernels>);
static_assert(KernelSet<CpuBf16Kernels>);
static_assert(KernelSet<RefKernels<double>>);
static_assert(KernelSet<GpuKernels<CudaApi>>);
static_assert(TrainingKernelSet<CpuKernels>);
static_assert(TrainingKernelSet<CpuBf16Kernels>);
static_assert(TrainingKernelSet<GpuKernels<CudaApi>>);
// The reference set is for finite differences, not training: no optimizer entries.
static_assert(!TrainingKernelSet<RefKernels<double>>);

// A set missing one kernel (hidden by a member that is not a function).
struct MissingGelu : CpuKernels {
  static constexpr int gelu_forward = 0;
};
static_assert(!KernelSetKernels<MissingGelu> && !KernelSet<MissingGelu>);
// A kernel of the wrong signature (layer norm without its statistics).
struct WrongLayernorm : CpuKernels {
  static void layernorm_forward(float*, const float*, const float*, const float*, std::int64_t,
                                std::int64_t) {}
};
static_assert(!KernelSet<WrongLayernorm>);
// A set whose memory cannot upload, and one without an attention type.
struct NoUpload : CpuKernels {
  static constexpr int upload = 0;
};
static_assert(!KernelSetMemory<NoUpload> && !KernelSet<NoUpload>);
struct NoAttention : CpuKernels {
  using Attention = int;
};
static_assert(!KernelSetAttention<NoAttention> && !KernelSet<NoAttention>);
// A loss that returns a host value instead of adding to the set's scalar.
struct HostLoss : CpuKernels {
  static constexpr int crossentropy_forward_add = 0;
  static constexpr auto crossentropy_forward = &cpu::crossentropy_forward;
};
static_assert(!KernelSet<HostLoss>);
// The GPU set's attention needs the fused pair; the CPU sets' the unfused chain.
static_assert(FusedAttentionKernels<GpuKernels<CudaApi>> &&
              !UnfusedAttentionKernels<GpuKernels<CudaApi>>);
static_assert(UnfusedAttentionKernels<CpuBf16Kernels> && !FusedAttentionKernels<CpuBf16Kernels>);

// ---- the fused attention type on a recording set ------------------------------------------

struct RecordingDrop {
  RngStream stream;
  float p = 0;
  std::int64_t sample0 = 0, head0 = 0;
};
struct Recording {
  using Act = Bf16;
  using Stat = float;
  using AttnDropout = RecordingDrop;
  static inline RecordingDrop seen{};
  static inline std::int64_t seen_kv = 0;
  static inline int forwards = 0, backwards = 0;
  static void attention_forward(Bf16*, float*, const Bf16*, const RecordingDrop& d, std::int64_t,
                                std::int64_t, std::int64_t, std::int64_t, std::int64_t NKV) {
    seen = d;
    seen_kv = NKV;
    ++forwards;
  }
  static void attention_backward(Bf16*, float*, const Bf16*, const float*, const Bf16*,
                                 const RecordingDrop& d, std::int64_t, std::int64_t,
                                 std::int64_t, std::int64_t, std::int64_t NKV) {
    seen = d;
    seen_kv = NKV;
    ++backwards;
  }
};

struct Placed {
  ActivationBytes bytes;
  double slot_bytes = 0;
  std::size_t arena = 0;
};
Placed place_fused(const AttentionDims& d, RecomputeSet rc, int slots) {
  FusedAttention<Recording> at(d);
  Carver<Arena> cv(nullptr);
  Placed out;
  for (int s = 0; s < slots; ++s) {
    SavedPlacer<Carver<Arena>> pl{cv, s == 0, out.bytes, out.slot_bytes, rc};
    at.place(pl);
  }
  out.arena = cv.bytes();
  return out;
}

TEST(FusedAttention, SavesOnlyLseAsOtherAndNoAttentionClass) {
  // B 3, T 16, NH 4: lse is 3 * 4 * 16 floats = 768 bytes, a multiple of the alignment.
  const AttentionDims d{3, 16, 32, 4, 4, 0.1f};
  const double lse_bytes = 3.0 * 4 * 16 * 4;
  RecomputeSet attn_classes;
  attn_classes.add(RecomputeOp::AttnScore);
  attn_classes.add(RecomputeOp::AttnSoftmax);
  attn_classes.add(RecomputeOp::AttnDropout);
  for (const RecomputeSet& rc : {RecomputeSet{}, attn_classes}) {
    const Placed p = place_fused(d, rc, 2);
    EXPECT_EQ(p.bytes.other, lse_bytes);
    for (double b : p.bytes.op) EXPECT_EQ(b, 0.0);
    EXPECT_EQ(p.slot_bytes, lse_bytes);  // held: recomputing attention classes drops nothing
    EXPECT_EQ(p.arena, static_cast<std::size_t>(2 * lse_bytes));
  }
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  const Placed full = place_fused(d, unit, 2);
  EXPECT_EQ(full.bytes.other, lse_bytes);  // the class tally is what a slot would hold
  EXPECT_EQ(full.slot_bytes, 0.0);         // dropped: one workspace copy for all slots
  EXPECT_EQ(full.arena, static_cast<std::size_t>(lse_bytes));
}

TEST(FusedAttention, PassesTheStagesDropoutKeyAndRecomputesNothing) {
  const AttentionDims d{2, 8, 16, 2, 6, 0.25f};  // a tp rank whose first head is 6
  FusedAttention<Recording> at(d);
  const AttentionCall call{2, RngStream{11, 3, 5, RngOp::AttnDropout}, 40};
  FusedAttention<Recording>::Saved saved;
  Recording::forwards = Recording::backwards = 0;
  at.forward(saved, nullptr, nullptr, call);
  EXPECT_EQ(Recording::seen.p, 0.25f);
  EXPECT_EQ(Recording::seen.head0, 6);
  EXPECT_EQ(Recording::seen.sample0, 40);
  EXPECT_EQ(Recording::seen.stream.seed, 11u);
  EXPECT_EQ(Recording::seen.stream.step, 3);
  EXPECT_EQ(Recording::seen.stream.unit, 5);
  at.recompute(saved, nullptr, RecomputeSet::all_ops(), call);
  EXPECT_EQ(Recording::forwards, 1);
  at.backward(saved, nullptr, nullptr, nullptr, call);
  EXPECT_EQ(Recording::backwards, 1);
}

TEST(FusedAttention, PassesTheRanksKvHeads) {
  // NKV = 0 means multi-head (as many kv heads as query heads); else the rank's kv heads.
  const AttentionCall call{1, RngStream{1, 0, 0, RngOp::AttnDropout}, 0};
  FusedAttention<Recording>::Saved saved;
  const AttentionDims mha{1, 8, 64, 4, 0, 0.0f};
  FusedAttention<Recording>(mha).forward(saved, nullptr, nullptr, call);
  EXPECT_EQ(Recording::seen_kv, 4);
  AttentionDims gqa = mha;
  gqa.NKV = 2;
  FusedAttention<Recording>(gqa).forward(saved, nullptr, nullptr, call);
  EXPECT_EQ(Recording::seen_kv, 2);
  Recording::seen_kv = 0;
  FusedAttention<Recording>(gqa).backward(saved, nullptr, nullptr, nullptr, call);
  EXPECT_EQ(Recording::seen_kv, 2);
}

// The GPU set's stage, sized without a device (planned_arena_bytes allocates nothing; this also
// links StageCompute<GpuKernels<CudaApi>> into the test in every build): its arena is the CPU
// bf16 stage's less, per block and slot, the attention chain's P, mask and Pd (bf16, byte,
// bf16: 5 bytes per (B,NH,T,T) element) plus lse (4 bytes per (B,NH,T) row) back, and in the
// workspace the (B,NH,T,T) bf16 gradient less the (B,NH,T) fp32 dsum. Every other buffer has
// the same element types in both. The model's buffers are all multiples of the 64-byte
// alignment, so the arithmetic is exact.
TEST(GpuKernelSet, StageArenaIsTheBf16OnesWithFusedAttention) {
  const ModelSpec m{"aligned", 3, 32, 4, 16, 64, 128};
  for (const float p : {0.0f, 0.1f}) {
    for (const std::int64_t slots : {1, 3}) {
      StageComputeConfig c;
      c.last_unit = m.num_units() - 1;
      c.max_micro_batch = 2;
      c.seq_len = m.seq_len;
      c.num_slots = slots;
      c.dropout = p;
      const std::int64_t tt = 2 * m.heads * m.seq_len * m.seq_len, rows = 2 * m.heads * m.seq_len;
      const std::int64_t saved = (p > 0 ? 5 : 2) * tt - 4 * rows;
      const std::int64_t want = m.layers * slots * saved + (2 * tt - 4 * rows);
      const auto cpu = StageCompute<CpuBf16Kernels>::planned_arena_bytes(m, c);
      const auto gpu = StageCompute<GpuKernels<CudaApi>>::planned_arena_bytes(m, c);
      EXPECT_EQ(static_cast<std::int64_t>(cpu) - static_cast<std::int64_t>(gpu), want)
          << "dropout " << p << " slots " << slots;
    }
  }
}

// ---- the loss scalar ----------------------------------------------------------------------

TEST(StageLoss, SumsForwardsInOrderAndTakeResets) {
  const test::OneThread one_thread;
  const ModelSpec m = test::small_model();
  ModelState st(m, 0, m.num_units() - 1);
  st.init(3);
  StageComputeConfig c;
  c.last_unit = m.num_units() - 1;
  c.seq_len = m.seq_len;
  StageCompute<CpuKernels> sc(m, c);
  const auto tok = test::random_tokens(1, static_cast<std::size_t>(m.seq_len), m.vocab);
  const auto tg1 = test::random_tokens(2, tok.size(), m.vocab);
  const auto tg2 = test::random_tokens(3, tok.size(), m.vocab);
  const MicroBatch a = test::micro_batch(tok, tg1, 1, m.seq_len);
  const MicroBatch b = test::micro_batch(tok, tg2, 1, m.seq_len);
  EXPECT_EQ(sc.take_loss(), 0.0);  // nothing forward yet
  sc.forward(0, st.params(), a, nullptr, nullptr);
  const double la = sc.take_loss();
  sc.forward(0, st.params(), b, nullptr, nullptr);
  const double lb = sc.take_loss();
  EXPECT_GT(la, 0.0);
  EXPECT_NE(la, lb);
  sc.forward(0, st.params(), a, nullptr, nullptr);
  sc.forward(0, st.params(), b, nullptr, nullptr);
  EXPECT_EQ(sc.take_loss(), (0.0 + la) + lb);  // the host trainer's order, bitwise
  EXPECT_EQ(sc.take_loss(), 0.0);
}

}  // namespace
}  // namespace eth
