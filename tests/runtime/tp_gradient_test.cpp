// A tp 2 stage of the whole model in double (the reference kernels, over two LocalWorld threads
// joined by the runtime's tp group): its gradient, put together from the two shards, equals the
// single-process double-precision gradient, and central finite differences of the tp 2 loss
// agree with it, on sharded rows of both ranks and on replicated tensors. Dropout is on, so the
// attention mask slices of each rank's heads are checked too (a wrong slice changes the loss).
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "comm/local/local_comm.h"
#include "runtime/tp_comm.h"
#include "train/kernel_set.h"
#include "train/model_state.h"
#include "train/stage_compute.h"
#include "train/train_test_util.h"

namespace eth {
namespace {

using Ref = StageCompute<RefKernels<double>>;

// 4 heads of 3, ffn 20, vocabulary 13 (7 and 6 rows over tp 2), T = 5, 2 blocks.
ModelSpec model() { return ModelSpec{"tp-grad", 2, 12, 4, 5, 13, 20}; }

StageComputeConfig whole(const ModelSpec& m, std::int64_t B, std::int64_t tp, std::int64_t rank) {
  StageComputeConfig c;
  c.first_unit = 0;
  c.last_unit = m.num_units() - 1;
  c.max_micro_batch = B;
  c.seq_len = m.seq_len;
  c.dropout = 0.1f;
  c.seed = 99;
  c.tp = tp;
  c.tp_rank = rank;
  return c;
}

// Moves every tensor's rows between the whole layout and a rank's (to_shard: whole -> shard).
void copy_rows(const ParamLayout& whole, const ParamLayout& shard, std::vector<double>& w,
               std::vector<double>& s, bool to_shard) {
  for (const UnitSlot& u : shard.units()) {
    const UnitSlot& wu = whole.unit(u.unit);
    for (std::size_t i = 0; i < u.tensors.size(); ++i) {
      const TensorSlot& t = u.tensors[i];
      const auto a = static_cast<std::size_t>(t.offset);
      const auto b =
          static_cast<std::size_t>(wu.tensors[i].offset + t.rows.begin * t.row_size());
      for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
        if (to_shard) {
          s[a + static_cast<std::size_t>(k)] = w[b + static_cast<std::size_t>(k)];
        } else {
          w[b + static_cast<std::size_t>(k)] = s[a + static_cast<std::size_t>(k)];
        }
      }
    }
  }
}

TEST(TpGradient, Tp2StageMatchesTheDoubleReferenceAndFiniteDifferences) {
  const test::OneThread one_thread;
  const ModelSpec m = model();
  const std::int64_t B = 2, T = m.seq_len;
  const ParamLayout full(m, 0, m.num_units() - 1);
  ModelState init(m, 0, m.num_units() - 1);
  init.init(7);
  std::vector<double> p(init.params(), init.params() + init.numel());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.01 * std::sin(static_cast<double>(i));
  const auto tokens = test::random_tokens(1, static_cast<std::size_t>(B * T), m.vocab);
  const auto targets = test::random_tokens(2, static_cast<std::size_t>(B * T), m.vocab);
  const MicroBatch mb = test::micro_batch(tokens, targets, B, T);

  // One process, double precision.
  std::vector<double> want(p.size(), 0.0);
  Ref single(m, whole(m, B, 1, 0));
  single.forward(0, p.data(), mb, nullptr, nullptr);
  const double want_loss = single.take_loss();
  single.backward(0, p.data(), want.data(), mb, nullptr, nullptr);
  double gmax = 0;
  for (double x : want) gmax = std::max(gmax, std::abs(x));
  ASSERT_GT(gmax, 1e-3);

  // Coordinates for finite differences: spread over every tensor of every unit, so both ranks'
  // rows of every sharded tensor and the replicated tensors are hit.
  std::vector<std::size_t> coords;
  for (const UnitSlot& u : full.units()) {
    for (const TensorSlot& t : u.tensors) {
      const std::int64_t n = t.desc.numel();
      for (std::int64_t k : {std::int64_t{0}, n / 3, n / 2 + 1, n - 1}) {
        coords.push_back(static_cast<std::size_t>(t.offset + k));
      }
    }
  }
  const double h = 1e-5;
  std::vector<double> got(p.size(), 0.0), numeric(coords.size());
  double got_loss = 0;
  std::mutex mu;
  LocalWorld world(2);
  auto errors = run_on_threads(world, [&](Communicator comm) {
    CommTpGroup group(comm);
    const auto rank = static_cast<std::int64_t>(comm.rank());
    Ref sc(m, whole(m, B, 2, rank), &group);
    std::vector<double> w = p, mine(static_cast<std::size_t>(sc.layout().numel()));
    copy_rows(full, sc.layout(), w, mine, true);
    std::vector<double> g(mine.size(), 0.0);
    sc.forward(0, mine.data(), mb, nullptr, nullptr);
    const double loss = sc.take_loss();
    sc.backward(0, mine.data(), g.data(), mb, nullptr, nullptr);
    {
      std::lock_guard lock(mu);
      if (rank == 0) got_loss = loss;
      // Rank 1's replicated tensors equal rank 0's; write its rows only where it is the holder.
      std::vector<double> part(p.size(), 0.0);
      copy_rows(full, sc.layout(), part, g, false);
      for (const UnitSlot& u : sc.layout().units()) {
        const UnitSlot& wu = full.unit(u.unit);
        for (std::size_t i = 0; i < u.tensors.size(); ++i) {
          const TensorSlot& t = u.tensors[i];
          if (t.desc.split == TpSplit::Replicated && rank != 0) continue;
          const std::int64_t at = wu.tensors[i].offset + t.rows.begin * t.row_size();
          for (std::int64_t k = 0; k < t.desc.numel(); ++k) {
            got[static_cast<std::size_t>(at + k)] = part[static_cast<std::size_t>(at + k)];
          }
        }
      }
    }
    for (std::size_t c = 0; c < coords.size(); ++c) {
      const double x0 = w[coords[c]];
      double l[2];
      for (int side = 0; side < 2; ++side) {
        w[coords[c]] = x0 + (side == 0 ? h : -h);
        copy_rows(full, sc.layout(), w, mine, true);
        sc.forward(0, mine.data(), mb, nullptr, nullptr);
        l[side] = sc.take_loss();
      }
      w[coords[c]] = x0;
      if (rank == 0) numeric[c] = (l[0] - l[1]) / (2 * h);
    }
  });
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  EXPECT_NEAR(got_loss, want_loss, 1e-12 * want_loss);
  // The same gradient as one process up to the order of double additions.
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-12 * gmax);
  // Central differences, judged as the single-process finite-difference test judges them.
  for (std::size_t c = 0; c < coords.size(); ++c) {
    const double g = got[coords[c]], num = numeric[c];
    const double err = std::abs(num - g) / std::max({std::abs(num), std::abs(g), 1e-3 * gmax});
    EXPECT_LT(err, 1e-6) << "parameter " << coords[c] << ": analytic " << g << ", numeric " << num;
  }
}

}  // namespace
}  // namespace eth
