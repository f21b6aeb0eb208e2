// Tied input/output embeddings in one process: the head's lm_head_w starts as the embedding's
// wte (whole and as tp shards), one backward leaves the sum of both gradients in one place
// (against finite differences of the tied parameter in double, and against an untied model's two
// gradients added by hand), training keeps the two copies bitwise equal, and a checkpoint holds
// the matrix once and resumes bit-identically.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "train/checkpoint.h"
#include "train/kernel_set.h"
#include "train/model_state.h"
#include "train/stage_compute.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

ModelSpec tied(ModelSpec m) {
  m.tied_embeddings = true;
  return m;
}

// Offsets of the embedding's wte and the head's lm_head_w in a layout of every unit.
struct Copies {
  std::int64_t wte = 0, head = 0, numel = 0;
  std::int64_t wte_grad = 0, head_grad = 0;
};
Copies copies(const ParamLayout& l) {
  const TensorSlot& w = l.unit(0).tensors[kWte];
  const TensorSlot* h = nullptr;
  for (const TensorSlot& t : l.unit(l.last_unit()).tensors) {
    if (t.desc.name == "lm_head_w") h = &t;
  }
  EXPECT_NE(h, nullptr);
  return {w.offset, h->offset, w.desc.numel(), w.grad_offset(), h->grad_offset()};
}

StageComputeConfig whole(const ModelSpec& m, std::int64_t B) {
  StageComputeConfig c;
  c.first_unit = 0;
  c.last_unit = m.num_units() - 1;
  c.max_micro_batch = B;
  c.seq_len = m.seq_len;
  c.dropout = 0.1f;
  c.seed = 99;
  return c;
}

TEST(Tied, HeadStartsAsTheEmbeddingWholeAndAsTpShards) {
  const ModelSpec m = tied(model_preset("tiny"));
  ModelState full(m, 0, m.num_units() - 1);
  full.init(11);
  const Copies c = copies(full.layout());
  EXPECT_EQ(0, std::memcmp(full.params() + c.wte, full.params() + c.head,
                           static_cast<std::size_t>(c.numel) * 4));
  // An untied model draws its head from a stream of its own: the test can tell them apart.
  ModelState untied(model_preset("tiny"), 0, m.num_units() - 1);
  untied.init(11);
  EXPECT_NE(0, std::memcmp(untied.params() + c.wte, untied.params() + c.head,
                           static_cast<std::size_t>(c.numel) * 4));
  // A head stage of tp 3 (uneven vocabulary rows) holds its rows of wte.
  for (std::int64_t r = 0; r < 3; ++r) {
    ModelState head(m, m.num_units() - 1, m.num_units() - 1, 3, r);
    head.init(11);
    const TensorSlot& t = head.layout().unit(m.num_units() - 1).tensors[kLmHeadW];
    EXPECT_EQ(0, std::memcmp(head.params() + t.offset,
                             full.params() + c.wte + t.rows.begin * m.hidden,
                             static_cast<std::size_t>(t.desc.numel()) * 4))
        << "tp rank " << r;
  }
}

// The loss as a function of the tied matrix (both copies moved together), differentiated
// numerically in double: the gradient one backward leaves at wte's place is its derivative.
TEST(Tied, GradientIsTheFiniteDifferenceOfTheTiedParameter) {
  const test::OneThread one_thread;
  const ModelSpec m = tied(test::small_model());
  const std::int64_t B = 2, T = m.seq_len;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(7);
  const Copies c = copies(st.layout());
  EXPECT_EQ(c.wte_grad, c.head_grad);  // one gradient for both copies
  std::vector<double> p(st.params(), st.params() + st.numel());
  std::vector<double> g(static_cast<std::size_t>(st.layout().grad_numel()), 0.0);
  const auto tokens = test::random_tokens(1, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(2, static_cast<std::size_t>(B * T), m.vocab);
  StageCompute<RefKernels<double>> sc(m, whole(m, B));
  const MicroBatch mb = test::micro_batch(tokens, targets, B, T);
  sc.forward(0, p.data(), mb, nullptr, nullptr);
  sc.backward(0, p.data(), g.data(), mb, nullptr, nullptr);
  (void)sc.take_loss();
  double gmax = 0;
  for (std::int64_t i = 0; i < c.numel; ++i) {
    gmax = std::max(gmax, std::abs(g[static_cast<std::size_t>(c.wte_grad + i)]));
    // The head's own gradient room (kept for the memory model) is never written.
    EXPECT_EQ(g[static_cast<std::size_t>(c.head + i)], 0.0);
  }
  // Central differences, h = 1e-5 (as tests/train/stage_test.cpp argues for this model size).
  const double h = 1e-5;
  double worst = 0, worst_untied = 0;
  for (std::int64_t i = 0; i < c.numel; ++i) {
    auto loss_at = [&](double dx) {
      const double w0 = p[static_cast<std::size_t>(c.wte + i)];
      p[static_cast<std::size_t>(c.wte + i)] = w0 + dx;
      p[static_cast<std::size_t>(c.head + i)] = w0 + dx;
      sc.forward(0, p.data(), mb, nullptr, nullptr);
      p[static_cast<std::size_t>(c.wte + i)] = w0;
      p[static_cast<std::size_t>(c.head + i)] = w0;
      return sc.take_loss();
    };
    const double num = (loss_at(h) - loss_at(-h)) / (2 * h);
    const double got = g[static_cast<std::size_t>(c.wte_grad + i)];
    worst = std::max(worst, std::abs(num - got) / std::max({std::abs(num), std::abs(got),
                                                             1e-3 * gmax}));
    // Moving the embedding's copy alone has another derivative: the check can fail.
    const double w0 = p[static_cast<std::size_t>(c.wte + i)];
    p[static_cast<std::size_t>(c.wte + i)] = w0 + h;
    sc.forward(0, p.data(), mb, nullptr, nullptr);
    const double lp = sc.take_loss();
    p[static_cast<std::size_t>(c.wte + i)] = w0 - h;
    sc.forward(0, p.data(), mb, nullptr, nullptr);
    const double lm = sc.take_loss();
    p[static_cast<std::size_t>(c.wte + i)] = w0;
    worst_untied = std::max(worst_untied, std::abs((lp - lm) / (2 * h) - got) / gmax);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_GT(worst_untied, 1e-2);
  EXPECT_GT(gmax, 1e-3);
}

// Two micro-batches accumulated by fp32 CPU kernels into the tied layout equal an untied
// model's wte and lm_head_w gradients at the same weights, added afterwards.
TEST(Tied, OneBufferHoldsTheSumOfBothGradients) {
  const test::OneThread one_thread;
  const ModelSpec m = tied(model_preset("tiny"));
  const ModelSpec mu = model_preset("tiny");
  const std::int64_t B = 2, T = 16;
  ModelState st(m, 0, m.num_units() - 1);
  st.init(3);
  ModelState su(mu, 0, mu.num_units() - 1);
  std::memcpy(su.params(), st.params(), static_cast<std::size_t>(st.numel()) * 4);
  st.zero_grads();
  su.zero_grads();
  StageComputeConfig cfg = whole(m, B);
  cfg.seq_len = T;
  StageCompute<CpuKernels> ct(m, cfg), cu(mu, cfg);
  for (std::uint64_t k = 0; k < 2; ++k) {
    const auto tokens = test::random_tokens(10 + k, static_cast<std::size_t>(B * T), m.vocab);
    const auto targets = test::random_tokens(20 + k, static_cast<std::size_t>(B * T), m.vocab);
    const MicroBatch mb = test::micro_batch(tokens, targets, B, T);
    ct.forward(0, st.params(), mb, nullptr, nullptr);
    ct.backward(0, st.params(), st.grads(), mb, nullptr, nullptr);
    cu.forward(0, su.params(), mb, nullptr, nullptr);
    cu.backward(0, su.params(), su.grads(), mb, nullptr, nullptr);
  }
  const Copies c = copies(st.layout());
  double gmax = 0, worst = 0;
  for (std::int64_t i = 0; i < c.numel; ++i) {
    const double want = double(su.grads()[c.wte + i]) + su.grads()[c.head + i];
    gmax = std::max(gmax, std::abs(want));
    worst = std::max(worst, std::abs(double(st.grads()[c.wte_grad + i]) - want));
    EXPECT_EQ(st.grads()[c.head + i], 0.0f);
  }
  EXPECT_GT(gmax, 0);
  EXPECT_LT(worst, 1e-5 * gmax);  // fp32 sums in another order
  // Every other gradient is the untied model's, bit for bit (the same kernels, the same order).
  for (std::int64_t i = 0; i < st.numel(); ++i) {
    if ((i >= c.wte && i < c.wte + c.numel) || (i >= c.head && i < c.head + c.numel)) continue;
    ASSERT_EQ(st.grads()[i], su.grads()[i]) << i;
  }
}

TrainConfig tied_config(const fs::path& data) {
  TrainConfig c;
  c.model = tied(model_preset("tiny"));
  c.data = data;
  c.steps = 6;
  c.global_batch = 4;
  c.micro_batch = 2;
  c.seq_len = 16;
  c.lr = LrSchedule{1e-2, 1e-3, 1, 6};
  c.dropout = 0.1f;
  c.seed = 4;
  return c;
}

// The tensor names in a checkpoint's header.
std::vector<std::string> tensor_names(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  const Json header = Json::parse(text);
  std::vector<std::string> names;
  for (auto it = header.begin(); it != header.end(); ++it) names.push_back(it.key());
  return names;
}

TEST(Tied, TrainingKeepsTheCopiesEqualAndACheckpointHoldsTheMatrixOnce) {
  const test::OneThread one_thread;
  const fs::path dir = test::temp_dir("tied_resume");
  const TrainConfig c = tied_config(test::synthetic_file(dir, 20000, 256));
  Trainer straight(c);
  std::vector<double> losses;
  while (!straight.done()) losses.push_back(straight.step().loss);
  const Copies k = copies(straight.state().layout());
  const auto bytes = static_cast<std::size_t>(k.numel) * 4;
  const ModelState& s = straight.state();
  EXPECT_EQ(0, std::memcmp(s.params() + k.wte, s.params() + k.head, bytes));
  EXPECT_EQ(0, std::memcmp(s.adam_m() + k.wte, s.adam_m() + k.head, bytes));
  EXPECT_EQ(0, std::memcmp(s.adam_v() + k.wte, s.adam_v() + k.head, bytes));

  fs::path ckpt;
  {
    Trainer first(c);
    for (int i = 0; i < 3; ++i) first.step();
    ckpt = first.save_checkpoint(dir / "ckpt");
  }
  const std::vector<std::string> names = tensor_names(ckpt);
  const std::string head = "unit" + std::to_string(c.model.num_units() - 1) + ".lm_head_w";
  EXPECT_EQ(std::count(names.begin(), names.end(), "unit0.wte"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), head), 0);
  Trainer resumed(c, ckpt);
  for (std::size_t i = 3; i < losses.size(); ++i) EXPECT_EQ(resumed.step().loss, losses[i]) << i;
  const auto all = static_cast<std::size_t>(s.numel()) * 4;
  EXPECT_EQ(0, std::memcmp(resumed.state().params(), s.params(), all));
  EXPECT_EQ(0, std::memcmp(resumed.state().adam_v(), s.adam_v(), all));

  // The untied model has no such file's head: refused by name, not read as wte.
  TrainConfig u = c;
  u.model.tied_embeddings = false;
  try {
    Trainer wrong(u, ckpt);
    ADD_FAILURE() << "an untied run resumed a tied checkpoint";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("__metadata__.model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace eth
