// StageCompute: the whole model's gradient against central finite differences (double
// reference kernels), bitwise-identical gradients under every recompute set, a model cut into
// two stages equal to the whole, and the activation bytes each slot really holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "train/kernel_set.h"
#include "train/measure_profile.h"
#include "train/model_state.h"
#include "train/stage_compute.h"
#include "train_test_util.h"

namespace eth {
namespace {

StageComputeConfig whole(const ModelSpec& m, std::int64_t B, RecomputeSet rc, float p) {
  StageComputeConfig c;
  c.first_unit = 0;
  c.last_unit = m.num_units() - 1;
  c.max_micro_batch = B;
  c.seq_len = m.seq_len;
  c.recompute = rc;
  c.dropout = p;
  c.seed = 99;
  return c;
}

using test::micro_batch;

// The model's loss as a function of every parameter, differentiated numerically in double.
// With dropout on: masks are fixed by (seed, step, sample, unit, operator), so the loss is a
// smooth function of the parameters and finite differences apply.
TEST(StageCompute, WholeModelGradientMatchesFiniteDifferences) {
  const test::OneThread one_thread;
  const ModelSpec m = test::small_model();
  const std::int64_t B = 2, T = m.seq_len;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(7);
  std::vector<double> p(st.params(), st.params() + st.numel());
  // Layer norms start at weight 1, bias 0 and biases at 0; perturb them so their gradients are
  // checked away from that special point.
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.01 * std::sin(static_cast<double>(i));
  std::vector<double> g(p.size(), 0.0);
  const auto tokens = test::random_tokens(1, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(2, static_cast<std::size_t>(B * T), m.vocab);
  StageCompute<RefKernels<double>> sc(m, whole(m, B, {}, 0.1f));
  const MicroBatch mb = micro_batch(tokens, targets, B, T);
  sc.forward(0, p.data(), mb, nullptr, nullptr);
  sc.backward(0, p.data(), g.data(), mb, nullptr, nullptr);
  (void)sc.take_loss();  // the differences below read their own forwards' losses

  double gmax = 0;
  for (double x : g) gmax = std::max(gmax, std::abs(x));
  // Central differences with h = 1e-5: truncation error ~h^2 * (third derivative) ~ 1e-10 and
  // rounding ~1e-16 * loss / h ~ 1e-11, both far below the 1e-6 relative tolerance on
  // gradients that reach 1e-2..1e-1; coordinates with tiny gradients are judged against
  // 1e-3 * max |g|, as in the kernel tests.
  const double h = 1e-5;
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
  EXPECT_LT(worst, 1e-6) << "parameter " << worst_i << " of " << p.size() << ": analytic "
                         << g[worst_i];
  EXPECT_GT(gmax, 1e-3);  // the check is not vacuous
}

struct RunResult {
  double loss = 0;
  std::vector<float> grads;
  double held = 0;
  double held_expected = 0;
};

RunResult run_whole(const ModelSpec& m, const ModelState& st, RecomputeSet rc, float p,
                    std::int64_t B) {
  const std::int64_t T = m.seq_len;
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(B * T), m.vocab);
  StageCompute<CpuKernels> sc(m, whole(m, B, rc, p));
  RunResult r;
  r.grads.assign(static_cast<std::size_t>(st.numel()), 0.0f);
  const MicroBatch mb = micro_batch(tokens, targets, B, T);
  sc.forward(0, st.params(), mb, nullptr, nullptr);
  r.loss = sc.take_loss();
  sc.backward(0, st.params(), r.grads.data(), mb, nullptr, nullptr);
  r.held = sc.held_bytes_per_slot();
  for (std::int64_t u = 0; u < m.num_units(); ++u)
    r.held_expected += sc.activation_bytes(u).held(rc);
  return r;
}

TEST(StageCompute, EveryRecomputeSetGivesBitwiseIdenticalGradients) {
  const test::OneThread one_thread;
  const ModelSpec m = model_preset("tiny");
  ModelState st(m, 0, m.num_units() - 1);
  st.init(5);
  for (float p : {0.0f, 0.1f}) {
    const RunResult base = run_whole(m, st, {}, p, 2);
    for (unsigned bits = 1; bits < (1u << kNumRecomputeOps); ++bits) {
      const RecomputeSet rc = RecomputeSet::from_bits(static_cast<std::uint8_t>(bits));
      const RunResult r = run_whole(m, st, rc, p, 2);
      EXPECT_EQ(r.loss, base.loss) << "recompute bits " << bits << " p " << p;
      EXPECT_EQ(0, std::memcmp(r.grads.data(), base.grads.data(), r.grads.size() * 4))
          << "recompute bits " << bits << " p " << p;
      EXPECT_EQ(r.held, r.held_expected) << "recompute bits " << bits;
      // Without dropout, attn_score and attn_dropout hold nothing, so sets of only those save 0.
      const unsigned empty_without_dropout =
          (1u << static_cast<unsigned>(RecomputeOp::AttnScore)) |
          (1u << static_cast<unsigned>(RecomputeOp::AttnDropout));
      if (p > 0 || (bits & ~empty_without_dropout) != 0) {
        EXPECT_LT(r.held, base.held) << "recompute bits " << bits << " saved nothing";
      } else {
        EXPECT_EQ(r.held, base.held) << "recompute bits " << bits;
      }
    }
  }
}

TEST(StageCompute, TwoStagesEqualTheWholeModel) {
  const ModelSpec m = model_preset("tiny");  // units 0..5
  const std::int64_t B = 3, T = m.seq_len, C = m.hidden;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(9);
  const RunResult whole_run = run_whole(m, st, {}, 0.1f, B);
  // Stage A = units 0..2, stage B = units 3..5 (with the head), different recompute sets.
  StageComputeConfig ca = whole(m, B, RecomputeSet::from_bits(1u << 5), 0.1f);
  ca.last_unit = 2;
  StageComputeConfig cb = whole(m, B, RecomputeSet::all_ops(), 0.1f);
  cb.first_unit = 3;
  StageCompute<CpuKernels> a(m, ca), b(m, cb);
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(B * T), m.vocab);
  const MicroBatch mb = micro_batch(tokens, targets, B, T);
  const std::int64_t split = st.layout().offset(3, kLn1W);  // stage B's parameters start here
  std::vector<float> act(static_cast<std::size_t>(B * T * C)), dact(act.size());
  std::vector<float> grads(static_cast<std::size_t>(st.numel()), 0.0f);
  a.forward(0, st.params(), mb, nullptr, act.data());
  b.forward(0, st.params() + split, mb, act.data(), nullptr);
  const double loss = b.take_loss();
  b.backward(0, st.params() + split, grads.data() + split, mb, nullptr, dact.data());
  a.backward(0, st.params(), grads.data(), mb, dact.data(), nullptr);
  EXPECT_EQ(loss, whole_run.loss);
  EXPECT_EQ(0, std::memcmp(grads.data(), whole_run.grads.data(), grads.size() * 4));
}

TEST(StageCompute, SlotsHoldTheBytesTheProfileFormatDescribes) {
  const ModelSpec m = model_preset("tiny");
  const std::int64_t B = 2, T = m.seq_len, C = m.hidden, F = m.ffn, NH = m.heads, V = m.vocab;
  const double N = static_cast<double>(B * T), TT = static_cast<double>(B * NH * T * T);
  StageCompute<CpuKernels> sc(m, whole(m, B, {}, 0.1f));
  auto idx = [](RecomputeOp op) { return static_cast<std::size_t>(op); };
  // fp32 tensors (4 bytes) and byte masks, per block:
  const ActivationBytes& blk = sc.activation_bytes(1);
  EXPECT_EQ(blk.op[idx(RecomputeOp::Qkv)], 4 * N * 3 * C);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnSoftmax)], 4 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnScore)], 4 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::AttnDropout)], 1 * TT);
  EXPECT_EQ(blk.op[idx(RecomputeOp::MlpAct)], 4 * N * F);
  // Other: x, ln1, atty, x2, ln2 (5 x N*C floats), two means and two rstds (4 x N floats),
  // the GELU input (N*F floats), two residual dropout masks (2 x N*C bytes).
  EXPECT_EQ(blk.other, 4 * (5 * N * C + 4 * N + N * F) + 2 * N * C);
  EXPECT_EQ(blk.unit_input, 4 * N * C);
  // Embedding: int32 tokens and the dropout mask. Head: x, lnf, mean, rstd, logits, lse, losses.
  EXPECT_EQ(sc.activation_bytes(0).other, 4 * N + N * C);
  EXPECT_EQ(sc.activation_bytes(m.layers + 1).other,
            4 * (2 * N * C + 4 * N + N * static_cast<double>(V)));
  double sum = 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) sum += sc.activation_bytes(u).total();
  EXPECT_EQ(sc.held_bytes_per_slot(), sum);
  // Without dropout the score/mask classes hold nothing (the probabilities are used as they are).
  StageCompute<CpuKernels> nodrop(m, whole(m, B, {}, 0.0f));
  EXPECT_EQ(nodrop.activation_bytes(1).op[idx(RecomputeOp::AttnScore)], 0);
  EXPECT_EQ(nodrop.activation_bytes(1).op[idx(RecomputeOp::AttnDropout)], 0);
}

TEST(StageCompute, PartialMicroBatchUsesOnlyItsSamples) {
  // A micro-batch of 1 in a stage sized for 3 equals a stage sized for 1.
  const ModelSpec m = model_preset("tiny");
  ModelState st(m, 0, m.num_units() - 1);
  st.init(2);
  const RunResult one = run_whole(m, st, {}, 0.1f, 1);
  StageCompute<CpuKernels> big(m, whole(m, 3, {}, 0.1f));
  const auto tokens = test::random_tokens(3, static_cast<std::size_t>(m.seq_len), m.vocab);
  const auto targets = test::random_tokens(4, static_cast<std::size_t>(m.seq_len), m.vocab);
  std::vector<float> grads(static_cast<std::size_t>(st.numel()), 0.0f);
  const MicroBatch mb = micro_batch(tokens, targets, 1, m.seq_len);
  big.forward(0, st.params(), mb, nullptr, nullptr);
  EXPECT_EQ(big.take_loss(), one.loss);
  big.backward(0, st.params(), grads.data(), mb, nullptr, nullptr);
  EXPECT_EQ(0, std::memcmp(grads.data(), one.grads.data(), grads.size() * 4));
}

// A tp group that is never asked to communicate: sizing a tp stage needs only its size.
class IdleGroup final : public TpGroup {
 public:
  explicit IdleGroup(int n) : n_(n) {}
  int size() const override { return n_; }
  void allreduce_sum(std::span<float>) override { ADD_FAILURE() << "unexpected collective"; }
  void allreduce_sum(std::span<double>) override { ADD_FAILURE() << "unexpected collective"; }
  void allreduce_max(std::span<float>) override { ADD_FAILURE() << "unexpected collective"; }
  void allreduce_max(std::span<double>) override { ADD_FAILURE() << "unexpected collective"; }

 private:
  int n_;
};

// What a tp rank allocates per micro-batch follows the memory model's split (model/arithmetic.h
// activation_bytes_16bit, Korthikanti et al.): every recompute class (Q/K/V, the attention
// matrices, the GELU output) and the head's logits are divided by tp, the rest is a replicated
// part plus a part divided by tp (the attention output and the GELU input).
TEST(StageCompute, TpRankActivationsScaleAsTheMemoryModelSays) {
  const ModelSpec m{"tp", 2, 16, 4, 8, 32, 24};
  auto bytes = [&](std::int64_t tp, std::int64_t u) {
    IdleGroup g(static_cast<int>(tp));
    StageComputeConfig c = whole(m, 2, {}, 0.1f);
    c.tp = tp;
    StageCompute<CpuKernels> sc(m, c, tp > 1 ? &g : nullptr);
    return sc.activation_bytes(u);
  };
  const std::int64_t block = 1, head = m.num_units() - 1;
  const ActivationBytes b1 = bytes(1, block), b2 = bytes(2, block), b4 = bytes(4, block);
  for (std::size_t op = 0; op < b1.op.size(); ++op) {
    EXPECT_GT(b1.op[op], 0) << op;
    EXPECT_EQ(b2.op[op] * 2, b1.op[op]) << op;
    EXPECT_EQ(b4.op[op] * 4, b1.op[op]) << op;
  }
  // other(t) = R + S/t: S = 2 (other(1) - other(2)), and R + S/4 predicts tp 4.
  const double S = 2 * (b1.other - b2.other), R = b1.other - S;
  EXPECT_GT(S, 0);
  EXPECT_EQ(b4.other, R + S / 4);
  // S is the attention output (N x C) and the GELU input (N x F), fp32.
  const double N = 2.0 * m.seq_len;
  EXPECT_EQ(S, 4 * N * (m.hidden + m.ffn));
  EXPECT_EQ(b2.unit_input, b1.unit_input);  // a unit's input is whole on every rank
  // The head's logits are the rank's vocabulary columns.
  EXPECT_EQ(bytes(1, head).other - bytes(4, head).other, 4 * N * (m.vocab - m.vocab / 4));
}

TEST(MeasureProfile, GivesAMeasuredCpuEntryWithTheAllocatedBytes) {
  MeasureOptions opt;
  opt.model = test::small_model();
  opt.micro_batch = 2;
  opt.warmup = 0;
  opt.repeats = 1;
  const ProfileEntry e = measure_profile(opt);
  EXPECT_EQ(e.key.device_type, "cpu");
  EXPECT_EQ(e.key.tp, 1);
  EXPECT_EQ(e.key.mbs, 2);
  EXPECT_EQ(e.seq_len, opt.model.seq_len);
  EXPECT_EQ(e.source, "measured");
  ASSERT_EQ(static_cast<std::int64_t>(e.units.size()), opt.model.num_units());
  StageCompute<CpuKernels> sc(opt.model, whole(opt.model, 2, {}, 0.0f));
  for (std::int64_t u = 0; u < opt.model.num_units(); ++u) {
    const UnitProfile& up = e.units[static_cast<std::size_t>(u)];
    EXPECT_EQ(up.params, unit_params(opt.model, u));
    EXPECT_GT(up.forward_ms, 0);
    EXPECT_GT(up.backward_ms, 0);
    EXPECT_EQ(up.activation.total(), sc.activation_bytes(u).total()) << "unit " << u;
    EXPECT_EQ(up.activation.unit_input, sc.activation_bytes(u).unit_input) << "unit " << u;
  }
  // Without dropout the dropout classes hold nothing, so recomputing them costs nothing.
  EXPECT_EQ(e.units[1].recompute_ms[static_cast<std::size_t>(RecomputeOp::AttnDropout)], 0);
  EXPECT_GT(e.optimizer_ms, 0);
}

}  // namespace
}  // namespace eth
