// The GPU-style sets' attention (K::Attention of GpuKernels): one fused, memory-efficient kernel
// pair (kernels/cuda/kernels.h attention_forward / attention_backward), grouped-query with the
// stage's AttentionDims::kv_heads() (qkv rows NH hs + 2 NKV hs wide). Forward keeps only the
// per-row log-sum-exp `lse`, (B,NH,T) fp32, besides its output; backward recomputes P from qkv
// and lse, with a (B,NH,T) fp32 dsum workspace, and draws the dropout mask inside the kernels
// from the same Philox keys as the CPU. So nothing of size T x T is saved: the attention
// operator classes (attn_score, attn_softmax, attn_dropout) hold nothing and recomputing them
// is nothing to do; lse counts as `other` (rebuilt only by the full-unit recompute, which runs
// forward() again).
#pragma once

#include <cstdint>

#include "model/recompute.h"
#include "train/carver.h"
#include "train/kernel_set_concept.h"

namespace eth {

template <class K>
class FusedAttention {
 public:
  using R = typename K::Act;
  using S = typename K::Stat;
  struct Saved {
    S* lse = nullptr;  // (B,NH,T)
  };

  explicit FusedAttention(const AttentionDims& d) : d_(d) {
    static_assert(FusedAttentionKernels<K>,
                  "the kernel set lacks a kernel of its attention type");
  }

  template <class Placer>
  Saved place(Placer& pl) {
    Saved s;
    s.lse = pl.place(rows(d_.Bmax), RecomputeOp::Unit, pl.rc.full_unit(), w_.lse, made_);
    return s;
  }
  template <class CarverT>
  void place_workspace(CarverT& cv) {
    dsum_ = cv.template take<S>(rows(d_.Bmax));
  }

  void forward(const Saved& s, R* out, const R* qkv, const AttentionCall& c) const {
    K::attention_forward(out, s.lse, qkv, drop(c), c.B, d_.T, d_.A, d_.NH, d_.kv_heads());
  }
  // Nothing an operator class names is saved, so nothing to rebuild.
  void recompute(const Saved&, const R*, const RecomputeSet&, const AttentionCall&) const {}
  void backward(const Saved& s, R* dqkv, const R* dout, const R* qkv,
                const AttentionCall& c) const {
    K::attention_backward(dqkv, dsum_, dout, s.lse, qkv, drop(c), c.B, d_.T, d_.A, d_.NH,
                          d_.kv_heads());
  }

 private:
  std::int64_t rows(std::int64_t B) const { return B * d_.NH * d_.T; }
  typename K::AttnDropout drop(const AttentionCall& c) const {
    typename K::AttnDropout d{};
    d.stream = c.stream;
    d.p = d_.p;
    d.sample0 = c.sample0;
    d.head0 = d_.h0;
    return d;
  }

  AttentionDims d_;
  Saved w_;
  bool made_ = false;
  S* dsum_ = nullptr;
};

}  // namespace eth
