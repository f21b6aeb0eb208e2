// StageCompute on Llama-family models (RMSNorm, rotary positions, SwiGLU, grouped-query
// attention, no biases, no position table): the whole model's gradient against central finite
// differences in double (and two mixed architectures, each feature chosen independently), the
// fp32 CPU kernels against the double reference, bitwise-identical gradients under every
// recompute set, a tp 2 stage (GQA: one key/value head a rank) equal to one process and to
// finite differences, bf16 within its rounding, and the activation bytes against the memory
// model's formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <span>

#include "comm/local/local_comm.h"
#include "cost/predictor.h"
#include "kernels/bf16.h"
#include "runtime/tp_comm.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/arena_profile.h"
#include "train/model_state.h"
#include "train/precision_stage.h"
#include "train/stage_compute.h"
#include "llama_test_util.h"
#include "train_test_util.h"

namespace eth {
namespace {

using test::micro_batch;
using test::small_llama;
using test::whole_model;

// Largest |x|.
template <typename T>
double max_abs(const std::vector<T>& v) {
  double m = 0;
  for (T x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

// B samples of m's sequence drawn from `seed` (tokens) and `seed + 1` (targets), as one micro-batch
// (which points into the vectors: not copyable).
struct SeededBatch {
  SeededBatch(const ModelSpec& m, std::int64_t B, std::uint64_t seed)
      : tokens(test::random_tokens(seed, static_cast<std::size_t>(B * m.seq_len), m.vocab)),
        targets(test::random_tokens(seed + 1, static_cast<std::size_t>(B * m.seq_len), m.vocab)),
        mb(micro_batch(tokens, targets, B, m.seq_len)) {}
  SeededBatch(const SeededBatch&) = delete;
  SeededBatch& operator=(const SeededBatch&) = delete;
  std::vector<std::int32_t> tokens, targets;
  MicroBatch mb;
};

// One forward and backward of `sc` (gradients added to `g`); the loss.
template <class K, typename P, typename G>
double forward_backward(StageCompute<K>& sc, const P* params, G* g, const MicroBatch& mb) {
  sc.forward(0, params, mb, nullptr, nullptr);
  const double loss = sc.take_loss();
  sc.backward(0, params, g, mb, nullptr, nullptr);
  return loss;
}

// Initialized parameters in double, moved off the init's special values (norm weights 1) so
// their gradients are checked at a general point.
std::vector<double> perturbed_params(const ModelSpec& m, std::uint64_t seed) {
  ModelState st(m, 0, m.num_units() - 1);
  st.init(seed);
  std::vector<double> p(st.params(), st.params() + st.numel());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.01 * std::sin(static_cast<double>(i));
  return p;
}

// The loss of every parameter differentiated numerically in double (every parameter, central
// differences with h = 1e-5; truncation ~1e-10 and rounding ~1e-11 are far below the 1e-6
// relative tolerance, tiny gradients judged against 1e-3 of the largest, as tests/train/
// stage_test.cpp does for GPT).
void expect_gradient_matches_finite_differences(const ModelSpec& m, float dropout) {
  const test::OneThread one_thread;
  const std::int64_t B = 1;
  std::vector<double> p = perturbed_params(m, 7);
  std::vector<double> g(p.size(), 0.0);
  StageCompute<RefKernels<double>> sc(m, whole_model(m, B, {}, dropout));
  const SeededBatch batch(m, B, 1);
  const MicroBatch& mb = batch.mb;
  (void)forward_backward(sc, p.data(), g.data(), mb);
  const double gmax = max_abs(g), h = 1e-5;
  double worst = 0;
  std::size_t worst_i = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double x0 = p[i];
    p[i] = x0 + h;
    sc.forward(0, p.data(), mb, nullptr, nullptr);
    const double lp = sc.take_loss();
    p[i] = x0 - h;
    sc.forward(0, p.data(), mb, nullptr, nullptr);
    const double lm = sc.take_loss();
    p[i] = x0;
    const double num = (lp - lm) / (2 * h);
    const double err =
        std::abs(num - g[i]) / std::max({std::abs(num), std::abs(g[i]), 1e-3 * gmax});
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LT(worst, 1e-6) << m.name << ": parameter " << worst_i << " of " << p.size()
                         << ": analytic " << g[worst_i];
  EXPECT_GT(gmax, 1e-3);  // not vacuous
}

TEST(LlamaStage, WholeModelGradientMatchesFiniteDifferences) {
  expect_gradient_matches_finite_differences(small_llama(), 0.0f);
  // Dropout masks are keyed, so the loss stays a smooth function of the parameters.
  expect_gradient_matches_finite_differences(small_llama(), 0.1f);
}

TEST(LlamaStage, EachArchitectureFeatureIsIndependent) {
  // Layer norm with biases, rotary positions, SwiGLU with biases, grouped-query attention.
  ModelSpec a = small_llama();
  a.name = "ln-rope-swiglu-bias";
  a.norm = NormKind::LayerNorm;
  a.bias = true;
  expect_gradient_matches_finite_differences(a, 0.0f);
  // RMSNorm over GPT's learned positions, GELU MLP and biases, multi-head attention.
  ModelSpec b = small_llama(4);
  b.name = "rms-learned-gelu";
  b.positions = PositionKind::Learned;
  b.mlp = MlpKind::Gelu;
  b.bias = true;
  expect_gradient_matches_finite_differences(b, 0.0f);
}

struct StageRun {
  double loss = 0;
  std::vector<float> grads;
  double held = 0, held_expected = 0;
};

template <class K, typename P>
StageRun run_stage(const ModelSpec& m, const P* params, std::int64_t numel, RecomputeSet rc, float p,
        std::int64_t B) {
  StageCompute<K> sc(m, whole_model(m, B, rc, p));
  StageRun r;
  r.grads.assign(static_cast<std::size_t>(numel), 0.0f);
  r.loss = forward_backward(sc, params, r.grads.data(), SeededBatch(m, B, 3).mb);
  r.held = sc.held_bytes_per_slot();
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    r.held_expected += sc.activation_bytes(u).held(rc);
  }
  return r;
}

TEST(LlamaStage, Fp32KernelsMatchTheDoubleReference) {
  const test::OneThread one_thread;
  const ModelSpec m = test::llama_tiny();
  const std::int64_t B = 2;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(11);
  const StageRun f = run_stage<CpuKernels>(m, st.params(), st.numel(), {}, 0.1f, B);
  const std::vector<double> p(st.params(), st.params() + st.numel());
  std::vector<double> g(p.size(), 0.0);
  StageCompute<RefKernels<double>> ref(m, whole_model(m, B, {}, 0.1f));
  const double loss = forward_backward(ref, p.data(), g.data(), SeededBatch(m, B, 3).mb);
  // fp32 rounding (2^-24) through two blocks of sums over at most 256 terms: 1e-5 of the loss
  // and of the largest gradient element bound it with a wide margin; a wrong kernel is O(1).
  EXPECT_NEAR(f.loss, loss, 1e-5 * loss);
  const double gmax = max_abs(g);
  ASSERT_GT(gmax, 1e-4);
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(f.grads[i] - g[i]));
  EXPECT_LT(worst, 1e-4 * gmax);
}

TEST(LlamaStage, EveryRecomputeSetGivesBitwiseIdenticalGradients) {
  const test::OneThread one_thread;
  const ModelSpec m = test::llama_tiny();
  ModelState st(m, 0, m.num_units() - 1);
  st.init(5);
  for (float p : {0.0f, 0.1f}) {
    const StageRun base = run_stage<CpuKernels>(m, st.params(), st.numel(), {}, p, 1);
    for (unsigned bits = 1; bits < (1u << kNumRecomputeOps); ++bits) {
      const RecomputeSet rc = RecomputeSet::from_bits(static_cast<std::uint8_t>(bits));
      const StageRun r = run_stage<CpuKernels>(m, st.params(), st.numel(), rc, p, 1);
      EXPECT_EQ(r.loss, base.loss) << "recompute bits " << bits << " p " << p;
      EXPECT_EQ(0, std::memcmp(r.grads.data(), base.grads.data(), r.grads.size() * 4))
          << "recompute bits " << bits << " p " << p;
      EXPECT_EQ(r.held, r.held_expected) << "recompute bits " << bits;
      EXPECT_LE(r.held, base.held) << "recompute bits " << bits;
    }
  }
}

TEST(LlamaStage, Bf16RecomputeIsBitwiseAndTheGradientIsFp32sToBf16Rounding) {
  const test::OneThread one_thread;
  const ModelSpec m = test::llama_tiny();
  const std::int64_t B = 2;
  ModelState s16(m, 0, m.num_units() - 1, 1, 0, Precision::Bf16);
  s16.init(3);
  const StageRun base = run_stage<CpuBf16Kernels>(m, s16.params_bf16(), s16.numel(), {}, 0.0f, B);
  for (RecomputeSet rc : {RecomputeSet::all_ops(), RecomputeSet::from_bits(1u << 5)}) {
    const StageRun r = run_stage<CpuBf16Kernels>(m, s16.params_bf16(), s16.numel(), rc, 0.0f, B);
    EXPECT_EQ(r.loss, base.loss);
    EXPECT_EQ(0, std::memcmp(r.grads.data(), base.grads.data(), r.grads.size() * 4));
  }
  // The same (bf16-representable) weights in fp32. As tests/train/bf16_train_test.cpp argues
  // for GPT: a few 2^-8 of the gradient's scale after ~10 bf16 stores between the loss and a
  // weight gradient; 2e-2 of the largest element allowed, 1e-2 of the loss. A wrong layout or
  // a lost fp32 accumulation is off by O(1).
  ModelState s32(m, 0, m.num_units() - 1);
  for (std::int64_t i = 0; i < s32.numel(); ++i) {
    s32.params()[i] = float_from_bf16(s16.params_bf16()[i]);
  }
  const StageRun f = run_stage<CpuKernels>(m, s32.params(), s32.numel(), {}, 0.0f, B);
  EXPECT_NEAR(base.loss, f.loss, 1e-2 * f.loss);
  double worst = 0;
  for (std::size_t i = 0; i < f.grads.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(f.grads[i]) - base.grads[i]));
  }
  ASSERT_GT(max_abs(f.grads), 0);
  EXPECT_LT(worst, 2e-2 * max_abs(f.grads));
  std::printf("llama-tiny bf16 vs fp32: loss %.6f vs %.6f, worst gradient error %.2e of %.2e\n",
              base.loss, f.loss, worst, max_abs(f.grads));
}

// A tp 2 stage of the whole model over two threads joined by the runtime's tp group: each rank
// holds 2 query heads, 1 key/value head, 12 of 24 SwiGLU columns and 16 of 32 vocabulary rows.
// Its gradient, put together from the two shards, equals one process's (kernel set K); with
// `coords`, central differences of the tp 2 loss at those parameters are returned too.
template <class K>
struct TpRun {
  double loss = 0;
  std::vector<typename K::Grad> grads;
  std::vector<double> numeric;
};

template <class K>
TpRun<K> run_tp2(const ModelSpec& m, const std::vector<typename K::Param>& p, const MicroBatch& mb,
                 float dropout, const std::vector<std::size_t>& coords) {
  using P = typename K::Param;
  const ParamLayout full(m, 0, m.num_units() - 1);
  TpRun<K> out;
  out.grads.assign(p.size(), 0);
  out.numeric.assign(coords.size(), 0.0);
  std::mutex mu;
  LocalWorld world(2);
  auto errors = run_on_threads(world, [&](Communicator comm) {
    CommTpGroup group(comm);
    const auto rank = static_cast<std::int64_t>(comm.rank());
    StageCompute<K> sc(m, whole_model(m, mb.size, {}, dropout, 2, rank), &group);
    std::vector<P> w = p, mine(static_cast<std::size_t>(sc.layout().numel()));
    test::copy_rows(full, sc.layout(), w, mine, true);
    std::vector<typename K::Grad> g(mine.size(), 0);
    const double loss = forward_backward(sc, mine.data(), g.data(), mb);
    {
      std::lock_guard lock(mu);
      if (rank == 0) out.loss = loss;
      test::gather_grads(full, sc.layout(), g, out.grads, rank == 0);
    }
    const double h = 1e-5;
    for (std::size_t c = 0; c < coords.size(); ++c) {
      const P x0 = w[coords[c]];
      double l[2];
      for (int side = 0; side < 2; ++side) {
        w[coords[c]] = static_cast<P>(x0 + (side == 0 ? h : -h));
        test::copy_rows(full, sc.layout(), w, mine, true);
        sc.forward(0, mine.data(), mb, nullptr, nullptr);
        l[side] = sc.take_loss();
      }
      w[coords[c]] = x0;
      if (rank == 0) out.numeric[c] = (l[0] - l[1]) / (2 * h);
    }
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return out;
}

TEST(LlamaStage, Tp2GqaStageMatchesTheDoubleReferenceAndFiniteDifferences) {
  const test::OneThread one_thread;
  const ModelSpec m = small_llama();  // 4 heads over 2 kv heads: one kv head per tp rank
  const std::int64_t B = 2;
  const std::vector<double> p = perturbed_params(m, 7);
  const SeededBatch batch(m, B, 1);
  const MicroBatch& mb = batch.mb;
  std::vector<double> want(p.size(), 0.0);
  StageCompute<RefKernels<double>> single(m, whole_model(m, B, {}, 0.1f));
  const double want_loss = forward_backward(single, p.data(), want.data(), mb);
  const double gmax = max_abs(want);
  ASSERT_GT(gmax, 1e-3);
  // Finite differences on every tensor of every unit: both ranks' rows of the sharded tensors
  // (q of each group, k, v, gate, up, down, the vocabulary halves) and the replicated norms.
  std::vector<std::size_t> coords;
  const ParamLayout full(m, 0, m.num_units() - 1);
  for (const UnitSlot& u : full.units()) {
    for (const TensorSlot& t : u.tensors) {
      const std::int64_t n = t.desc.numel();
      for (std::int64_t k : {std::int64_t{0}, n / 3, n / 2 + 1, n - 1}) {
        coords.push_back(static_cast<std::size_t>(t.offset + k));
      }
    }
  }
  const TpRun<RefKernels<double>> tp = run_tp2<RefKernels<double>>(m, p, mb, 0.1f, coords);
  EXPECT_NEAR(tp.loss, want_loss, 1e-12 * want_loss);
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) worst = std::max(worst, std::abs(tp.grads[i] - want[i]));
  EXPECT_LT(worst, 1e-12 * gmax);
  for (std::size_t c = 0; c < coords.size(); ++c) {
    const double g = tp.grads[coords[c]], num = tp.numeric[c];
    const double err = std::abs(num - g) / std::max({std::abs(num), std::abs(g), 1e-3 * gmax});
    EXPECT_LT(err, 1e-6) << "parameter " << coords[c] << ": analytic " << g << ", numeric " << num;
  }
}

TEST(LlamaStage, Tp2OfLlamaTinyEqualsOneProcessInFp32) {
  const test::OneThread one_thread;
  const ModelSpec m = test::llama_tiny();  // 4 heads, 2 kv heads, ffn 128, V 256
  const std::int64_t B = 2;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(13);
  const std::vector<float> p(st.params(), st.params() + st.numel());
  const StageRun one = run_stage<CpuKernels>(m, st.params(), st.numel(), {}, 0.1f, B);
  const TpRun<CpuKernels> tp = run_tp2<CpuKernels>(m, p, SeededBatch(m, B, 3).mb, 0.1f, {});
  // The same arithmetic up to the order of fp32 sums (partial products summed over ranks).
  EXPECT_NEAR(tp.loss, one.loss, 1e-6 * one.loss);
  const double gmax = max_abs(one.grads);
  ASSERT_GT(gmax, 0);
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(tp.grads[i]) - one.grads[i]));
  }
  EXPECT_LT(worst, 1e-5 * gmax);
}

// What a slot holds, per operator class, in fp32 against the 16-bit formula of model/
// arithmetic.h (activation_bytes_16bit) for the Llama family, term by term:
//   - every tensor the formula counts at 2 bytes per element is 4 here: the rotated qkv (C +
//     2 kv_dim per token), P, the SwiGLU product, its gate and up inputs, the norms' inputs and
//     outputs, proj's input, each unit's input; the 1-byte dropout masks are 1 byte here too;
//   - RMSNorm keeps rstd only (1 float per token per norm: 8 s b per block, 4 s b in the head),
//     which the formula neglects;
//   - without dropout no masks and no separate dropped-out P;
//   - the head keeps fp32 logits only (4 s b V) where the formula has 6 s b V, plus lse and loss
//     per token (8 s b).
void expect_bytes_relation(std::int64_t B, float dropout, std::int64_t tp) {
  const ModelSpec m = test::llama_tiny();
  const std::int64_t T = m.seq_len;
  const double sb = static_cast<double>(B * T), sbh = sb * static_cast<double>(m.hidden);
  const bool drop = dropout > 0;
  auto idx = [](RecomputeOp op) { return static_cast<std::size_t>(op); };
  // Sizing a tp stage needs no communication: a group of the right size that is never called.
  class Idle final : public TpGroup {
   public:
    int size() const override { return 2; }
    void allreduce_sum(std::span<float>) override { ADD_FAILURE(); }
    void allreduce_sum(std::span<double>) override { ADD_FAILURE(); }
    void allreduce_max(std::span<float>) override { ADD_FAILURE(); }
    void allreduce_max(std::span<double>) override { ADD_FAILURE(); }
  } idle;
  StageCompute<CpuKernels> sc(m, whole_model(m, B, {}, dropout, tp), tp > 1 ? &idle : nullptr);
  const double t = static_cast<double>(tp);
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    SCOPED_TRACE("unit " + std::to_string(u) + " tp " + std::to_string(tp) +
                 (drop ? " with dropout" : ""));
    const ActivationBytes& got = sc.activation_bytes(u);
    const ActivationBytes f = activation_bytes_16bit(m, u, B, T, tp);
    switch (unit_kind(m, u)) {
      case UnitKind::Embedding:
        EXPECT_EQ(got.other, drop ? f.other : f.other - sbh);
        EXPECT_EQ(got.unit_input, f.unit_input);
        break;
      case UnitKind::Block:
        EXPECT_EQ(got.op[idx(RecomputeOp::Qkv)], 2 * f.op[idx(RecomputeOp::Qkv)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::Qkv)],
                  4 * sb * static_cast<double>(qkv_rows(m)) / t);  // GQA's smaller K and V
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnSoftmax)], 2 * f.op[idx(RecomputeOp::AttnSoftmax)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::MlpAct)], 2 * f.op[idx(RecomputeOp::MlpAct)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnScore)],
                  drop ? 2 * f.op[idx(RecomputeOp::AttnScore)] : 0.0);
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnDropout)],
                  drop ? f.op[idx(RecomputeOp::AttnDropout)] : 0.0);
        // f.other: 10 sbh (of which 2 sbh the two masks) + (2 sbh + 4 s b F) / t.
        EXPECT_EQ(got.other, 2 * (f.other - 2 * sbh) + (drop ? 2 * sbh : 0.0) + 8 * sb);
        EXPECT_EQ(got.unit_input, 2 * f.unit_input);
        break;
      case UnitKind::Head: {
        const double sbv = sb * static_cast<double>((m.vocab + tp - 1) / tp);
        EXPECT_EQ(f.other, 4 * sbh + 6 * sbv);
        EXPECT_EQ(got.other, 2 * 4 * sbh + 4 * sbv + 12 * sb);
        EXPECT_EQ(got.unit_input, 2 * f.unit_input);
        for (double op : got.op) EXPECT_EQ(op, 0.0);
        break;
      }
    }
  }
}

TEST(LlamaStage, ActivationBytesStandInTheStatedRelationToTheMemoryModel) {
  expect_bytes_relation(2, 0.1f, 1);
  expect_bytes_relation(3, 0.0f, 1);
  expect_bytes_relation(2, 0.1f, 2);
}

// The predictor's activation memory of a Llama stage (in-flight slots x held bytes + workspace,
// composed from a profile measured off one-unit stages, as `eth profile --measure` does) is
// the arena the runtime plans for that stage, as tests/train/arena_model_test.cpp checks for
// GPT: stages with the embedding, blocks and the head, fp32 and bf16, recompute sets, tp 2.
TEST(LlamaArena, PredictedActivationMemoryIsThePlannedArena) {
  // Every buffer a multiple of the arena's 64-byte alignment: N = B * 16, C = 32, QKV = 32 +
  // 2 * 16, F = 96, V = 64, T * T = 256.
  ModelSpec m = small_llama();
  m.name = "aligned-llama";
  m.layers = 3;
  m.hidden = 32;
  m.seq_len = 16;
  m.vocab = 64;
  m.ffn = 96;
  ClusterSpec cluster;
  cluster.name = "cpus";
  cluster.nodes = {{"cpu", 8}};
  cluster.inter_node_bandwidth_gbps = 10;
  cluster.device_types["cpu"] = DeviceType{"cpu", 1, 100, 100, std::nullopt, 1.0};
  cluster.custom_types = {"cpu"};
  RecomputeSet softmax_mlp, unit;
  softmax_mlp.add(RecomputeOp::AttnSoftmax);
  softmax_mlp.add(RecomputeOp::MlpAct);
  unit.add(RecomputeOp::Unit);
  struct Case {
    Precision p;
    std::int64_t mbs;
    RecomputeSet rc;
    float dropout;
    std::int64_t tp;
  };
  const std::vector<Case> cases = {{Precision::Fp32, 2, {}, 0.0f, 1},
                                   {Precision::Fp32, 3, softmax_mlp, 0.1f, 1},
                                   {Precision::Bf16, 2, unit, 0.1f, 1},
                                   {Precision::Bf16, 1, softmax_mlp, 0.0f, 2},
                                   {Precision::Fp32, 2, {}, 0.1f, 2}};
  const std::vector<std::int64_t> cuts = {0, 2, 4};  // embedding + block, blocks, block + head
  for (const Case& c : cases) {
    ProfileDb profile(m);
    profile.add(test::arena_profile_entry(c.p, m, c.mbs, c.dropout, c.tp));
    Plan plan;
    plan.model = m;
    plan.model_is_preset = false;
    plan.seq_len = m.seq_len;
    PipelinePlan pipe;
    pipe.micro_batch_size = c.mbs;
    pipe.local_batch = c.mbs * 5;
    std::int64_t device = 0;
    for (std::size_t s = 0; s < cuts.size(); ++s) {
      StagePlan st;
      st.device_type = "cpu";
      st.tp = c.tp;
      st.first_unit = cuts[s];
      st.last_unit = s + 1 < cuts.size() ? cuts[s + 1] - 1 : m.num_units() - 1;
      st.recompute = c.rc;
      for (std::int64_t t = 0; t < c.tp; ++t) st.devices.push_back(device++);
      pipe.stages.push_back(st);
    }
    plan.gbs = pipe.local_batch;
    plan.pipelines = {pipe};
    PredictOptions po;
    po.precision = c.p;
    const Prediction pred = predict(plan, cluster, profile, po);
    const auto S = static_cast<std::int64_t>(cuts.size());
    for (std::int64_t s = 0; s < S; ++s) {
      const StagePlan& st = plan.pipelines[0].stages[static_cast<std::size_t>(s)];
      const StagePrediction& sp = pred.pipelines[0].stages[static_cast<std::size_t>(s)];
      ASSERT_EQ(sp.in_flight, S - s);
      const auto arena = PrecisionStage::planned_arena_bytes(
          c.p, m,
          test::unit_range(m, st.first_unit, st.last_unit, c.mbs, S - s, c.rc, c.dropout, c.tp));
      EXPECT_DOUBLE_EQ(sp.memory.activations + sp.memory.workspace, static_cast<double>(arena))
          << precision_name(c.p) << " mbs " << c.mbs << " tp " << c.tp << " recompute bits "
          << int(c.rc.bits()) << " units " << st.first_unit << ".." << st.last_unit;
    }
  }
}

// What no kernel computes stops the stage before any work (model files and the CLI refuse
// these by field first: model/model_spec.cpp, cli/train_args.cpp require_trainable).
TEST(LlamaStageDeathTest, RefusesWhatItCannotCompute) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ModelSpec odd = small_llama();
  odd.hidden = 12;  // head size 3: rotary positions pair the halves of a head
  EXPECT_DEATH(StageCompute<CpuKernels>(odd, whole_model(odd, 1)), "even head size");
  ModelSpec nobias = model_preset("tiny");
  nobias.bias = false;  // the layer-norm kernels add a bias
  EXPECT_DEATH(StageCompute<CpuKernels>(nobias, whole_model(nobias, 1)), "without biases");
}

}  // namespace
}  // namespace eth
