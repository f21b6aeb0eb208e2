// Vocabulary-parallel kernels: split into floor-division vocabulary ranges and joined as the
// runtime joins them (sum of the lookups, max then sum of the loss statistics), the references
// equal the whole-vocabulary embedding and cross-entropy in double, value and gradient; the fast
// kernels equal their references within the reduction tolerance, and the embedding equals the
// single-process encoder bitwise (one row plus zeros is exact).
#include "kernels/cpu/vocab_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernel_check.h"
#include "kernels/cpu/crossentropy.h"
#include "kernels/cpu/encoder.h"
#include "kernels/reference/crossentropy.h"
#include "kernels/reference/encoder.h"
#include "kernels/reference/vocab_parallel.h"

namespace eth::vocab_parallel_test {
namespace {

using test::expect_close;
using test::random_ids;
using test::random_vec;
using test::reduction_tol;
using test::rms;
using test::to_double;
using test::to_float;
using test::Vec;
using test::VecF;

constexpr std::int64_t B = 3, T = 7, N = B * T, C = 70, V = 97;  // 97 rows over tp 3: 32, 32, 33
constexpr auto sz = [](std::int64_t n) { return static_cast<std::size_t>(n); };

struct Range {
  std::int64_t v0, rows;
};
std::vector<Range> ranges(std::int64_t tp) {
  std::vector<Range> out;
  for (std::int64_t r = 0; r < tp; ++r) out.push_back({r * V / tp, (r + 1) * V / tp - r * V / tp});
  return out;
}

// Columns [v0, v0 + rows) of an (N, V) matrix, or rows of a (V, C) one: a rank's slice.
Vec cols(const Vec& m, std::int64_t width, const Range& r) {
  Vec out;
  for (std::int64_t n = 0; n < static_cast<std::int64_t>(m.size()) / width; ++n) {
    out.insert(out.end(), m.begin() + n * width + r.v0, m.begin() + n * width + r.v0 + r.rows);
  }
  return out;
}

TEST(VocabParallel, ShardedEmbeddingJoinsToTheWholeLookupAndGradient) {
  std::mt19937_64 gen(31);
  const auto tokens = random_ids(gen, sz(N), V);
  const Vec wte = random_vec(gen, sz(V * C)), wpe = random_vec(gen, sz(T * C));
  const Vec dout = random_vec(gen, sz(N * C));
  Vec want(sz(N * C)), dwte(sz(V * C), 0.0), dwpe(sz(T * C), 0.0);
  ref::encoder_forward(want.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  ref::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  for (std::int64_t tp : {1, 2, 3}) {
    Vec joined(sz(N * C), 0.0), dwte_joined;
    for (const Range& r : ranges(tp)) {
      const Vec rows(wte.begin() + r.v0 * C, wte.begin() + (r.v0 + r.rows) * C);
      Vec part(sz(N * C));
      ref::vocab_embedding_forward(part.data(), tokens.data(), rows.data(), r.v0, r.rows, N, C, V);
      for (std::size_t i = 0; i < part.size(); ++i) joined[i] += part[i];  // the all-reduce
      Vec d(rows.size(), 0.0);
      ref::vocab_embedding_backward(d.data(), dout.data(), tokens.data(), r.v0, r.rows, N, C);
      dwte_joined.insert(dwte_joined.end(), d.begin(), d.end());
    }
    ref::position_forward(joined.data(), wpe.data(), B, T, C);
    Vec dpos(sz(T * C), 0.0);
    ref::position_backward(dpos.data(), dout.data(), B, T, C);
    EXPECT_EQ(joined, want) << "tp " << tp;  // one row and zeros: exact
    EXPECT_EQ(dwte_joined, dwte) << "tp " << tp;
    EXPECT_EQ(dpos, dwpe) << "tp " << tp;
  }
}

TEST(VocabParallel, FastEmbeddingEqualsTheEncoderBitwise) {
  std::mt19937_64 gen(32);
  const auto tokens = random_ids(gen, sz(N), V);
  const VecF wte = to_float(random_vec(gen, sz(V * C))), wpe = to_float(random_vec(gen, sz(T * C)));
  const VecF dout = to_float(random_vec(gen, sz(N * C)));
  VecF want(sz(N * C)), dwte(sz(V * C), 0.5f), dwpe(sz(T * C), 0.25f);
  cpu::encoder_forward(want.data(), tokens.data(), wte.data(), wpe.data(), B, T, C, V);
  cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), tokens.data(), B, T, C, V);
  for (std::int64_t tp : {2, 3}) {
    VecF joined(sz(N * C), 0.0f), dwte_joined;
    for (const Range& r : ranges(tp)) {
      const VecF rows(wte.begin() + r.v0 * C, wte.begin() + (r.v0 + r.rows) * C);
      VecF part(sz(N * C), std::nanf(""));
      cpu::vocab_embedding_forward(part.data(), tokens.data(), rows.data(), r.v0, r.rows, N, C, V);
      for (std::size_t i = 0; i < part.size(); ++i) joined[i] += part[i];
      VecF d(rows.size(), 0.5f);
      cpu::vocab_embedding_backward(d.data(), dout.data(), tokens.data(), r.v0, r.rows, N, C);
      dwte_joined.insert(dwte_joined.end(), d.begin(), d.end());
    }
    cpu::position_forward(joined.data(), wpe.data(), B, T, C);
    VecF dpos(sz(T * C), 0.25f);
    cpu::position_backward(dpos.data(), dout.data(), B, T, C);
    EXPECT_EQ(joined, want) << "tp " << tp;
    EXPECT_EQ(dwte_joined, dwte) << "tp " << tp;
    EXPECT_EQ(dpos, dwpe) << "tp " << tp;
  }
}

// The loss of each rank's shard, joined by a max and a sum over the ranks, against the whole.
struct Joined {
  Vec losses, lse, dlogits;
  double loss = 0;
};
template <typename Real, typename Kmax, typename Ksums, typename Kfinish, typename Kback>
Joined sharded_loss(const std::vector<Real>& logits, const std::vector<std::int32_t>& targets,
                    std::int64_t tp, double scale, Kmax kmax, Ksums ksums, Kfinish kfinish,
                    Kback kback) {
  const auto rs = ranges(tp);
  std::vector<std::vector<Real>> shard;
  for (const Range& r : rs) {
    const Vec c = cols(Vec(logits.begin(), logits.end()), V, r);
    shard.emplace_back(c.begin(), c.end());
  }
  std::vector<Real> mx(sz(N), -INFINITY), stats(sz(2 * N), 0), part(sz(2 * N));
  for (std::size_t k = 0; k < rs.size(); ++k) {
    std::vector<Real> m(sz(N));
    kmax(m.data(), shard[k].data(), N, rs[k].rows);
    for (std::int64_t n = 0; n < N; ++n) mx[sz(n)] = std::max(mx[sz(n)], m[sz(n)]);
  }
  for (std::size_t k = 0; k < rs.size(); ++k) {
    ksums(part.data(), shard[k].data(), mx.data(), targets.data(), rs[k].v0, N, rs[k].rows);
    for (std::size_t i = 0; i < part.size(); ++i) stats[i] += part[i];
  }
  std::vector<Real> losses(sz(N)), lse(sz(N));
  Joined j;
  kfinish(&j.loss, losses.data(), lse.data(), mx.data(), stats.data(), scale, N);
  j.losses.assign(losses.begin(), losses.end());
  j.lse.assign(lse.begin(), lse.end());
  std::vector<std::vector<Real>> d(rs.size());
  for (std::size_t k = 0; k < rs.size(); ++k) {
    d[k].resize(shard[k].size());
    kback(d[k].data(), shard[k].data(), lse.data(), targets.data(), rs[k].v0, scale, N, rs[k].rows);
  }
  for (std::int64_t n = 0; n < N; ++n) {  // columns back in vocabulary order
    for (std::size_t k = 0; k < rs.size(); ++k) {
      j.dlogits.insert(j.dlogits.end(), d[k].begin() + n * rs[k].rows,
                       d[k].begin() + (n + 1) * rs[k].rows);
    }
  }
  return j;
}

TEST(VocabParallel, ShardedCrossEntropyEqualsTheWholeInDouble) {
  std::mt19937_64 gen(33);
  const Vec logits = random_vec(gen, sz(N * V), -4, 4);
  const auto targets = random_ids(gen, sz(N), V);
  const double scale = 1.0 / 50;
  Vec losses(sz(N)), lse(sz(N)), dlogits(sz(N * V));
  double loss = 0;
  ref::crossentropy_forward(&loss, losses.data(), lse.data(), logits.data(), targets.data(), scale,
                            N, V);
  ref::crossentropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), scale, N,
                             V);
  for (std::int64_t tp : {1, 2, 3, 8}) {
    const Joined j = sharded_loss(logits, targets, tp, scale, ref::vocab_ce_max<double>,
                                  ref::vocab_ce_sums<double>, ref::vocab_ce_finish<double>,
                                  ref::vocab_ce_backward<double>);
    EXPECT_NEAR(j.loss, loss, 1e-13 * std::abs(loss)) << "tp " << tp;
    for (std::int64_t n = 0; n < N; ++n) {
      EXPECT_NEAR(j.lse[sz(n)], lse[sz(n)], 1e-13) << "tp " << tp;
      EXPECT_NEAR(j.losses[sz(n)], losses[sz(n)], 1e-13) << "tp " << tp;
    }
    for (std::size_t i = 0; i < dlogits.size(); ++i) {
      ASSERT_NEAR(j.dlogits[i], dlogits[i], 1e-15) << "tp " << tp << " element " << i;
    }
  }
}

TEST(VocabParallel, FastCrossEntropyMatchesTheReferenceShardByShard) {
  std::mt19937_64 gen(34);
  const Vec logits = random_vec(gen, sz(N * V), -4, 4);
  const auto targets = random_ids(gen, sz(N), V);
  const double scale = 1.0 / 50;
  const Joined want =
      sharded_loss(logits, targets, 3, scale, ref::vocab_ce_max<double>, ref::vocab_ce_sums<double>,
                   ref::vocab_ce_finish<double>, ref::vocab_ce_backward<double>);
  const VecF lf = to_float(logits);
  auto finish = [](double* l, float* a, float* b, const float* m, const float* s, double sc,
                   std::int64_t n) { cpu::vocab_ce_finish(l, a, b, m, s, sc, n); };
  const Joined got = sharded_loss(lf, targets, 3, scale, cpu::vocab_ce_max, cpu::vocab_ce_sums,
                                  finish, cpu::vocab_ce_backward);
  const double tol = reduction_tol(V);
  expect_close("lse", to_float(got.lse), want.lse, tol * rms(want.lse), tol);
  expect_close("losses", to_float(got.losses), want.losses, tol * rms(want.losses), tol);
  expect_close("dlogits", to_float(got.dlogits), want.dlogits, tol * rms(want.dlogits), tol);
  EXPECT_NEAR(got.loss, want.loss, tol * std::abs(want.loss));
}

}  // namespace
}  // namespace eth::vocab_parallel_test
