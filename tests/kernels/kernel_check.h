// Shared helpers of the kernel tests: seeded random tensors, the finite-difference gradient
// check (STYLE.md section on gradient checks) and the fast-vs-reference comparison that prints
// the first mismatches and the largest error. Test-only.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace eth::test {

using Vec = std::vector<double>;
using VecF = std::vector<float>;

inline constexpr double kFloatEps = 1.1920928955078125e-07;  // 2^-23

// Uniform values in [lo, hi), rounded to float so the same numbers feed both kernels.
inline Vec random_vec(std::mt19937_64& gen, std::size_t n, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(n);
  for (auto& x : v) x = static_cast<double>(static_cast<float>(d(gen)));
  return v;
}

inline std::vector<std::int32_t> random_ids(std::mt19937_64& gen, std::size_t n, std::int64_t V) {
  std::uniform_int_distribution<std::int64_t> d(0, V - 1);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = static_cast<std::int32_t>(d(gen));
  return v;
}

inline VecF to_float(const Vec& v) { return VecF(v.begin(), v.end()); }
inline Vec to_double(const VecF& v) { return Vec(v.begin(), v.end()); }

// <R, out>, accumulated in long double so that the finite difference of two evaluations is not
// swamped by the rounding of a long double-precision sum.
inline long double project(const Vec& R, const Vec& out) {
  long double acc = 0;
  for (std::size_t i = 0; i < R.size(); ++i) {
    acc += static_cast<long double>(R[i]) * static_cast<long double>(out[i]);
  }
  return acc;
}

// Central differences of loss() with respect to sampled coordinates of x, compared with the
// analytic gradient. Error per coordinate: |a - n| / max(|a|, |n|, 1e-3 * max |a|) (the floor
// keeps coordinates whose gradient is ~0 from dividing noise by noise). loss() must read x.
inline void expect_gradient(const std::string& name, Vec& x, const Vec& analytic,
                            const std::function<long double()>& loss, double tol = 1e-6,
                            std::size_t max_coords = 200) {
  ASSERT_EQ(x.size(), analytic.size()) << name;
  std::vector<std::size_t> coords(x.size());
  for (std::size_t i = 0; i < coords.size(); ++i) coords[i] = i;
  if (coords.size() > max_coords) {
    std::mt19937_64 gen(12345);
    std::shuffle(coords.begin(), coords.end(), gen);
    coords.resize(max_coords);
  }
  double gmax = 0;
  for (double a : analytic) gmax = std::max(gmax, std::abs(a));
  double worst = 0;
  std::size_t worst_i = 0;
  double worst_a = 0, worst_n = 0;
  for (std::size_t i : coords) {
    const double x0 = x[i];
    const double h = 1e-6 * std::max(1.0, std::abs(x0));
    // Divide by the step actually taken: x0 +- h is rounded, (x0 + h) - (x0 - h) is exact.
    const double xp = x0 + h, xm = x0 - h;
    x[i] = xp;
    const long double lp = loss();
    x[i] = xm;
    const long double lm = loss();
    x[i] = x0;
    const double numeric = static_cast<double>((lp - lm) / static_cast<long double>(xp - xm));
    const double a = analytic[i];
    const double denom = std::max({std::abs(a), std::abs(numeric), 1e-3 * gmax, 1e-300});
    const double err = std::abs(a - numeric) / denom;
    if (err > worst) {
      worst = err;
      worst_i = i;
      worst_a = a;
      worst_n = numeric;
    }
  }
  EXPECT_GT(gmax, 0.0) << name << ": the analytic gradient is identically zero";
  EXPECT_LE(worst, tol) << name << ": worst relative error at coordinate " << worst_i
                        << ": analytic " << worst_a << " vs numeric " << worst_n;
}

// |got - want| <= atol + rtol * |want| element-wise; prints the first five mismatches and the
// largest error. NaN in got (an "=" output the kernel did not write) always fails.
inline void expect_close(const std::string& name, const VecF& got, const Vec& want, double atol,
                         double rtol) {
  ASSERT_EQ(got.size(), want.size()) << name;
  std::size_t bad = 0;
  double max_err = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    const bool ok = err <= atol + rtol * std::abs(want[i]);  // false for NaN
    if (!std::isnan(err)) max_err = std::max(max_err, err);
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << name << "[" << i << "]: got " << got[i] << ", want " << want[i]
                    << " (atol " << atol << ", rtol " << rtol << ")";
    }
  }
  EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << got.size()
                     << " mismatches, max |error| " << max_err;
}

// Root mean square of a tensor: the scale for atol.
inline double rms(const Vec& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

// Tolerance of a float reduction of length K against its double twin: rounding errors of a
// sum of K terms grow like sqrt(K) * eps; the factor 4 leaves room for the tail.
inline double reduction_tol(std::int64_t K) {
  return 4.0 * std::sqrt(static_cast<double>(std::max<std::int64_t>(K, 1))) * kFloatEps;
}

inline VecF nan_vec(std::size_t n) { return VecF(n, std::numeric_limits<float>::quiet_NaN()); }

// An fp32 result of reductions of length K against its double twin: reduction_tol(K) relative,
// and as much again times rms(want) absolute.
inline void expect_reduction(const std::string& name, const VecF& got, const Vec& want,
                             std::int64_t K) {
  const double tol = reduction_tol(K);
  expect_close(name, got, want, tol * rms(want), tol);
}

// The bytes of v, for comparisons bit for bit.
template <typename X>
std::vector<std::uint8_t> bytes(const std::vector<X>& v) {
  std::vector<std::uint8_t> b(v.size() * sizeof(X));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Runs `run` (which returns the bytes of every output it has) at 1, 2 and 3 threads and expects
// the same bytes each time.
inline void expect_thread_invariant(
    const std::string& name, const std::function<std::vector<std::vector<std::uint8_t>>()>& run) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run();
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const auto many = run();
    ASSERT_EQ(one.size(), many.size());
    for (std::size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(one[i] == many[i]) << name << ": output " << i << " differs at " << threads
                                     << " threads";
    }
  }
  omp_set_num_threads(saved);
}

// alpha op(A) op(B) in double, (M, Nc) dense, from operands stored with leading dimensions lda
// and ldb (wider than their rows): the GEMM tests' reference, written out loop by loop.
inline Vec naive_gemm(bool ta, bool tb, std::int64_t M, std::int64_t Nc, std::int64_t K,
                      double alpha, const Vec& A, std::int64_t lda, const Vec& Bm,
                      std::int64_t ldb) {
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  Vec out(at(M * Nc));
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < Nc; ++j) {
      double acc = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double a = ta ? A[at(k * lda + i)] : A[at(i * lda + k)];
        const double b = tb ? Bm[at(j * ldb + k)] : Bm[at(k * ldb + j)];
        acc += a * b;
      }
      out[at(i * Nc + j)] = alpha * acc;
    }
  }
  return out;
}

}  // namespace eth::test
