// Naive vocabulary-parallel embedding and cross-entropy, templated on the scalar so tests run
// them in double: the obviously-correct twins of cpu/vocab_parallel.h. A tensor-parallel rank
// holds the vocabulary rows [v0, v0 + Vr) of wte and of the LM head (model/arithmetic.h
// tp_rows); these kernels do a rank's part, and the caller's all-reduces over the tp group
// (max, sum) join the parts. Never the full (N,V) logits on one rank. Not the communication.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.h"

namespace eth::ref {

// out[n,:] = wte_rows[tokens[n] - v0,:] where v0 <= tokens[n] < v0 + Vr, else 0 (=). Summed
// over the ranks (one all-reduce) this is wte[tokens[n],:] exactly: one term and zeros.
//   out (N,C), tokens (N) in [0,V), wte_rows (Vr,C)
template <typename Real>
void vocab_embedding_forward(Real* out, const std::int32_t* tokens, const Real* wte_rows,
                             std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C,
                             std::int64_t V) {
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t tok = tokens[n];
    ETH_CHECK(tok >= 0 && tok < V, "vocab_embedding: token id out of range");
    const bool mine = tok >= v0 && tok < v0 + Vr;
    for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = mine ? wte_rows[(tok - v0) * C + c] : 0;
  }
}

// dwte_rows[tokens[n] - v0,:] += dout[n,:] for the tokens in [v0, v0 + Vr) (+=).
//   dwte_rows (Vr,C), dout (N,C), tokens (N)
template <typename Real>
void vocab_embedding_backward(Real* dwte_rows, const Real* dout, const std::int32_t* tokens,
                              std::int64_t v0, std::int64_t Vr, std::int64_t N, std::int64_t C) {
  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t tok = tokens[n];
    if (tok < v0 || tok >= v0 + Vr) continue;
    for (std::int64_t c = 0; c < C; ++c) dwte_rows[(tok - v0) * C + c] += dout[n * C + c];
  }
}

// out[b,t,:] += wpe[t,:] (the position half of the embedding, after the lookup's all-reduce).
//   out (B,T,C), wpe (>=T,C)
template <typename Real>
void position_forward(Real* out, const Real* wpe, std::int64_t B, std::int64_t T, std::int64_t C) {
  for (std::int64_t n = 0; n < B * T; ++n) {
    for (std::int64_t c = 0; c < C; ++c) out[n * C + c] += wpe[(n % T) * C + c];
  }
}

// dwpe[t,:] += dout[b,t,:], samples b in order (+=).
//   dwpe (>=T,C), dout (B,T,C)
template <typename Real>
void position_backward(Real* dwpe, const Real* dout, std::int64_t B, std::int64_t T,
                       std::int64_t C) {
  for (std::int64_t n = 0; n < B * T; ++n) {
    for (std::int64_t c = 0; c < C; ++c) dwpe[(n % T) * C + c] += dout[n * C + c];
  }
}

// The rank's row maxima of its logits (=); -inf for an empty shard. Joined by a max all-reduce.
//   mx (N), logits (N,Vr)
template <typename Real>
void vocab_ce_max(Real* mx, const Real* logits, std::int64_t N, std::int64_t Vr) {
  for (std::int64_t n = 0; n < N; ++n) {
    Real m = -std::numeric_limits<Real>::infinity();
    for (std::int64_t v = 0; v < Vr; ++v) m = logits[n * Vr + v] > m ? logits[n * Vr + v] : m;
    mx[n] = m;
  }
}

// Per token, with mx the global row maxima: stats[n,0] = sum_v exp(logits[n,v] - mx[n]) over
// the rank's columns, stats[n,1] = the target's logit if the rank holds it, else 0 (=). Joined
// by a sum all-reduce (each target's logit comes from exactly one rank).
//   stats (N,2), logits (N,Vr), mx (N), targets (N)
template <typename Real>
void vocab_ce_sums(Real* stats, const Real* logits, const Real* mx, const std::int32_t* targets,
                   std::int64_t v0, std::int64_t N, std::int64_t Vr) {
  for (std::int64_t n = 0; n < N; ++n) {
    Real sum = 0;
    for (std::int64_t v = 0; v < Vr; ++v) sum += std::exp(logits[n * Vr + v] - mx[n]);
    const std::int64_t tgt = targets[n];
    stats[2 * n] = sum;
    stats[2 * n + 1] = tgt >= v0 && tgt < v0 + Vr ? logits[n * Vr + tgt - v0] : Real(0);
  }
}

// From the joined maxima and sums: lse[n] = mx[n] + log(sum), losses[n] = lse[n] - target
// logit, *loss = scale * sum_n losses[n] in double, token order (= on every output).
//   loss (scalar), losses (N), lse (N), mx (N), stats (N,2)
template <typename Real>
void vocab_ce_finish(double* loss, Real* losses, Real* lse, const Real* mx, const Real* stats,
                     double scale, std::int64_t N) {
  double total = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    lse[n] = mx[n] + std::log(stats[2 * n]);
    losses[n] = lse[n] - stats[2 * n + 1];
    total += static_cast<double>(losses[n]);
  }
  *loss = scale * total;
}

// The rank's columns of dlogits = scale * (softmax - onehot(targets)) (=), from the global lse.
//   dlogits (N,Vr), logits (N,Vr), lse (N), targets (N)
template <typename Real>
void vocab_ce_backward(Real* dlogits, const Real* logits, const Real* lse,
                       const std::int32_t* targets, std::int64_t v0, double scale, std::int64_t N,
                       std::int64_t Vr) {
  const Real s = static_cast<Real>(scale);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t v = 0; v < Vr; ++v) {
      const Real p = std::exp(logits[n * Vr + v] - lse[n]);
      dlogits[n * Vr + v] = s * (p - (v0 + v == targets[n] ? Real(1) : Real(0)));
    }
  }
}

}  // namespace eth::ref
