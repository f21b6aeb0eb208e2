// The CPU sets' attention (K::Attention of CpuKernels, CpuBf16Kernels, RefKernels): the unfused
// chain scores -> softmax -> dropout -> P V, which keeps per block and micro-batch the
// probabilities P (class attn_softmax), the dropout mask (attn_dropout) and the dropped-out
// probabilities Pd (attn_score; Pd is P itself without dropout), each (B,NH,T,T) over the NH
// query heads whatever the key/value heads (grouped-query attention: qkv is A + 2 NKV hs wide,
// its layout kernels/reference/attention.h's), and one (B,NH,T,T) workspace for their
// gradients. Each saved tensor is placed through the stage's SavedPlacer, so a recompute set
// that names its class drops it to the workspace and recompute() rebuilds it with the same
// kernels from the same inputs (bitwise the same gradients). One object per stage: it owns the
// workspace and the dropped tensors' copies; Saved is the per-(slot, block) part.
#pragma once

#include <cstdint>

#include "model/recompute.h"
#include "train/carver.h"
#include "train/kernel_set_concept.h"

namespace eth {

template <class K>
class UnfusedAttention {
 public:
  using R = typename K::Act;
  struct Saved {
    R* P = nullptr;                 // (B,NH,T,T) softmax output
    std::uint8_t* mask = nullptr;   // (B,NH,T,T), p > 0
    R* Pd = nullptr;                // (B,NH,T,T) dropped-out P; == P when p = 0
  };

  explicit UnfusedAttention(const AttentionDims& d) : d_(d) {
    static_assert(UnfusedAttentionKernels<K>,
                  "the kernel set lacks a kernel of its attention type");
  }

  // One block's saved tensors for one slot (called for every slot and block, in order).
  template <class Placer>
  Saved place(Placer& pl) {
    const std::int64_t TT = tt(d_.Bmax);
    Saved s;
    s.P = pl.place(TT, RecomputeOp::AttnSoftmax, pl.dropped(RecomputeOp::AttnSoftmax), w_.P,
                   made_.P);
    if (d_.p > 0) {
      s.mask = pl.place(TT, RecomputeOp::AttnDropout, pl.dropped(RecomputeOp::AttnDropout),
                        w_.mask, made_.mask);
      s.Pd = pl.place(TT, RecomputeOp::AttnScore, pl.dropped(RecomputeOp::AttnScore), w_.Pd,
                      made_.Pd);
    } else {
      s.Pd = s.P;
    }
    return s;
  }
  // The gradient workspace, once per stage with blocks.
  template <class CarverT>
  void place_workspace(CarverT& cv) {
    dTT_ = cv.template take<R>(tt(d_.Bmax));
  }

  // out (B,T,A) from qkv (B,T,A + 2 NKV hs); keeps P (and the mask and Pd) in `s`.
  void forward(const Saved& s, R* out, const R* qkv, const AttentionCall& c) const {
    probs(s, qkv, c, true, true, true);
    K::attention_av_forward(out, s.Pd, qkv, c.B, d_.T, d_.A, d_.NH, d_.kv_heads());
  }
  // Rebuilds, in forward order, what an operator-level recompute set dropped (the full-unit
  // recompute runs forward() instead).
  void recompute(const Saved& s, const R* qkv, const RecomputeSet& rc,
                 const AttentionCall& c) const {
    probs(s, qkv, c, rc.has(RecomputeOp::AttnSoftmax), rc.has(RecomputeOp::AttnDropout),
          rc.has(RecomputeOp::AttnScore));
  }
  // dqkv (B,T,A + 2 NKV hs) from dout (B,T,A): all of q, k, v written.
  void backward(const Saved& s, R* dqkv, const R* dout, const R* qkv,
                const AttentionCall& c) const {
    const std::int64_t B = c.B, T = d_.T, NKV = d_.kv_heads();
    K::attention_av_backward(dTT_, dqkv, dout, s.Pd, qkv, B, T, d_.A, d_.NH, NKV);
    if (d_.p > 0) K::dropout_backward(dTT_, dTT_, s.mask, d_.p, tt(B));
    K::attention_softmax_backward(dTT_, dTT_, s.P, B, d_.NH, T);
    K::attention_scores_backward(dqkv, dTT_, qkv, B, T, d_.A, d_.NH, NKV);
  }

 private:
  std::int64_t tt(std::int64_t B) const { return B * d_.NH * d_.T * d_.T; }
  // probabilities (scores and softmax) -> dropout mask -> dropped-out probabilities.
  void probs(const Saved& s, const R* qkv, const AttentionCall& c, bool softmax, bool mask,
             bool drop) const {
    const std::int64_t T = d_.T;
    if (softmax) K::attention_probs_forward(s.P, qkv, c.B, T, d_.A, d_.NH, d_.kv_heads());
    if (d_.p <= 0) return;
    if (mask) {
      // Keyed by global position: this rank's heads are elements [h0*T*T, (h0+NH)*T*T) of each
      // sample's (NH_all,T,T) mask, so any tp draws the mask one process draws.
      K::dropout_mask_fill(s.mask, c.stream, d_.p, c.sample0, d_.h0 * T * T, c.B,
                           d_.NH * T * T);
    }
    if (drop) K::dropout_forward(s.Pd, s.P, s.mask, d_.p, tt(c.B));
  }

  AttentionDims d_;
  Saved w_;  // the workspace copies of dropped tensors
  struct {
    bool P = false, mask = false, Pd = false;
  } made_;
  R* dTT_ = nullptr;
};

}  // namespace eth
