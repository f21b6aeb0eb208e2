// Carving a stage's buffers out of its set's arena, and placing its saved tensors: the helpers
// StageCompute and the attention types (attention_unfused.h, attention_fused.h) share, so an
// attention type places what it saves exactly as the stage places its own tensors (held in the
// micro-batch's slot, or dropped to the shared workspace and recomputed) and its bytes land in
// the same ActivationBytes tally.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/rng.h"
#include "model/arithmetic.h"
#include "model/recompute.h"
#include "train/arena.h"

namespace eth {

// Hands out buffers: from the arena, or (arena == nullptr) only counts bytes, for sizing it.
template <class ArenaT>
class Carver {
 public:
  explicit Carver(ArenaT* arena) : arena_(arena) {}
  template <typename T>
  T* take(std::int64_t n) {
    size_.add<T>(n);
    return arena_ ? arena_->template take<T>(n) : nullptr;
  }
  std::size_t bytes() const { return size_.bytes(); }

 private:
  ArenaT* arena_;
  ArenaSize size_;
};

// Places the saved tensors of one unit of one slot. A tensor is either held (taken from the
// arena for this slot) or dropped (pointed at its workspace copy, taken once and shared by all
// units and slots, and recomputed in backward). Slot 0 tallies each tensor's bytes under its
// operator class (RecomputeOp::Unit: `other`, no class), and the held ones in `slot_bytes`.
template <class CarverT>
struct SavedPlacer {
  CarverT& cv;
  bool tally;              // slot 0
  ActivationBytes& bytes;  // the unit's
  double& slot_bytes;      // what one slot holds
  const RecomputeSet& rc;

  // Whether the tensors of class `op` are recomputed (the full-unit recompute drops them all).
  bool dropped(RecomputeOp op) const { return rc.full_unit() || rc.has(op); }

  template <typename T>
  T* place(std::int64_t n, RecomputeOp cls, bool drop, T*& scratch, bool& scratch_made) {
    const double b = static_cast<double>(n) * sizeof(T);
    if (tally) {
      (cls == RecomputeOp::Unit ? bytes.other : bytes.op[static_cast<std::size_t>(cls)]) += b;
    }
    if (drop) {
      if (!scratch_made) {
        scratch = cv.template take<T>(n);
        scratch_made = true;
      }
      return scratch;
    }
    if (tally) slot_bytes += b;
    return cv.template take<T>(n);
  }
};

// What an attention type needs to know of its stage: the local shape and the dropout.
struct AttentionDims {
  std::int64_t Bmax = 1, T = 0;
  std::int64_t A = 0;   // attention columns of this tp rank (NH * head size)
  std::int64_t NH = 0;  // heads of this tp rank
  std::int64_t h0 = 0;  // its first head in the whole model (keys the dropout mask)
  float p = 0;          // attention dropout probability
  // Key/value heads of this tp rank (grouped-query attention: NH / NKV query heads share one);
  // 0 means NH, multi-head attention. Last, so GPT's positional initializers keep their meaning.
  std::int64_t NKV = 0;
  std::int64_t kv_heads() const { return NKV == 0 ? NH : NKV; }
};

// One call's micro-batch: its size and the keys of its attention-dropout mask.
struct AttentionCall {
  std::int64_t B = 0;
  RngStream stream;          // (seed, step, unit, AttnDropout)
  std::int64_t sample0 = 0;  // global index of the micro-batch's first sample
};

}  // namespace eth
