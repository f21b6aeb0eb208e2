// Naive causal multi-head attention, split into its operator classes (scores, softmax, dropout
// in pointwise.h, P x V) so each saved tensor can be dropped and recomputed; templated on the
// scalar so tests run it in double. The obviously-correct twin of cpu/attention.h.
//
// qkv (B,T,3C) is head-interleaved: per token, head h's q, k and v (hs = C / NH wide each) are
// columns h*3hs + [0, hs), [hs, 2hs) and [2hs, 3hs), so the columns of heads [h0, h1) are one
// contiguous range (a tensor-parallel shard is a row range of qkv_w). The attention output
// (B,T,C) holds head h at columns [h*hs, (h+1)*hs). Causal: query t sees keys t2 <= t. Masked
// entries (t2 > t) of every (B,NH,T,T) tensor are written as 0, so buffers are always defined.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace eth::ref {

// scores[b,h,t,t2] = <q[b,t,h], k[b,t2,h]> / sqrt(hs) for t2 <= t, else 0.
//   scores (B,NH,T,T), qkv (B,T,3C)
template <typename Real>
void attention_scores_forward(Real* scores, const Real* qkv, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        Real* row = scores + ((b * NH + h) * T + t) * T;
        const Real* q = qkv + (b * T + t) * 3 * C + h * 3 * hs;
        for (std::int64_t t2 = 0; t2 < T; ++t2) {
          if (t2 > t) {
            row[t2] = 0;
            continue;
          }
          const Real* k = qkv + (b * T + t2) * 3 * C + h * 3 * hs + hs;
          Real acc = 0;
          for (std::int64_t i = 0; i < hs; ++i) acc += q[i] * k[i];
          row[t2] = acc * scale;
        }
      }
    }
  }
}

// Writes the q and k parts of dqkv (=); leaves the v part alone (attention_av_backward writes
// it). Masked entries of dscores are ignored.
//   dqkv (B,T,3C), dscores (B,NH,T,T), qkv (B,T,3C)
template <typename Real>
void attention_scores_backward(Real* dqkv, const Real* dscores, const Real* qkv, std::int64_t B,
                               std::int64_t T, std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  const std::int64_t hs = C / NH;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t h = 0; h < NH; ++h) {
        for (std::int64_t c = 0; c < 2 * hs; ++c) dqkv[(b * T + t) * 3 * C + h * 3 * hs + c] = 0;
      }
    }
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real g = dscores[((b * NH + h) * T + t) * T + t2] * scale;
          const std::int64_t q = (b * T + t) * 3 * C + h * 3 * hs;
          const std::int64_t k = (b * T + t2) * 3 * C + h * 3 * hs + hs;
          for (std::int64_t i = 0; i < hs; ++i) {
            dqkv[q + i] += g * qkv[k + i];
            dqkv[k + i] += g * qkv[q + i];
          }
        }
      }
    }
  }
}

// Row-wise causal softmax: P[.., t, t2] = exp(s[t2] - max) / sum over t2 <= t; 0 for t2 > t.
//   P (B,NH,T,T), scores (B,NH,T,T)
template <typename Real>
void attention_softmax_forward(Real* P, const Real* scores, std::int64_t B, std::int64_t NH,
                               std::int64_t T) {
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    const Real* s = scores + r * T;
    Real* p = P + r * T;
    Real mx = s[0];
    for (std::int64_t t2 = 1; t2 <= t; ++t2) mx = s[t2] > mx ? s[t2] : mx;
    Real sum = 0;
    for (std::int64_t t2 = 0; t2 <= t; ++t2) sum += std::exp(s[t2] - mx);
    for (std::int64_t t2 = 0; t2 < T; ++t2) p[t2] = t2 <= t ? std::exp(s[t2] - mx) / sum : Real(0);
  }
}

// dscores = P * (dP - <dP, P>) per row (=); 0 for t2 > t.
//   dscores (B,NH,T,T), dP (B,NH,T,T), P (B,NH,T,T)
template <typename Real>
void attention_softmax_backward(Real* dscores, const Real* dP, const Real* P, std::int64_t B,
                                std::int64_t NH, std::int64_t T) {
  for (std::int64_t r = 0; r < B * NH * T; ++r) {
    const std::int64_t t = r % T;
    Real dot = 0;
    for (std::int64_t t2 = 0; t2 <= t; ++t2) dot += dP[r * T + t2] * P[r * T + t2];
    for (std::int64_t t2 = 0; t2 < T; ++t2) {
      dscores[r * T + t2] = t2 <= t ? P[r * T + t2] * (dP[r * T + t2] - dot) : Real(0);
    }
  }
}

// out[b,t,h] = sum_{t2 <= t} Pd[b,h,t,t2] v[b,t2,h]: the (dropped-out) probabilities times V.
//   out (B,T,C), Pd (B,NH,T,T), qkv (B,T,3C)
template <typename Real>
void attention_av_forward(Real* out, const Real* Pd, const Real* qkv, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  const std::int64_t hs = C / NH;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t h = 0; h < NH; ++h) {
        for (std::int64_t i = 0; i < hs; ++i) {
          Real acc = 0;
          for (std::int64_t t2 = 0; t2 <= t; ++t2) {
            const Real v = qkv[(b * T + t2) * 3 * C + h * 3 * hs + 2 * hs + i];
            acc += Pd[((b * NH + h) * T + t) * T + t2] * v;
          }
          out[(b * T + t) * C + h * hs + i] = acc;
        }
      }
    }
  }
}

// dPd = dout V^T on the causal triangle, 0 above it (=); the v part of dqkv = Pd^T dout (=);
// the q and k parts of dqkv are left alone (attention_scores_backward writes them).
//   dPd (B,NH,T,T), dqkv (B,T,3C), dout (B,T,C), Pd (B,NH,T,T), qkv (B,T,3C)
template <typename Real>
void attention_av_backward(Real* dPd, Real* dqkv, const Real* dout, const Real* Pd,
                           const Real* qkv, std::int64_t B, std::int64_t T, std::int64_t C,
                           std::int64_t NH) {
  ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
  const std::int64_t hs = C / NH;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t t2 = 0; t2 < T; ++t2) {
          Real acc = 0;
          if (t2 <= t) {
            for (std::int64_t i = 0; i < hs; ++i) {
              const Real v = qkv[(b * T + t2) * 3 * C + h * 3 * hs + 2 * hs + i];
              acc += dout[(b * T + t) * C + h * hs + i] * v;
            }
          }
          dPd[((b * NH + h) * T + t) * T + t2] = acc;
        }
      }
      for (std::int64_t t2 = 0; t2 < T; ++t2) {
        for (std::int64_t i = 0; i < hs; ++i) {
          Real acc = 0;
          for (std::int64_t t = t2; t < T; ++t) {
            acc += Pd[((b * NH + h) * T + t) * T + t2] * dout[(b * T + t) * C + h * hs + i];
          }
          dqkv[(b * T + t2) * 3 * C + h * 3 * hs + 2 * hs + i] = acc;
        }
      }
    }
  }
}

}  // namespace eth::ref
