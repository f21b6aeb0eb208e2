// Model state of a unit range on one tensor-parallel rank: the parameter layout (one contiguous
// span per unit, tensors back to back in model/arithmetic.h's unit_tensors order, so a range of
// units is one contiguous range, the address consistency block-wise gradient reduction needs;
// a sharded tensor holds the rank's rows, tp_rows), the four flat fp32 buffers (parameters,
// gradients, AdamW m and v) taken from one pre-faulted arena, in bf16 precision also the bf16
// compute copy of the parameters that the kernels read (the fp32 parameters are then the master
// weights), and parameter initialization keyed only by (seed, unit, tensor, element), so a shard
// holds exactly the rows of the whole tensor. Not the optimizer (optimizer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/precision.h"
#include "kernels/bf16.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "train/arena.h"

namespace eth {

// Tensor indices within a unit, in unit_tensors order (ParamLayout checks the names agree).
enum EmbedTensor : int { kWte, kWpe };
// clang-format off
enum BlockTensor : int {
  kLn1W, kLn1B, kQkvW, kQkvB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kFcprojW, kFcprojB
};
// clang-format on
enum HeadTensor : int { kLnfW, kLnfB, kLmHeadW };

struct TensorSlot {
  TensorDesc desc;          // what this rank holds: shape[0] is its row count when sharded
  std::int64_t offset = 0;  // elements from the start of the unit
  bool decay = false;       // AdamW weight decay: matrices only (2-D tensors)
  RowRange rows;            // rows of the whole tensor held here (all of them unless sharded)
  std::int64_t full_rows = 0;  // rows of the whole tensor (unit_tensors' shape[0])

  std::int64_t row_size() const;  // elements per row (1 for vectors)
  std::vector<std::int64_t> full_shape() const;  // the whole tensor's shape
  bool is_shard() const { return rows.size() != full_rows; }
};

struct UnitSlot {
  std::int64_t unit = 0;
  UnitKind kind = UnitKind::Block;
  std::int64_t offset = 0;  // elements from the start of the range buffer
  std::int64_t numel = 0;
  std::vector<TensorSlot> tensors;
};

// Units [first_unit, last_unit] (inclusive, as in a plan's stage) as tp rank `tp_rank` of `tp`
// holds them: sharded tensors (TpSplit::Sharded) cut to rows tp_rows(rows, tp, tp_rank).
class ParamLayout {
 public:
  ParamLayout(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
              std::int64_t tp = 1, std::int64_t tp_rank = 0);

  std::int64_t first_unit() const { return first_unit_; }
  std::int64_t last_unit() const { return last_unit_; }
  std::int64_t tp() const { return tp_; }
  std::int64_t tp_rank() const { return tp_rank_; }
  std::int64_t numel() const { return numel_; }
  const std::vector<UnitSlot>& units() const { return units_; }
  const UnitSlot& unit(std::int64_t u) const;  // ETH_CHECKs u is in the range
  // Element offset of tensor `t` of unit `u` in the range buffer.
  std::int64_t offset(std::int64_t u, int t) const;

 private:
  std::int64_t first_unit_ = 0, last_unit_ = 0, numel_ = 0, tp_ = 1, tp_rank_ = 0;
  std::vector<UnitSlot> units_;
};

class ModelState {
 public:
  // `precision` Bf16 adds the bf16 compute copy (precision_bytes: 2 + 4 + 12 bytes per
  // parameter instead of fp32's 4 + 4 + 8); Mixed16 is not a runtime precision (ETH_CHECK).
  ModelState(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
             std::int64_t tp = 1, std::int64_t tp_rank = 0, Precision precision = Precision::Fp32);

  const ModelSpec& model() const { return model_; }
  const ParamLayout& layout() const { return layout_; }
  Precision precision() const { return precision_; }
  std::int64_t numel() const { return layout_.numel(); }
  // Flat buffers of numel() floats each: the parameters (in bf16 precision the fp32 master
  // weights), their gradients, the AdamW moments.
  float* params() { return params_; }
  const float* params() const { return params_; }
  float* grads() { return grads_; }
  const float* grads() const { return grads_; }
  float* adam_m() { return adam_m_; }
  const float* adam_m() const { return adam_m_; }
  float* adam_v() { return adam_v_; }
  const float* adam_v() const { return adam_v_; }
  // The bf16 compute copy, numel() elements: round-to-nearest of params(), what
  // StageCompute<CpuBf16Kernels> reads. Null in fp32 precision. The optimizer rewrites it in its
  // pass (bf16::adamw_update); whoever else writes params() calls refresh_compute_copy().
  Bf16* params_bf16() { return params_bf16_; }
  const Bf16* params_bf16() const { return params_bf16_; }
  // Rounds params() into the compute copy (no-op in fp32): after init and checkpoint loads.
  void refresh_compute_copy();
  // Bytes of the four (fp32) or five (bf16) state buffers, as allocated.
  std::size_t state_bytes() const { return arena_.capacity(); }
  // The same by role, as the memory model counts them (core/precision.h): the weights the
  // kernels read (fp32 params, or the bf16 copy), the gradients, and the optimizer state (the
  // moments, and in bf16 the fp32 masters).
  struct RoleBytes {
    double weights = 0, gradients = 0, optimizer_state = 0;
  };
  RoleBytes role_bytes() const;

  void zero_grads();
  // GPT-2 initialization, each element a pure function of (seed, unit, tensor index, element of
  // the whole tensor), so every tp shard holds exactly its rows of the whole: matrices
  // and embeddings N(0, 0.02^2), the residual projections (proj_w, fcproj_w) N(0, (0.02 /
  // sqrt(2 L))^2), layer-norm weights 1, biases 0. Optimizer state is zeroed; the compute copy
  // is refreshed.
  void init(std::uint64_t seed);

 private:
  ModelSpec model_;
  ParamLayout layout_;
  Precision precision_ = Precision::Fp32;
  Arena arena_;
  Bf16* params_bf16_ = nullptr;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* adam_m_ = nullptr;
  float* adam_v_ = nullptr;
};

// Initializes one unit's parameters (the span at `unit_params`, UnitSlot::numel floats; the
// slot's rows of each sharded tensor).
void init_unit_params(float* unit_params, const ModelSpec& model, const UnitSlot& slot,
                      std::uint64_t seed);

}  // namespace eth
