// Naive causal attention with grouped key/value heads, split into its operator classes (scores,
// softmax, dropout in pointwise.h, P x V) so each saved tensor can be dropped and recomputed;
// templated on the scalar so tests run it in double. The obviously-correct twin of
// cpu/attention.h.
//
// NH query heads of hs = C / NH share NKV key/value heads (grouped-query attention): query head
// h reads kv head g = h / G, G = NH / NKV. qkv rows are C + 2 NKV hs wide and grouped per kv
// head: kv head g's group holds its G query heads, then k_g, then v_g (each hs wide), the groups
// one after another, so the columns of kv heads [g0, g1) (with their query heads) are one
// contiguous range: a tensor-parallel shard is a row range of qkv_w. With NKV == NH (G = 1) this
// is multi-head attention in GPT's head-interleaved layout, [q_h; k_h; v_h] per head. The
// attention output (B,T,C) holds query head h at columns [h*hs, (h+1)*hs). Causal: query t sees
// keys t2 <= t. Masked entries (t2 > t) of every (B,NH,T,T) tensor are written as 0, so buffers
// are always defined. NKV = 0 means NH (as AttentionDims::NKV).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace eth::ref {

namespace detail {

// Where query head h and its kv head sit in a row of qkv (the layout above).
struct GqaCols {
  std::int64_t hs, G, ld;
  GqaCols(std::int64_t C, std::int64_t NH, std::int64_t NKV) {
    ETH_CHECK(NH > 0 && C % NH == 0, "attention: C must be a multiple of NH");
    if (NKV == 0) NKV = NH;
    ETH_CHECK(NKV > 0 && NH % NKV == 0, "attention: NKV must divide NH");
    hs = C / NH;
    G = NH / NKV;
    ld = C + 2 * NKV * hs;
  }
  std::int64_t group(std::int64_t h) const { return h / G * (G + 2) * hs; }
  std::int64_t q(std::int64_t h) const { return group(h) + h % G * hs; }
  std::int64_t k(std::int64_t h) const { return group(h) + G * hs; }
  std::int64_t v(std::int64_t h) const { return group(h) + (G + 1) * hs; }
};

}  // namespace detail

// scores[b,h,t,t2] = <q[b,t,h], k[b,t2,h/G]> / sqrt(hs) for t2 <= t, else 0.
//   scores (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
template <typename Real>
void attention_scores_forward(Real* scores, const Real* qkv, std::int64_t B, std::int64_t T,
                              std::int64_t C, std::int64_t NH, std::int64_t NKV = 0) {
  const detail::GqaCols L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        Real* row = scores + ((b * NH + h) * T + t) * T;
        const Real* q = qkv + (b * T + t) * ld + L.q(h);
        for (std::int64_t t2 = 0; t2 < T; ++t2) {
          if (t2 > t) {
            row[t2] = 0;
            continue;
          }
          const Real* k = qkv + (b * T + t2) * ld + L.k(h);
          Real acc = 0;
          for (std::int64_t i = 0; i < hs; ++i) acc += q[i] * k[i];
          row[t2] = acc * scale;
        }
      }
    }
  }
}

// Writes the q and k parts of dqkv (=; a kv head's dk sums over its G query heads); leaves the v
// part alone (attention_av_backward writes it). Masked entries of dscores are ignored.
//   dqkv (B,T,C+2*NKV*hs), dscores (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
template <typename Real>
void attention_scores_backward(Real* dqkv, const Real* dscores, const Real* qkv, std::int64_t B,
                               std::int64_t T, std::int64_t C, std::int64_t NH,
                               std::int64_t NKV = 0) {
  const detail::GqaCols L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  const Real scale = Real(1) / std::sqrt(static_cast<Real>(hs));
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t h = 0; h < NH; h += L.G) {  // a group's q heads and k: (G + 1) hs
        for (std::int64_t c = 0; c < (L.G + 1) * hs; ++c) dqkv[(b * T + t) * ld + L.q(h) + c] = 0;
      }
    }
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t t2 = 0; t2 <= t; ++t2) {
          const Real g = dscores[((b * NH + h) * T + t) * T + t2] * scale;
          const std::int64_t q = (b * T + t) * ld + L.q(h);
          const std::int64_t k = (b * T + t2) * ld + L.k(h);
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

// out[b,t,h] = sum_{t2 <= t} Pd[b,h,t,t2] v[b,t2,h/G]: the (dropped-out) probabilities times V.
//   out (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
template <typename Real>
void attention_av_forward(Real* out, const Real* Pd, const Real* qkv, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH, std::int64_t NKV = 0) {
  const detail::GqaCols L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t h = 0; h < NH; ++h) {
        for (std::int64_t i = 0; i < hs; ++i) {
          Real acc = 0;
          for (std::int64_t t2 = 0; t2 <= t; ++t2) {
            const Real v = qkv[(b * T + t2) * ld + L.v(h) + i];
            acc += Pd[((b * NH + h) * T + t) * T + t2] * v;
          }
          out[(b * T + t) * C + h * hs + i] = acc;
        }
      }
    }
  }
}

// dPd = dout V^T on the causal triangle, 0 above it (=); the v part of dqkv = Pd^T dout (=; a kv
// head's dv sums over its G query heads); the q and k parts of dqkv are left alone
// (attention_scores_backward writes them).
//   dPd (B,NH,T,T), dqkv (B,T,C+2*NKV*hs), dout (B,T,C), Pd (B,NH,T,T), qkv (B,T,C+2*NKV*hs)
template <typename Real>
void attention_av_backward(Real* dPd, Real* dqkv, const Real* dout, const Real* Pd,
                           const Real* qkv, std::int64_t B, std::int64_t T, std::int64_t C,
                           std::int64_t NH, std::int64_t NKV = 0) {
  const detail::GqaCols L(C, NH, NKV);
  const std::int64_t hs = L.hs, ld = L.ld;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < NH; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        for (std::int64_t t2 = 0; t2 < T; ++t2) {
          Real acc = 0;
          if (t2 <= t) {
            for (std::int64_t i = 0; i < hs; ++i) {
              const Real v = qkv[(b * T + t2) * ld + L.v(h) + i];
              acc += dout[(b * T + t) * C + h * hs + i] * v;
            }
          }
          dPd[((b * NH + h) * T + t) * T + t2] = acc;
        }
      }
    }
    for (std::int64_t h0 = 0; h0 < NH; h0 += L.G) {  // one kv head: its query heads [h0, h0+G)
      for (std::int64_t t2 = 0; t2 < T; ++t2) {
        for (std::int64_t i = 0; i < hs; ++i) {
          Real acc = 0;
          for (std::int64_t h = h0; h < h0 + L.G; ++h) {
            for (std::int64_t t = t2; t < T; ++t) {
              acc += Pd[((b * NH + h) * T + t) * T + t2] * dout[(b * T + t) * C + h * hs + i];
            }
          }
          dqkv[(b * T + t2) * ld + L.v(h0) + i] = acc;
        }
      }
    }
  }
}

}  // namespace eth::ref
