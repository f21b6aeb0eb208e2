// Naive matrix products with bias, templated on the scalar so tests run them in double. The
// obviously-correct twins of cpu/matmul.h; never used for training.
#pragma once

#include <cstdint>

#include "kernels/grad_rows.h"

namespace eth::ref {

// "nt": weight stored (OC, C) (qkv_w, fc_w, lm_head_w). out = inp W^T + bias.
//   out (N,OC), inp (N,C), weight (OC,C), bias (OC) or nullptr
template <typename Real>
void matmul_nt_forward(Real* out, const Real* inp, const Real* weight, const Real* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t o = 0; o < OC; ++o) {
      Real acc = bias ? bias[o] : Real(0);
      for (std::int64_t c = 0; c < C; ++c) acc += inp[n * C + c] * weight[o * C + c];
      out[n * OC + o] = acc;
    }
  }
}

// matmul_nt_backward with the weight (and bias) gradient in row chunks: dinp = dout W (=); for
// each chunk, its rows [b, e) of dweight += dout[:, b:e]^T inp and of dbias += column sums.
//   dinp (N,C), rows[i].dweight (e-b,C), rows[i].dbias (e-b) or nullptr, dout (N,OC),
//   inp (N,C), weight (OC,C)
template <typename Real>
void matmul_nt_backward_rows(Real* dinp, const GradRows<Real>* rows, std::int64_t num_rows,
                             const Real* dout, const Real* inp, const Real* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c) {
      Real acc = 0;
      for (std::int64_t o = 0; o < OC; ++o) acc += dout[n * OC + o] * weight[o * C + c];
      dinp[n * C + c] = acc;
    }
  }
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<Real>& r = rows[i];
    for (std::int64_t o = r.begin; o < r.end; ++o) {
      for (std::int64_t c = 0; c < C; ++c) {
        Real acc = 0;
        for (std::int64_t n = 0; n < N; ++n) acc += dout[n * OC + o] * inp[n * C + c];
        r.dweight[(o - r.begin) * C + c] += acc;
      }
      if (r.dbias) {
        Real acc = 0;
        for (std::int64_t n = 0; n < N; ++n) acc += dout[n * OC + o];
        r.dbias[o - r.begin] += acc;
      }
    }
  }
}

// dinp = dout W (=); dweight += dout^T inp; dbias += column sums of dout (if dbias).
//   dinp (N,C), dweight (OC,C), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (OC,C)
template <typename Real>
void matmul_nt_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, std::int64_t N, std::int64_t C, std::int64_t OC) {
  const GradRows<Real> all{0, OC, dweight, dbias};
  matmul_nt_backward_rows(dinp, &all, 1, dout, inp, weight, N, C, OC);
}

// "nn": weight stored (C, OC), i.e. transposed (proj_w, fcproj_w: the row-parallel matmuls,
// so a tp shard is a contiguous range of rows). out = inp W + bias.
//   out (N,OC), inp (N,C), weight (C,OC), bias (OC) or nullptr
template <typename Real>
void matmul_nn_forward(Real* out, const Real* inp, const Real* weight, const Real* bias,
                       std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t o = 0; o < OC; ++o) {
      Real acc = bias ? bias[o] : Real(0);
      for (std::int64_t c = 0; c < C; ++c) acc += inp[n * C + c] * weight[c * OC + o];
      out[n * OC + o] = acc;
    }
  }
}

// matmul_nn_backward with the weight gradient in row chunks (rows are input channels; the bias
// is not cut, rows[i].dbias must be null): dinp = dout W^T (=); for each chunk, its rows [b, e)
// of dweight += inp[:, b:e]^T dout; dbias += column sums of dout (if dbias).
//   dinp (N,C), rows[i].dweight (e-b,OC), dbias (OC) or nullptr, dout (N,OC), inp (N,C),
//   weight (C,OC)
template <typename Real>
void matmul_nn_backward_rows(Real* dinp, const GradRows<Real>* rows, std::int64_t num_rows,
                             Real* dbias, const Real* dout, const Real* inp, const Real* weight,
                             std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c) {
      Real acc = 0;
      for (std::int64_t o = 0; o < OC; ++o) acc += dout[n * OC + o] * weight[c * OC + o];
      dinp[n * C + c] = acc;
    }
  }
  for (std::int64_t i = 0; i < num_rows; ++i) {
    const GradRows<Real>& r = rows[i];
    for (std::int64_t c = r.begin; c < r.end; ++c) {
      for (std::int64_t o = 0; o < OC; ++o) {
        Real acc = 0;
        for (std::int64_t n = 0; n < N; ++n) acc += inp[n * C + c] * dout[n * OC + o];
        r.dweight[(c - r.begin) * OC + o] += acc;
      }
    }
  }
  if (dbias) {
    for (std::int64_t o = 0; o < OC; ++o) {
      Real acc = 0;
      for (std::int64_t n = 0; n < N; ++n) acc += dout[n * OC + o];
      dbias[o] += acc;
    }
  }
}

// dinp = dout W^T (=); dweight += inp^T dout; dbias += column sums of dout (if dbias).
//   dinp (N,C), dweight (C,OC), dbias (OC) or nullptr, dout (N,OC), inp (N,C), weight (C,OC)
template <typename Real>
void matmul_nn_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, std::int64_t N, std::int64_t C, std::int64_t OC) {
  const GradRows<Real> all{0, C, dweight, nullptr};
  matmul_nn_backward_rows(dinp, &all, 1, dbias, dout, inp, weight, N, C, OC);
}

}  // namespace eth::ref
