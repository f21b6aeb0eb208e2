// Model state of a unit range on one tensor-parallel rank: the layout (where each tensor's
// parameters and gradient rows live; a sharded tensor holds the rank's rows, tp_rows), the four
// flat fp32 buffers (parameters, gradients, AdamW m and v) taken from one pre-faulted arena, in
// bf16 precision also the bf16 compute copy of the parameters that the kernels read (the fp32
// parameters are then the master weights; gradients stay fp32 and placed), and parameter
// initialization keyed only by (seed, unit, tensor, element), so a shard holds exactly
// the rows of the whole tensor. Not the optimizer (optimizer.h).
//
// Two layouts. The unit-major one (single-process training, measurement): units in order,
// tensors back to back in model/arithmetic.h's unit_tensors order, gradients at the parameters'
// offsets. A placed one (the distributed runtime, runtime/grad_layout.h): the gradient buffer
// is laid out so every gradient block is one contiguous range in the same element order on all
// its holders (DESIGN.md section 5, address consistency), which can cut a tensor's gradient into
// several row chunks at different places (GradChunk); parameters, m and v keep each tensor's
// shard contiguous, in the order the gradients first place them, so where no tensor is cut
// (the common case) parameters and gradients share offsets and the optimizer passes over both
// buffers in a few long runs (StateRun).
// The buffers live in a kernel set's memory (state_backend.h): host memory by default (the CPU
// set of the precision), device memory for a GPU set; every touch of them (zeroing, the
// compute-copy refresh, initialization, the optimizer) goes through that backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/precision.h"
#include "kernels/bf16.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "train/arena.h"

namespace eth {

// Tensor roles within a unit: for GPT models each role is the tensor's index in unit_tensors
// order (ParamLayout checks the names agree), so GPT code may index a unit's tensors by them.
// Other architectures lack some roles (no biases, no position table under RoPE) and have the
// SwiGLU MLP's; StageCompute addresses every model's tensors by role (TensorSlot::role,
// UnitSlot::index_of).
enum EmbedTensor : int { kWte, kWpe };
// clang-format off
enum BlockTensor : int {
  kLn1W, kLn1B, kQkvW, kQkvB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kFcprojW, kFcprojB,
  // SwiGLU MLP (Llama family): down(silu(gate x) * up x)
  kGateW, kGateB, kUpW, kUpB, kDownW, kDownB
};
// clang-format on
enum HeadTensor : int { kLnfW, kLnfB, kLmHeadW };
inline constexpr int kNumTensorRoles = kDownB + 1;
// The role of tensor `name` in a unit of kind `k`; -1 when that kind has no such tensor.
int tensor_role(UnitKind k, const std::string& name);

// Rows [rows.begin, rows.end) of a tensor's gradient, stored contiguously from `offset` of the
// gradient buffer.
struct GradChunk {
  RowRange rows;            // rows of the whole tensor
  std::int64_t offset = 0;  // element offset of the first row in the gradient buffer
};

struct TensorSlot {
  TensorDesc desc;          // what this rank holds: shape[0] is its row count when sharded
  int role = 0;             // tensor_role(kind, desc.name)
  std::int64_t offset = 0;  // element offset in the parameter buffer (and in Adam m and v)
  bool decay = false;       // AdamW weight decay: matrices only (2-D tensors)
  RowRange rows;            // rows of the whole tensor held here (all of them unless sharded)
  std::int64_t full_rows = 0;  // rows of the whole tensor (unit_tensors' shape[0])
  // Where the gradient's rows live: ascending, together exactly `rows`. One chunk unless a
  // placed layout cut the tensor (a rank of tp t in a segment of lcm(tp) n > t).
  std::vector<GradChunk> grad;

  std::int64_t row_size() const;  // elements per row (1 for vectors)
  std::vector<std::int64_t> full_shape() const;  // the whole tensor's shape
  bool is_shard() const { return rows.size() != full_rows; }
  // The gradient's offset when it is one chunk (ETH_CHECKs that it is).
  std::int64_t grad_offset() const;
};

struct UnitSlot {
  std::int64_t unit = 0;
  UnitKind kind = UnitKind::Block;
  std::int64_t numel = 0;  // elements this rank holds of the unit
  std::vector<TensorSlot> tensors;
  // Index in `tensors` of the tensor of `role`; -1 when the unit has none (e.g. no biases).
  int index_of(int role) const;
};

// An input of a placed layout: rows `rows` (of the whole tensor) of tensor `tensor` (index into
// unit_tensors) of unit `unit` go to the gradient buffer from `offset`, row-major.
struct GradPlacement {
  std::int64_t unit = 0, tensor = 0;
  RowRange rows;
  std::int64_t offset = 0;
};

// A run of the optimizer's element-wise passes: `count` elements contiguous in the parameter
// buffer (and m, v) from param_offset and in the gradient buffer from grad_offset, one decay.
struct StateRun {
  std::int64_t param_offset = 0, grad_offset = 0, count = 0;
  bool decay = false;
};

// Units [first_unit, last_unit] (inclusive, as in a plan's stage) as tp rank `tp_rank` of `tp`
// holds them: sharded tensors (TpSplit::Sharded) cut to rows tp_rows(rows, tp, tp_rank). A tied
// model's layout holding unit 0 and the head gives lm_head_w wte's gradient chunks (model/tied.h):
// the two backward passes add into one gradient, both copies step from it and stay equal; the
// head's own gradient room stays allocated, unused, as the memory model charges it.
class ParamLayout {
 public:
  // Unit-major: units in order, tensors back to back, gradients at the parameters' offsets.
  ParamLayout(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
              std::int64_t tp = 1, std::int64_t tp_rank = 0);
  // Placed: gradients where `grads` puts them, in a buffer of `grad_numel` elements (gaps stay
  // unused); parameters with each tensor's shard contiguous, tensors in the order of their
  // first gradient placement. ETH_CHECKs that the placements cover every held row of every
  // tensor exactly once and do not overlap.
  ParamLayout(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
              std::int64_t tp, std::int64_t tp_rank, std::vector<GradPlacement> grads,
              std::int64_t grad_numel);

  std::int64_t first_unit() const { return first_unit_; }
  std::int64_t last_unit() const { return last_unit_; }
  std::int64_t tp() const { return tp_; }
  std::int64_t tp_rank() const { return tp_rank_; }
  std::int64_t numel() const { return numel_; }            // parameters (and m, v)
  std::int64_t grad_numel() const { return grad_numel_; }  // gradient buffer, >= numel()
  const std::vector<UnitSlot>& units() const { return units_; }
  const UnitSlot& unit(std::int64_t u) const;  // ETH_CHECKs u is in the range
  // Parameter-buffer offset of tensor `t` of unit `u`.
  std::int64_t offset(std::int64_t u, int t) const;
  // Every held element once, in gradient-buffer order, in maximal runs.
  const std::vector<StateRun>& runs() const { return runs_; }

 private:
  void add_units(const ModelSpec& model);  // units_ with shapes and rows, no offsets
  void finish_runs();

  std::int64_t first_unit_ = 0, last_unit_ = 0, numel_ = 0, grad_numel_ = 0, tp_ = 1,
               tp_rank_ = 0;
  std::vector<UnitSlot> units_;
  std::vector<StateRun> runs_;
};

class StateBackend;  // state_backend.h
// Makes the backend (the set's arena of `bytes` and its operations) of a state of `precision`.
using MakeStateBackend = std::unique_ptr<StateBackend> (*)(Precision precision, std::size_t bytes);

// A state whose optimizer state is sharded (runtime/sharded_optimizer.h): the Adam moments, and in
// bf16 the fp32 master weights, hold only `numel` elements (the rank's shards of its gradient
// blocks, back to back); the weights the kernels read and the gradients stay whole.
struct OptimizerShard {
  std::int64_t numel = 0;
};

class ModelState {
 public:
  // `precision` Bf16 adds the bf16 compute copy (precision_bytes: 2 + 4 + 12 bytes per
  // parameter instead of fp32's 4 + 4 + 8); Mixed16 is not a runtime precision (ETH_CHECK).
  // `make_backend` picks the kernel set the buffers live on; null: the CPU's
  // (make_cpu_state_backend).
  ModelState(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
             std::int64_t tp = 1, std::int64_t tp_rank = 0, Precision precision = Precision::Fp32,
             MakeStateBackend make_backend = nullptr);
  ModelState(const ModelSpec& model, ParamLayout layout, Precision precision = Precision::Fp32,
             MakeStateBackend make_backend = nullptr);
  // Sharded: adam_m() and adam_v() hold shard.numel elements; in bf16 so does params() (the
  // shard's masters; the whole weights are the compute copy), in fp32 params() stays whole (the
  // compute weights, the shard's masters among them). init() and refresh_compute_copy() are the
  // sharded optimizer's to do then (ETH_CHECK).
  ModelState(const ModelSpec& model, ParamLayout layout, Precision precision, OptimizerShard shard,
             MakeStateBackend make_backend = nullptr);
  ~ModelState();
  ModelState(ModelState&&) noexcept;
  ModelState& operator=(ModelState&&) noexcept;

  const ModelSpec& model() const { return model_; }
  const ParamLayout& layout() const { return layout_; }
  Precision precision() const { return precision_; }
  std::int64_t numel() const { return layout_.numel(); }
  bool sharded() const { return sharded_; }
  // Elements of the Adam moments (numel() unless sharded).
  std::int64_t optimizer_numel() const { return optimizer_numel_; }
  // Flat buffers of numel() floats each (the gradients' has layout().grad_numel()): the
  // parameters (in bf16 precision the fp32 master weights), their gradients, the AdamW moments.
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
  std::size_t state_bytes() const;
  // The kernel set's memory and optimizer entries the buffers live on.
  StateBackend& backend() const { return *backend_; }
  // The same by role, as the memory model counts them (core/precision.h): the weights the
  // kernels read (fp32 params, or the bf16 copy), the gradients, and the optimizer state (the
  // moments, and in bf16 the fp32 masters).
  struct RoleBytes {
    double weights = 0, gradients = 0, optimizer_state = 0;
  };
  RoleBytes role_bytes() const;

  void zero_grads();  // the whole gradient buffer, gaps included
  // GPT-2 initialization, each element a pure function of (seed, unit, tensor index, element of
  // the whole tensor), so every tp shard holds exactly its rows of the whole: matrices
  // and embeddings N(0, 0.02^2), GPT's residual projections (proj_w, fcproj_w) N(0, (0.02 /
  // sqrt(2 L))^2) (the Llama family's, SwiGLU models', all at 0.02), norm weights (layer norm
  // and RMSNorm) 1, biases 0; a tied head's lm_head_w draws wte's stream (unit 0, tensor 0), so
  // it starts equal to it. Optimizer state is zeroed; the compute copy is refreshed.
  void init(std::uint64_t seed);

 private:
  ModelSpec model_;
  ParamLayout layout_;
  Precision precision_ = Precision::Fp32;
  bool sharded_ = false;
  std::int64_t optimizer_numel_ = 0;
  std::unique_ptr<StateBackend> backend_;
  Bf16* params_bf16_ = nullptr;
  float* params_ = nullptr;
  float* grads_ = nullptr;
  float* adam_m_ = nullptr;
  float* adam_v_ = nullptr;
};

// Initializes one unit's parameters in a parameter buffer `params` laid out by the slot's
// tensor offsets (the slot's rows of each sharded tensor).
void init_unit_params(float* params, const ModelSpec& model, const UnitSlot& slot,
                      std::uint64_t seed);

}  // namespace eth
