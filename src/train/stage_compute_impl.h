// Forward/backward of a unit range with operator-level recompute and tensor parallelism. Every
// saved tensor is a pointer into either the micro-batch's slot (held until its backward) or the
// shared workspace (recomputed in backward); the kernel sequence is the same either way, which
// is what makes the gradients bitwise identical. Under tp the same sequence runs on the rank's
// shard (local heads, MLP columns, vocabulary rows) with the tp group's all-reduces in between.
// Element types come from K (Act, Param, Grad, Stat, Acc: kernel_set.h), and so do the memory
// every buffer is carved from and touched through (K::zero, K::copy, K::upload, K::Arena) and
// the attention (K::Attention, which owns what it saves). A header of template definitions,
// included by the translation units that instantiate it: stage_compute.cpp (the CPU sets) and
// stage_compute_gpu.cpp (GpuKernels<CudaApi>).
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <type_traits>

#include "core/error.h"
#include "kernels/constants.h"
#include "kernels/rng.h"
#include "train/carver.h"
#include "train/kernel_set_concept.h"
#include "train/stage_compute.h"

namespace eth {

template <class K>
struct StageCompute<K>::Impl {
  using Carve = Carver<typename K::Arena>;
  using Attention = typename K::Attention;
  using R = typename K::Act;    // activations and their gradients
  using P = typename K::Param;  // weights as the kernels read them
  using G = typename K::Grad;   // parameter gradients
  using S = typename K::Stat;   // per-row statistics
  using Acc = typename K::Acc;  // tp partial sums

  struct EmbedActs {
    std::int32_t* tokens = nullptr;  // (N) unit input
    std::uint8_t* mask = nullptr;    // (N,C) embedding dropout, null when p = 0
  };
  struct BlockActs {
    R* x = nullptr;                                              // (N,C) unit input
    R* ln1 = nullptr;                                            // (N,C)
    S *ln1_mean = nullptr, *ln1_rstd = nullptr;                  // (N), (N)
    R* qkv = nullptr;                                            // (N,QKV), rotated (RoPE)
    typename Attention::Saved attn;                              // what K's attention keeps
    R* atty = nullptr;                                           // (N,C)
    std::uint8_t* resid1_mask = nullptr;                         // (N,C), p > 0
    R* x2 = nullptr;                                             // (N,C)
    R* ln2 = nullptr;                                            // (N,C)
    S *ln2_mean = nullptr, *ln2_rstd = nullptr;                  // (N), (N)
    R* fch = nullptr;                                            // (N,F) GELU in / gate
    R* up = nullptr;                                             // (N,F) SwiGLU's up
    R* gelu = nullptr;                                           // (N,F) GELU / SwiGLU out
    std::uint8_t* resid2_mask = nullptr;                         // (N,C), p > 0
  };
  struct HeadActs {
    R* x = nullptr;                                      // (N,C) unit input
    R* lnf = nullptr;                                    // (N,C)
    S *mean = nullptr, *rstd = nullptr;                  // (N), (N)
    R* logits = nullptr;                                 // (N,V), dlogits in backward
    S *lse = nullptr, *losses = nullptr;                 // (N), (N)
  };
  struct UnitActs {
    UnitKind kind = UnitKind::Block;
    EmbedActs e;
    BlockActs b;
    HeadActs h;
  };

  const ModelSpec& m;
  const StageComputeConfig& cfg;
  TpGroup* group;  // null at tp 1
  // Whole: C hidden, V_all vocabulary. This rank's share under tp: NH heads (from head h0), A =
  // NH * head size attention columns, F of the MLP, V vocabulary rows from v0. N = Bmax * T.
  std::int64_t C, A, F, V, V_all, v0, NH, h0, T, Bmax, N;
  bool dropout;
  // The architecture, fixed per stage: RMSNorm (else layer norm), rotary positions (else a
  // learned table), SwiGLU (else GELU). This rank's NKV key/value heads of hd columns each, and
  // QKV = A + 2 * NKV * hd columns of its qkv rows (3A under multi-head attention).
  bool rms, rope, swiglu;
  std::int64_t hd, NKV, QKV;
  float eps, theta;
  // The MLP's output projection: GELU's fcproj, SwiGLU's down.
  int mlp_out_w, mlp_out_b;

  std::vector<std::vector<UnitActs>> slots;  // [slot][unit - first_unit]
  UnitActs scratch;  // recomputed tensors of one unit of each kind (workspace)
  // Workspace: forward transients and backward gradients.
  R *attproj = nullptr, *fcproj = nullptr;
  R* dres[2] = {nullptr, nullptr};
  R *dx2 = nullptr, *dbranch = nullptr, *dF = nullptr, *dln = nullptr, *dqkv = nullptr;
  // SwiGLU: the gradients of gate and up, the two halves of dF (N, 2F); dup first receives the
  // gradient of their product (swiglu_backward reads each dout element before writing it, so
  // dup may be dout).
  R *dgate = nullptr, *dup = nullptr;
  Attention attention;  // its workspace and its dropped tensors' copies
  S *ce_max = nullptr, *ce_stats = nullptr;  // (N), (N,2): vocabulary-parallel loss, tp > 1
  // (N,C): tp > 1 partial sums when Acc is not Act (bf16: fp32 sums, rounded once); otherwise
  // the partial sums are formed in the activation buffer itself.
  Acc* part = nullptr;
  // The io buffer (StageCompute::io_, outside the activation arena the memory model counts):
  // loss[0] the head's loss sum since the last take_loss(), loss[1] where a full-unit recompute
  // of the head puts the loss it recomputes; the targets' device copy when K's memory is not
  // host memory.
  double* loss_io = nullptr;
  std::int32_t* targets_io = nullptr;
  double slot_bytes = 0;
  std::vector<ActivationBytes> bytes;  // per unit, nothing recomputed
  // The unit backward() is in and the gradient buffer: a tensor whose gradient the layout cut
  // into row chunks (g[role] == nullptr, for a tensor the unit has) has each chunk written in
  // place by the *_rows kernels.
  const UnitSlot* grad_slot = nullptr;
  G* grad_base = nullptr;
  std::vector<GradRows<G>> grad_rows;  // scratch for chunks()

  Impl(const ModelSpec& model, const StageComputeConfig& c, TpGroup* g)
      : m(model),
        cfg(c),
        group(c.tp > 1 ? g : nullptr),
        C(model.hidden),
        A(model.hidden / c.tp),
        F(model.ffn / c.tp),
        V(tp_rows(model.vocab, c.tp, c.tp_rank).size()),
        V_all(model.vocab),
        v0(tp_rows(model.vocab, c.tp, c.tp_rank).begin),
        NH(model.heads / c.tp),
        h0(c.tp_rank * model.heads / c.tp),
        T(c.seq_len),
        Bmax(c.max_micro_batch),
        N(c.max_micro_batch * c.seq_len),
        dropout(c.dropout > 0),
        rms(model.norm == NormKind::RmsNorm),
        rope(model.positions == PositionKind::Rope),
        swiglu(model.mlp == MlpKind::Swiglu),
        hd(model.head_dim()),
        NKV(model.num_kv_heads() / c.tp),
        QKV(A + 2 * NKV * hd),
        eps(static_cast<float>(model.norm_eps)),
        theta(static_cast<float>(model.rope_theta)),
        mlp_out_w(swiglu ? kDownW : kFcprojW),
        mlp_out_b(swiglu ? kDownB : kFcprojB),
        attention(AttentionDims{Bmax, T, A, NH, h0, c.dropout, NKV}) {}

  // The tp group's sum over n elements of the accumulation or statistic type (tp > 1 only).
  template <typename T_>
  void tp_sum(T_* x, std::int64_t n) const {
    group->allreduce_sum(std::span<T_>(x, static_cast<std::size_t>(n)));
  }
  // Where the partial sums of a tp collective that ends in activation buffer `act` are formed.
  Acc* partial(R* act) const {
    if constexpr (std::is_same_v<Acc, R>) {
      return act;
    } else {
      return part;
    }
  }
  // The model's norm: layer norm (mean and rstd saved) or RMSNorm (rstd only; mean is null).
  void norm_forward(R* out, S* mean, S* rstd, const R* inp, const P* weight, const P* bias,
                    std::int64_t n) const {
    if (rms) {
      K::rmsnorm_forward(out, rstd, inp, weight, eps, n, C);
    } else {
      K::layernorm_forward(out, mean, rstd, inp, weight, bias, n, C);
    }
  }
  // dinp += and the weight (and bias) gradients +=.
  void norm_backward(R* dinp, G* dweight, G* dbias, const R* dout, const R* inp,
                     const P* weight, const S* mean, const S* rstd, std::int64_t n) const {
    if (rms) {
      K::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, n, C);
    } else {
      K::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, n, C);
    }
  }
  // The bias of a row-parallel product: added once, by tp rank 0, before the all-reduce.
  const P* row_parallel_bias(const P* b) const { return cfg.tp_rank == 0 ? b : nullptr; }
  // out = inp W + bias of a row-parallel product (proj, fcproj): under tp the rank's partial
  // product, summed over the group in Acc and stored once.
  void row_parallel_forward(R* out, const R* inp, const P* weight, const P* bias, std::int64_t n,
                            std::int64_t in) const {
    if (!group) {
      K::matmul_nn_forward(out, inp, weight, bias, n, in, C);
      return;
    }
    Acc* sum = partial(out);
    K::matmul_nn_forward_partial(sum, inp, weight, row_parallel_bias(bias), n, in, C);
    tp_sum(sum, n * C);
    K::store_partial(out, sum, n * C);
  }
  // dinp = dout W (=) and the gradients (+=) of weight wi and bias bi (-1: none) of a
  // column-parallel product (qkv, fc, LM head), whole or in the layout's row chunks: under tp
  // dinp is the rank's partial, summed over the group in Acc and stored once.
  void column_parallel_backward(R* dinp, G* const* g, int wi, int bi, const R* dout, const R* inp,
                                const P* weight, std::int64_t n, std::int64_t out) {
    G* dbias = bi >= 0 ? g[bi] : nullptr;
    if (!group) {
      if (g[wi]) {
        K::matmul_nt_backward(dinp, g[wi], dbias, dout, inp, weight, n, C, out);
      } else {
        K::matmul_nt_backward_rows(dinp, chunks(wi, bi), num_chunks(wi), dout, inp, weight, n, C,
                                   out);
      }
      return;
    }
    Acc* sum = partial(dinp);
    if (g[wi]) {
      K::matmul_nt_backward_partial(sum, g[wi], dbias, dout, inp, weight, n, C, out);
    } else {
      K::matmul_nt_backward_partial_rows(sum, chunks(wi, bi), num_chunks(wi), dout, inp, weight,
                                         n, C, out);
    }
    tp_sum(sum, n * C);
    K::store_partial(dinp, sum, n * C);
  }

  // Places every saved tensor of every slot and unit (held in the slot, or dropped to the
  // workspace under the recompute set: carver.h SavedPlacer), then the workspace.
  void assign(Carve& cv, std::int64_t first, std::int64_t last) {
    const RecomputeSet& rc = cfg.recompute;
    const bool full = rc.full_unit();
    const auto other = RecomputeOp::Unit;  // tally marker for "no operator class"
    // One "made" flag per workspace copy (the pointers themselves are null while sizing).
    struct Made {
      bool tokens, emask, x, ln1, ln1m, ln1r, qkv, atty, r1, x2, ln2, ln2m, ln2r, fch, up, gelu,
          r2, hx, lnf, hm, hr, logits, lse, losses;
    } made{};
    bytes.assign(static_cast<std::size_t>(last - first + 1), ActivationBytes{});
    slots.assign(static_cast<std::size_t>(cfg.num_slots),
                 std::vector<UnitActs>(static_cast<std::size_t>(last - first + 1)));
    for (int s = 0; s < cfg.num_slots; ++s) {
      for (std::int64_t u = first; u <= last; ++u) {
        const std::int64_t i = u - first;
        UnitActs& a = slots[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
        a.kind = unit_kind(m, u);
        auto& sc = scratch;
        SavedPlacer<Carve> pl{cv, s == 0, bytes[static_cast<std::size_t>(i)], slot_bytes, rc};
        if (a.kind == UnitKind::Embedding) {
          a.e.tokens = pl.place(N, other, false, sc.e.tokens, made.tokens);
          if (s == 0) bytes[static_cast<std::size_t>(i)].unit_input = static_cast<double>(N) * 4;
          if (dropout) a.e.mask = pl.place(N * C, other, full, sc.e.mask, made.emask);
        } else if (a.kind == UnitKind::Block) {
          BlockActs& b = a.b;
          BlockActs& w = sc.b;
          b.x = pl.place(N * C, other, false, w.x, made.x);
          if (s == 0) {
            bytes[static_cast<std::size_t>(i)].unit_input = static_cast<double>(N * C) * sizeof(R);
          }
          b.ln1 = pl.place(N * C, other, full, w.ln1, made.ln1);
          if (!rms) b.ln1_mean = pl.place(N, other, full, w.ln1_mean, made.ln1m);
          b.ln1_rstd = pl.place(N, other, full, w.ln1_rstd, made.ln1r);
          b.qkv = pl.place(N * QKV, RecomputeOp::Qkv, pl.dropped(RecomputeOp::Qkv), w.qkv,
                           made.qkv);
          b.attn = attention.place(pl);
          b.atty = pl.place(N * A, other, full, w.atty, made.atty);
          if (dropout) b.resid1_mask = pl.place(N * C, other, full, w.resid1_mask, made.r1);
          b.x2 = pl.place(N * C, other, full, w.x2, made.x2);
          b.ln2 = pl.place(N * C, other, full, w.ln2, made.ln2);
          if (!rms) b.ln2_mean = pl.place(N, other, full, w.ln2_mean, made.ln2m);
          b.ln2_rstd = pl.place(N, other, full, w.ln2_rstd, made.ln2r);
          b.fch = pl.place(N * F, other, full, w.fch, made.fch);
          if (swiglu) b.up = pl.place(N * F, other, full, w.up, made.up);
          b.gelu = pl.place(N * F, RecomputeOp::MlpAct, pl.dropped(RecomputeOp::MlpAct), w.gelu,
                         made.gelu);
          if (dropout) b.resid2_mask = pl.place(N * C, other, full, w.resid2_mask, made.r2);
        } else {
          HeadActs& h = a.h;
          HeadActs& w = sc.h;
          h.x = pl.place(N * C, other, false, w.x, made.hx);
          if (s == 0) {
            bytes[static_cast<std::size_t>(i)].unit_input = static_cast<double>(N * C) * sizeof(R);
          }
          h.lnf = pl.place(N * C, other, full, w.lnf, made.lnf);
          if (!rms) h.mean = pl.place(N, other, full, w.mean, made.hm);
          h.rstd = pl.place(N, other, full, w.rstd, made.hr);
          h.logits = pl.place(N * V, other, full, w.logits, made.logits);
          h.lse = pl.place(N, other, full, w.lse, made.lse);
          h.losses = pl.place(N, other, full, w.losses, made.losses);
        }
      }
    }
    // Workspace of the forward transients and the backward gradients, sized for the largest
    // unit kind in the range.
    bool has_block = false, has_embed = first == 0, has_head = last == m.layers + 1;
    for (std::int64_t u = first; u <= last; ++u) has_block |= unit_kind(m, u) == UnitKind::Block;
    if (has_block) {
      attproj = cv.template take<R>(N * C);
      fcproj = cv.template take<R>(N * C);
      dx2 = cv.template take<R>(N * C);
      dF = cv.template take<R>(N * (swiglu ? 2 * F : F));
      dqkv = cv.template take<R>(N * QKV);
      if (swiglu && dF) {
        dgate = dF;
        dup = dF + N * F;
      }
      attention.place_workspace(cv);
    }
    if (has_head && cfg.tp > 1) {
      ce_max = cv.template take<S>(N);
      ce_stats = cv.template take<S>(2 * N);
    }
    if constexpr (!std::is_same_v<Acc, R>) {
      if (cfg.tp > 1) part = cv.template take<Acc>(N * C);
    }
    if (has_block || (has_embed && dropout)) dbranch = cv.template take<R>(N * C);
    if (has_block || has_head) dln = cv.template take<R>(N * C);
    if (last > first) {
      dres[0] = cv.template take<R>(N * C);
      dres[1] = cv.template take<R>(N * C);
    }
  }

  // The tensor of `role` in the current unit (which has it).
  const TensorSlot& grad_tensor(int role) const {
    const int i = grad_slot->index_of(role);
    ETH_CHECK(i >= 0, "stage: the unit has no tensor of that role");
    return grad_slot->tensors[static_cast<std::size_t>(i)];
  }
  // The gradient chunks of the tensor of role `wr` of the current unit, rows counted from its
  // shard's first; with a bias role br >= 0 the unit has, the bias's chunks too (cut with the
  // weight's rows).
  const GradRows<G>* chunks(int wr, int br) {
    const TensorSlot& t = grad_tensor(wr);
    const int b = br >= 0 ? grad_slot->index_of(br) : -1;
    grad_rows.clear();
    for (std::size_t k = 0; k < t.grad.size(); ++k) {
      const GradChunk& c = t.grad[k];
      G* bias = nullptr;
      if (b >= 0) {
        const GradChunk& cb = grad_slot->tensors[static_cast<std::size_t>(b)].grad.at(k);
        ETH_CHECK(cb.rows == c.rows, "a bias gradient cut apart from its weight's");
        bias = grad_base + cb.offset;
      }
      grad_rows.push_back(GradRows<G>{c.rows.begin - t.rows.begin, c.rows.end - t.rows.begin,
                                      grad_base + c.offset, bias});
    }
    return grad_rows.data();
  }
  std::int64_t num_chunks(int role) const {
    return static_cast<std::int64_t>(grad_tensor(role).grad.size());
  }

  // Weight (wi) and bias (bi) gradients of an "nn" (row-parallel) product, whole or in the
  // layout's row chunks; the bias is never cut.
  void nn_backward(R* dinp, G* const* g, int wi, int bi, const R* dout, const R* inp,
                   const P* weight, std::int64_t n, std::int64_t c, std::int64_t oc) {
    if (g[wi]) {
      K::matmul_nn_backward(dinp, g[wi], g[bi], dout, inp, weight, n, c, oc);
      return;
    }
    const GradRows<G>* rows = chunks(wi, -1);
    K::matmul_nn_backward_rows(dinp, rows, num_chunks(wi), g[bi], dout, inp, weight, n, c, oc);
  }

  // ---- embedding --------------------------------------------------------------------------

  RngStream stream(const MicroBatch& mb, std::int64_t unit, RngOp op) const {
    return RngStream{cfg.seed, mb.step, unit, op};
  }

  void embed_mask(const EmbedActs& a, const MicroBatch& mb, std::int64_t B) const {
    K::dropout_mask_fill(a.mask, stream(mb, 0, RngOp::EmbedDropout), cfg.dropout, mb.first_sample, 0,
                      B, T * C);
  }

  void embed_forward(const EmbedActs& a, const P* const* w, const MicroBatch& mb, R* out) const {
    const std::int64_t B = mb.size;
    ETH_CHECK(mb.tokens != nullptr, "stage forward: unit 0 needs tokens");
    K::upload(a.tokens, mb.tokens, B * T);
    if (group) {
      // Each rank looks up the tokens of its vocabulary rows (zeros elsewhere); the sum over the
      // group is the whole lookup exactly (one row plus zeros), then the positions are added.
      Acc* lookup = partial(out);
      K::vocab_embedding_forward(lookup, a.tokens, w[kWte], v0, V, B * T, C, V_all);
      tp_sum(lookup, B * T * C);
      if (rope) {
        K::store_partial(out, lookup, B * T * C);  // no position table
      } else {
        K::position_forward(out, lookup, w[kWpe], B, T, C);
      }
    } else {  // under RoPE w[kWpe] is null: no position added
      K::encoder_forward(out, a.tokens, w[kWte], w[kWpe], B, T, C, V);
    }
    if (dropout) {
      embed_mask(a, mb, B);
      K::dropout_forward(out, out, a.mask, cfg.dropout, B * T * C);
    }
  }

  void embed_backward(const EmbedActs& a, G* const* g, const MicroBatch& mb, const R* dout) {
    const std::int64_t B = mb.size;
    if (dropout) {
      if (cfg.recompute.full_unit()) embed_mask(a, mb, B);
      K::dropout_backward(dbranch, dout, a.mask, cfg.dropout, B * T * C);
      dout = dbranch;
    }
    if (!g[kWte]) {
      // The layout cut the rank's vocabulary rows into chunks: each takes its tokens' rows.
      for (const GradChunk& c : grad_tensor(kWte).grad) {
        K::vocab_embedding_backward(grad_base + c.offset, dout, a.tokens, c.rows.begin,
                                    c.rows.size(), B * T, C);
      }
      if (!rope) K::position_backward(g[kWpe], dout, B, T, C);
    } else if (group) {
      K::vocab_embedding_backward(g[kWte], dout, a.tokens, v0, V, B * T, C);
      if (!rope) K::position_backward(g[kWpe], dout, B, T, C);
    } else {  // under RoPE there is no table: wpe and its gradient are null
      K::encoder_backward(g[kWte], g[kWpe], dout, a.tokens, B, T, C, V);
    }
  }

  // ---- transformer block ------------------------------------------------------------------

  AttentionCall attention_call(const MicroBatch& mb, std::int64_t unit) const {
    return AttentionCall{mb.size, stream(mb, unit, RngOp::AttnDropout), mb.first_sample};
  }

  void resid_mask(std::uint8_t* mask, const MicroBatch& mb, std::int64_t unit, RngOp op) const {
    K::dropout_mask_fill(mask, stream(mb, unit, op), cfg.dropout, mb.first_sample, 0, mb.size,
                         T * C);
  }

  // qkv = ln1 W_qkv^T + b (column-parallel: the rank's heads), then under RoPE q and k rotated
  // in place, so the saved qkv is the rotated one attention reads.
  void qkv_forward(const BlockActs& a, const P* const* w, std::int64_t B) const {
    K::matmul_nt_forward(a.qkv, a.ln1, w[kQkvW], w[kQkvB], B * T, C, QKV);
    if (rope) K::rope_forward(a.qkv, B, T, NH, NKV, hd, theta);
  }
  // The MLP's inner activation from ln2: GELU(fc) (fch, gelu), or SwiGLU: gate and up
  // (column-parallel) and their product silu(gate) * up (in gelu).
  void mlp_act_forward(const BlockActs& a, std::int64_t n) const {
    if (swiglu) {
      K::swiglu_forward(a.gelu, a.fch, a.up, n, F);
    } else {
      K::gelu_forward(a.gelu, a.fch, n * F);
    }
  }

  // With out == nullptr (full-unit recompute), stops once every tensor backward reads is
  // rebuilt: the MLP's output product, its all-reduce and the residual add are not needed.
  void block_forward(const BlockActs& a, const P* const* w, const MicroBatch& mb, std::int64_t unit,
                     R* out) const {
    const std::int64_t B = mb.size, n = B * T;
    norm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, a.x, w[kLn1W], w[kLn1B], n);
    qkv_forward(a, w, B);
    attention.forward(a.attn, a.atty, a.qkv, attention_call(mb, unit));
    row_parallel_forward(attproj, a.atty, w[kProjW], w[kProjB], n, A);  // the rank's heads
    if (dropout) {
      resid_mask(a.resid1_mask, mb, unit, RngOp::AttnResidDropout);
      K::dropout_forward(attproj, attproj, a.resid1_mask, cfg.dropout, n * C);
    }
    K::residual_forward(a.x2, a.x, attproj, n * C);
    norm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x2, w[kLn2W], w[kLn2B], n);
    if (swiglu) {  // column-parallel
      K::matmul_nt_forward(a.fch, a.ln2, w[kGateW], w[kGateB], n, C, F);
      K::matmul_nt_forward(a.up, a.ln2, w[kUpW], w[kUpB], n, C, F);
    } else {
      K::matmul_nt_forward(a.fch, a.ln2, w[kFcW], w[kFcB], n, C, F);
    }
    mlp_act_forward(a, n);
    if (dropout) resid_mask(a.resid2_mask, mb, unit, RngOp::MlpResidDropout);
    if (out == nullptr) return;
    row_parallel_forward(fcproj, a.gelu, w[mlp_out_w], w[mlp_out_b], n, F);
    if (dropout) K::dropout_forward(fcproj, fcproj, a.resid2_mask, cfg.dropout, n * C);
    K::residual_forward(out, a.x2, fcproj, n * C);
  }

  // Recomputes, in forward order, exactly the tensors the recompute set dropped.
  void block_recompute(const BlockActs& a, const P* const* w, const MicroBatch& mb,
                       std::int64_t unit) const {
    const RecomputeSet& rc = cfg.recompute;
    if (rc.full_unit()) {
      block_forward(a, w, mb, unit, nullptr);
      return;
    }
    // Operator classes rebuild from tensors the rank holds: no communication.
    if (rc.has(RecomputeOp::Qkv)) qkv_forward(a, w, mb.size);
    attention.recompute(a.attn, a.qkv, rc, attention_call(mb, unit));
    if (rc.has(RecomputeOp::MlpAct)) mlp_act_forward(a, mb.size * T);
  }

  // dx (=) from dout; parameter gradients +=. Under tp, dout and dx are whole on every rank;
  // the replicated parameters' gradients (norms, the row-parallel biases) come out the same on
  // every rank of the group.
  void block_backward(const BlockActs& a, const P* const* w, G* const* g, const MicroBatch& mb,
                      std::int64_t unit, const R* dout, R* dx) {
    const std::int64_t n = mb.size * T;
    const float p = cfg.dropout;
    K::zero(dx, n * C);
    K::zero(dx2, n * C);
    // out = x2 + dropout(fcproj(gelu(fc(ln2(x2))))), or with down(silu(gate) * up)
    K::residual_backward(dx2, dbranch, dout, n * C);
    if (dropout) K::dropout_backward(dbranch, dbranch, a.resid2_mask, p, n * C);
    if (swiglu) {
      nn_backward(dup, g, kDownW, kDownB, dbranch, a.gelu, w[kDownW], n, F, C);
      K::swiglu_backward(dgate, dup, dup, a.fch, a.up, n, F);
      // dln = dgate W_gate + dup W_up: each product whole (all-reduced under tp, rounded once,
      // as one process rounds it), then their sum; attproj is free in backward.
      column_parallel_backward(dbranch, g, kGateW, kGateB, dgate, a.ln2, w[kGateW], n, F);
      column_parallel_backward(attproj, g, kUpW, kUpB, dup, a.ln2, w[kUpW], n, F);
      K::residual_forward(dln, dbranch, attproj, n * C);
    } else {
      nn_backward(dF, g, kFcprojW, kFcprojB, dbranch, a.gelu, w[kFcprojW], n, F, C);
      K::gelu_backward(dF, dF, a.fch, n * F);
      column_parallel_backward(dln, g, kFcW, kFcB, dF, a.ln2, w[kFcW], n, F);
    }
    norm_backward(dx2, g[kLn2W], g[kLn2B], dln, a.x2, w[kLn2W], a.ln2_mean, a.ln2_rstd, n);
    // x2 = x + dropout(proj(attention(rope(qkv(ln1(x))))))
    K::residual_backward(dx, dbranch, dx2, n * C);
    if (dropout) K::dropout_backward(dbranch, dbranch, a.resid1_mask, p, n * C);
    R* datty = dln;  // (N, A)
    nn_backward(datty, g, kProjW, kProjB, dbranch, a.atty, w[kProjW], n, A, C);
    attention.backward(a.attn, dqkv, datty, a.qkv, attention_call(mb, unit));
    if (rope) K::rope_backward(dqkv, mb.size, T, NH, NKV, hd, theta);
    column_parallel_backward(dln, g, kQkvW, kQkvB, dqkv, a.ln1, w[kQkvW], n, QKV);
    norm_backward(dx, g[kLn1W], g[kLn1B], dln, a.x, w[kLn1W], a.ln1_mean, a.ln1_rstd, n);
  }

  // ---- head -------------------------------------------------------------------------------

  // The micro-batch's targets where the kernels read them: the caller's (host) array itself
  // when the set's memory is host memory, else a copy in the stage's io buffer.
  const std::int32_t* targets_of(const MicroBatch& mb) const {
    ETH_CHECK(mb.targets != nullptr, "stage: the head needs targets");
    if constexpr (K::host_visible) {
      return mb.targets;
    } else {
      K::upload(targets_io, mb.targets, mb.size * T);
      return targets_io;
    }
  }

  // Adds the micro-batch's scaled loss to *loss (a scalar in the set's memory).
  void head_forward(const HeadActs& a, const P* const* w, const MicroBatch& mb,
                    double* loss) const {
    const std::int64_t n = mb.size * T;
    const std::int32_t* tg = targets_of(mb);
    norm_forward(a.lnf, a.mean, a.rstd, a.x, w[kLnfW], w[kLnfB], n);
    K::matmul_nt_forward(a.logits, a.lnf, w[kLmHeadW], nullptr, n, C, V);  // the rank's columns
    if (!group) {
      K::crossentropy_forward_add(loss, a.losses, a.lse, a.logits, tg, mb.loss_scale, n, V);
      return;
    }
    // Vocabulary-parallel: the row maximum over the group, then the sums of exp and the target
    // logits over the group; every rank ends with the whole lse and loss.
    K::vocab_ce_max(ce_max, a.logits, n, V);
    group->allreduce_max(std::span<S>(ce_max, static_cast<std::size_t>(n)));
    K::vocab_ce_sums(ce_stats, a.logits, ce_max, tg, v0, n, V);
    tp_sum(ce_stats, 2 * n);
    K::vocab_ce_finish_add(loss, a.losses, a.lse, ce_max, ce_stats, mb.loss_scale, n);
  }

  void assign_io(Carve& cv) {
    loss_io = cv.template take<double>(2);
    if constexpr (!K::host_visible) {
      if (cfg.last_unit == m.layers + 1) targets_io = cv.template take<std::int32_t>(N);
    }
  }

  void head_backward(const HeadActs& a, const P* const* w, G* const* g, const MicroBatch& mb,
                     R* dx) {
    const std::int64_t n = mb.size * T;
    // The recomputed loss goes to a scalar nobody reads: it was counted in forward.
    if (cfg.recompute.full_unit()) head_forward(a, w, mb, loss_io + 1);
    const std::int32_t* tg = targets_of(mb);
    R* dlogits = a.logits;  // overwritten in place: backward runs once per forward
    if (group) {
      K::vocab_ce_backward(dlogits, a.logits, a.lse, tg, v0, mb.loss_scale, n, V);
    } else {
      K::crossentropy_backward(dlogits, a.logits, a.lse, tg, mb.loss_scale, n, V);
    }
    column_parallel_backward(dln, g, kLmHeadW, -1, dlogits, a.lnf, w[kLmHeadW], n, V);
    K::zero(dx, n * C);
    norm_backward(dx, g[kLnfW], g[kLnfB], dln, a.x, w[kLnfW], a.mean, a.rstd, n);
  }

  // The acts of slot `s`, unit index i, with dropped tensors pointing into the workspace.
  UnitActs& acts(int s, std::int64_t i) {
    return slots[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
  }
};

template <class K>
StageCompute<K>::StageCompute(const ModelSpec& model, const StageComputeConfig& cfg,
                              TpGroup* tp_group)
    : model_(model),
      cfg_(cfg),
      tp_group_(tp_group),
      layout_(cfg.layout ? *cfg.layout
                         : ParamLayout(model, cfg.first_unit, cfg.last_unit, cfg.tp, cfg.tp_rank)) {
  static_assert(KernelSet<K>, "StageCompute: K is not a kernel set (train/kernel_set_concept.h)");
  ETH_CHECK(layout_.first_unit() == cfg.first_unit && layout_.last_unit() == cfg.last_unit &&
                layout_.tp() == cfg.tp && layout_.tp_rank() == cfg.tp_rank,
            "stage: the layout is not the stage's units and tp rank");
  cfg_.layout = &layout_;  // the caller's may not outlive construction
  ETH_CHECK(cfg.max_micro_batch >= 1 && cfg.num_slots >= 1, "stage: need B >= 1 and a slot");
  ETH_CHECK(cfg.seq_len >= 1 && cfg.seq_len <= model.seq_len,
            "stage: seq_len must be in [1, model seq_len]");
  ETH_CHECK(cfg.dropout >= 0 && cfg.dropout < 1, "stage: dropout must be in [0, 1)");
  ETH_CHECK(model.hidden % model.heads == 0, "stage: heads must divide hidden");
  ETH_CHECK(cfg.tp >= 1 && cfg.tp_rank >= 0 && cfg.tp_rank < cfg.tp && model.tp_splits(cfg.tp) &&
                model.vocab >= cfg.tp,
            "stage: tp must divide heads, key/value heads and ffn (plan validation)");
  ETH_CHECK(model.heads % model.num_kv_heads() == 0, "stage: kv heads must divide heads");
  ETH_CHECK(model.positions != PositionKind::Rope || model.head_dim() % 2 == 0,
            "stage: rotary positions need an even head size");
  // The layer-norm kernels add a bias and use GPT's epsilon (kernels/constants.h).
  ETH_CHECK(model.norm != NormKind::LayerNorm || (model.bias && model.norm_eps == kLayerNormEps),
            "stage: layer norm without biases or with another epsilon than 1e-5 is not built");
  ETH_CHECK(cfg.tp == 1 || (tp_group != nullptr && tp_group->size() == cfg.tp),
            "stage: tp > 1 needs its tp group");
  // Size the arena with a counting pass, then carve it with the same code.
  using Carve = typename Impl::Carve;
  Impl sizing(model_, cfg_, tp_group_);
  Carve counter(nullptr), io_counter(nullptr);
  sizing.assign(counter, cfg.first_unit, cfg.last_unit);
  sizing.assign_io(io_counter);
  arena_ = typename K::Arena(counter.bytes());
  io_ = typename K::Arena(io_counter.bytes());
  impl_ = std::make_unique<Impl>(model_, cfg_, tp_group_);
  Carve carver(&arena_), io_carver(&io_);
  impl_->assign(carver, cfg.first_unit, cfg.last_unit);
  impl_->assign_io(io_carver);
  slot_bytes_ = impl_->slot_bytes;
  bytes_ = impl_->bytes;
}

template <class K>
StageCompute<K>::~StageCompute() = default;

template <class K>
std::size_t StageCompute<K>::planned_arena_bytes(const ModelSpec& model,
                                                 const StageComputeConfig& cfg) {
  Impl sizing(model, cfg, nullptr);
  typename Impl::Carve counter(nullptr);
  sizing.assign(counter, cfg.first_unit, cfg.last_unit);
  return counter.bytes();
}

template <class K>
const ActivationBytes& StageCompute<K>::activation_bytes(std::int64_t u) const {
  ETH_CHECK(u >= cfg_.first_unit && u <= cfg_.last_unit, "activation_bytes: unit not in range");
  return bytes_[static_cast<std::size_t>(u - cfg_.first_unit)];
}

namespace stage_detail {

// Pointers to the tensors of unit `s` in a parameter buffer `base`, by role (model_state.h);
// null for a role the unit lacks (a bias of a model without biases, wpe under RoPE).
template <typename P>
inline std::array<P, kNumTensorRoles> tensor_ptrs(P base, const UnitSlot& s) {
  std::array<P, kNumTensorRoles> out{};
  for (const auto& t : s.tensors) out[static_cast<std::size_t>(t.role)] = base + t.offset;
  return out;
}

// Pointers to the gradients of unit `s` in a gradient buffer `base`, by role; null for a role
// the unit lacks and for a tensor cut into several chunks (StageCompute::Impl::chunks()).
template <typename P>
inline std::array<P, kNumTensorRoles> grad_ptrs(P base, const UnitSlot& s) {
  std::array<P, kNumTensorRoles> out{};
  for (const auto& t : s.tensors) {
    out[static_cast<std::size_t>(t.role)] = t.grad.size() == 1 ? base + t.grad_offset() : nullptr;
  }
  return out;
}

}  // namespace stage_detail

template <class K>
void StageCompute<K>::forward(int slot, const Param* params, const MicroBatch& mb,
                                const Act* x_in, Act* x_out) {
  ETH_CHECK(slot >= 0 && slot < cfg_.num_slots, "stage forward: slot out of range");
  ETH_CHECK(mb.size >= 1 && mb.size <= cfg_.max_micro_batch, "stage forward: bad micro-batch size");
  Impl& im = *impl_;
  const std::int64_t first = cfg_.first_unit, last = cfg_.last_unit;
  const std::int64_t nc = mb.size * cfg_.seq_len * model_.hidden;
  for (std::int64_t u = first; u <= last; ++u) {
    auto& a = im.acts(slot, u - first);
    const auto w = stage_detail::tensor_ptrs(params, layout_.unit(u));
    Act* out = nullptr;
    if (u < last) {
      auto& next = im.acts(slot, u + 1 - first);
      out = next.kind == UnitKind::Head ? next.h.x : next.b.x;
    } else if (a.kind != UnitKind::Head) {
      ETH_CHECK(x_out != nullptr, "stage forward: x_out needed (the range has no head)");
      out = x_out;
    }
    if (u == first && a.kind != UnitKind::Embedding) {
      ETH_CHECK(x_in != nullptr, "stage forward: x_in needed (the range starts after unit 0)");
      K::copy(a.kind == UnitKind::Head ? a.h.x : a.b.x, x_in, nc);
    }
    switch (a.kind) {
      case UnitKind::Embedding:
        im.embed_forward(a.e, w.data(), mb, out);
        break;
      case UnitKind::Block:
        im.block_forward(a.b, w.data(), mb, u, out);
        break;
      case UnitKind::Head:
        im.head_forward(a.h, w.data(), mb, im.loss_io);
        break;
    }
  }
}

template <class K>
double StageCompute<K>::take_loss() {
  double loss = 0;
  K::download(&loss, impl_->loss_io, 1);
  K::zero(impl_->loss_io, 1);
  return loss;
}

template <class K>
void StageCompute<K>::backward(int slot, const Param* params, Grad* grads, const MicroBatch& mb,
                               const Act* dx_out, Act* dx_in,
                               const std::function<void(std::int64_t)>& unit_done) {
  ETH_CHECK(slot >= 0 && slot < cfg_.num_slots, "stage backward: slot out of range");
  ETH_CHECK(mb.size >= 1 && mb.size <= cfg_.max_micro_batch,
            "stage backward: bad micro-batch size");
  Impl& im = *impl_;
  const std::int64_t first = cfg_.first_unit, last = cfg_.last_unit;
  const Act* dout = dx_out;
  for (std::int64_t u = last; u >= first; --u) {
    auto& a = im.acts(slot, u - first);
    const auto w = stage_detail::tensor_ptrs(params, layout_.unit(u));
    const auto g = stage_detail::grad_ptrs(grads, layout_.unit(u));
    im.grad_slot = &layout_.unit(u);
    im.grad_base = grads;
    Act* dx = u == first ? dx_in : im.dres[(last - u) % 2];
    if (a.kind != UnitKind::Embedding) ETH_CHECK(dx != nullptr, "stage backward: dx_in needed");
    if (a.kind != UnitKind::Head) ETH_CHECK(dout != nullptr, "stage backward: dx_out needed");
    switch (a.kind) {
      case UnitKind::Embedding:
        im.embed_backward(a.e, g.data(), mb, dout);
        break;
      case UnitKind::Block:
        if (cfg_.on_recompute) cfg_.on_recompute(u, false);
        im.block_recompute(a.b, w.data(), mb, u);
        if (cfg_.on_recompute) cfg_.on_recompute(u, true);
        im.block_backward(a.b, w.data(), g.data(), mb, u, dout, dx);
        break;
      case UnitKind::Head:
        im.head_backward(a.h, w.data(), g.data(), mb, dx);
        break;
    }
    dout = dx;
    if (unit_done) unit_done(u);
  }
}

}  // namespace eth
