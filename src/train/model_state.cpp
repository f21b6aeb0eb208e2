// Parameter layout, the arena-backed state buffers, and keyed GPT-2 initialization.
#include "train/model_state.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "kernels/rng.h"
#include "model/tied.h"
#include "train/kernel_set.h"
#include "train/kernel_set_bf16.h"
#include "train/state_backend.h"

namespace eth {

namespace {

// The tensor names the role enums in model_state.h stand for, per unit kind, in role order.
const std::vector<std::string>& role_names(UnitKind k) {
  static const std::vector<std::string> embed = {"wte", "wpe"};
  static const std::vector<std::string> block = {
      "ln1_w", "ln1_b",  "qkv_w",  "qkv_b", "proj_w", "proj_b", "ln2_w",  "ln2_b", "fc_w",
      "fc_b",  "fcproj_w", "fcproj_b", "gate_w", "gate_b", "up_w", "up_b", "down_w", "down_b"};
  static const std::vector<std::string> head = {"lnf_w", "lnf_b", "lm_head_w"};
  return k == UnitKind::Embedding ? embed : k == UnitKind::Block ? block : head;
}

// Of a tied model whose units are all in `units`: the embedding's wte and the head's lm_head_w,
// the two copies of one matrix; nulls otherwise.
std::pair<TensorSlot*, TensorSlot*> tied_copies(const ModelSpec& model,
                                                std::vector<UnitSlot>& units) {
  if (!model.tied_embeddings || units.empty() || units.front().unit != 0 ||
      units.back().unit != model.num_units() - 1) {
    return {nullptr, nullptr};
  }
  auto find = [&](UnitSlot& s) -> TensorSlot* {
    for (TensorSlot& t : s.tensors) {
      if (is_tied_tensor(model, s.unit, t.desc.name)) return &t;
    }
    ETH_CHECK(false, "a tied model's unit without its embedding matrix");
    return nullptr;
  };
  std::pair<TensorSlot*, TensorSlot*> out{find(units.front()), find(units.back())};
  ETH_CHECK(out.first->rows == out.second->rows, "the tied copies hold different rows");
  return out;
}

}  // namespace

int tensor_role(UnitKind k, const std::string& name) {
  const auto& names = role_names(k);
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

int UnitSlot::index_of(int role) const {
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == role) return static_cast<int>(i);
  }
  return -1;
}

std::int64_t TensorSlot::row_size() const {
  std::int64_t n = 1;
  for (std::size_t d = 1; d < desc.shape.size(); ++d) n *= desc.shape[d];
  return n;
}

std::vector<std::int64_t> TensorSlot::full_shape() const {
  std::vector<std::int64_t> s = desc.shape;
  s.front() = full_rows;
  return s;
}

std::int64_t TensorSlot::grad_offset() const {
  ETH_CHECK(grad.size() == 1, "the gradient of " + desc.name + " is cut into chunks");
  return grad.front().offset;
}

void ParamLayout::add_units(const ModelSpec& model) {
  ETH_CHECK(first_unit_ >= 0 && first_unit_ <= last_unit_ && last_unit_ < model.num_units(),
            "ParamLayout: unit range out of the model");
  ETH_CHECK(tp_ >= 1 && tp_rank_ >= 0 && tp_rank_ < tp_, "ParamLayout: tp rank out of range");
  for (std::int64_t u = first_unit_; u <= last_unit_; ++u) {
    UnitSlot s;
    s.unit = u;
    s.kind = unit_kind(model, u);
    const auto descs = unit_tensors(model, u);
    int last_role = -1;
    for (std::size_t i = 0; i < descs.size(); ++i) {
      // Roles ascend in unit_tensors order, so a GPT unit's roles are its indices.
      const int role = tensor_role(s.kind, descs[i].name);
      ETH_CHECK(role > last_role, "unit_tensors changed: update the roles in model_state.h");
      last_role = role;
      TensorSlot t;
      t.role = role;
      t.desc = descs[i];
      t.decay = descs[i].shape.size() >= 2;
      t.full_rows = descs[i].shape.front();
      t.rows = descs[i].split == TpSplit::Sharded ? tp_rows(t.full_rows, tp_, tp_rank_)
                                                   : RowRange{0, t.full_rows};
      t.desc.shape.front() = t.rows.size();
      s.numel += t.desc.numel();
      s.tensors.push_back(std::move(t));
    }
    numel_ += s.numel;
    units_.push_back(std::move(s));
  }
}

ParamLayout::ParamLayout(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
                         std::int64_t tp, std::int64_t tp_rank)
    : first_unit_(first_unit), last_unit_(last_unit), tp_(tp), tp_rank_(tp_rank) {
  add_units(model);
  std::int64_t at = 0;
  for (UnitSlot& s : units_) {
    for (TensorSlot& t : s.tensors) {
      t.offset = at;
      t.grad = {GradChunk{t.rows, at}};
      at += t.desc.numel();
    }
  }
  grad_numel_ = numel_;
  // Tied: the head's copy takes its gradient where the embedding's is, so the kernels' two
  // accumulations add up in one buffer; its own room stays zero (the memory model's count).
  if (auto [wte, head] = tied_copies(model, units_); head) head->grad = wte->grad;
  finish_runs();
}

ParamLayout::ParamLayout(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
                         std::int64_t tp, std::int64_t tp_rank, std::vector<GradPlacement> grads,
                         std::int64_t grad_numel)
    : first_unit_(first_unit), last_unit_(last_unit), grad_numel_(grad_numel), tp_(tp),
      tp_rank_(tp_rank) {
  add_units(model);
  std::stable_sort(grads.begin(), grads.end(),
                   [](const GradPlacement& a, const GradPlacement& b) { return a.offset < b.offset; });
  std::int64_t end = 0;  // of the previous placement: placements must not overlap
  std::int64_t next_param = 0;
  for (const GradPlacement& g : grads) {
    ETH_CHECK(g.unit >= first_unit_ && g.unit <= last_unit_,
              "a gradient placement outside the layout's units");
    UnitSlot& s = units_[static_cast<std::size_t>(g.unit - first_unit_)];
    ETH_CHECK(g.tensor >= 0 && g.tensor < static_cast<std::int64_t>(s.tensors.size()),
              "a gradient placement names no tensor");
    TensorSlot& t = s.tensors[static_cast<std::size_t>(g.tensor)];
    ETH_CHECK(g.rows.begin >= t.rows.begin && g.rows.end <= t.rows.end && g.rows.size() > 0,
              "a gradient placement outside the rows of " + t.desc.name + " held here");
    ETH_CHECK(g.offset >= end, "gradient placements overlap");
    end = g.offset + g.rows.size() * t.row_size();
    if (t.grad.empty()) {  // the tensor's parameters go where its gradient first appears
      t.offset = next_param;
      next_param += t.desc.numel();
    }
    t.grad.push_back(GradChunk{g.rows, g.offset});
  }
  ETH_CHECK(end <= grad_numel_, "gradient placements beyond the gradient buffer");
  if (auto [wte, head] = tied_copies(model, units_); head) {
    // Tied, both copies here: the head's has no placement of its own (one gradient, wte's).
    ETH_CHECK(head->grad.empty(), "a placement for the tied head's gradient");
    head->offset = next_param;
    next_param += head->desc.numel();
    head->grad = wte->grad;
  }
  for (UnitSlot& s : units_) {
    for (TensorSlot& t : s.tensors) {
      std::sort(t.grad.begin(), t.grad.end(),
                [](const GradChunk& a, const GradChunk& b) { return a.rows.begin < b.rows.begin; });
      std::int64_t row = t.rows.begin;
      for (const GradChunk& c : t.grad) {
        ETH_CHECK(c.rows.begin == row, "the gradient placements of " + t.desc.name +
                                           " leave rows out or place them twice");
        row = c.rows.end;
      }
      ETH_CHECK(row == t.rows.end && !t.grad.empty(),
                "the gradient placements of " + t.desc.name + " leave rows out");
    }
  }
  finish_runs();
}

void ParamLayout::finish_runs() {
  struct Piece {
    const TensorSlot* t;
    const GradChunk* c;
  };
  std::vector<Piece> order;
  for (const UnitSlot& s : units_) {
    for (const TensorSlot& t : s.tensors) {
      for (const GradChunk& c : t.grad) order.push_back({&t, &c});
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Piece& a, const Piece& b) { return a.c->offset < b.c->offset; });
  runs_.clear();
  for (const Piece& p : order) {
    const std::int64_t row = p.t->row_size();
    const StateRun r{p.t->offset + (p.c->rows.begin - p.t->rows.begin) * row, p.c->offset,
                     p.c->rows.size() * row, p.t->decay};
    if (!runs_.empty()) {
      StateRun& last = runs_.back();
      if (last.decay == r.decay && last.param_offset + last.count == r.param_offset &&
          last.grad_offset + last.count == r.grad_offset) {
        last.count += r.count;
        continue;
      }
    }
    runs_.push_back(r);
  }
}

const UnitSlot& ParamLayout::unit(std::int64_t u) const {
  ETH_CHECK(u >= first_unit_ && u <= last_unit_, "ParamLayout: unit outside the range");
  return units_[static_cast<std::size_t>(u - first_unit_)];
}

std::int64_t ParamLayout::offset(std::int64_t u, int t) const {
  return unit(u).tensors[static_cast<std::size_t>(t)].offset;
}

std::unique_ptr<StateBackend> make_cpu_state_backend(Precision precision, std::size_t bytes) {
  if (precision == Precision::Bf16) return std::make_unique<StateBackendOf<CpuBf16Kernels>>(bytes);
  return std::make_unique<StateBackendOf<CpuKernels>>(bytes);
}

ModelState::ModelState(const ModelSpec& model, std::int64_t first_unit, std::int64_t last_unit,
                       std::int64_t tp, std::int64_t tp_rank, Precision precision,
                       MakeStateBackend make_backend)
    : ModelState(model, ParamLayout(model, first_unit, last_unit, tp, tp_rank), precision,
                 make_backend) {}

ModelState::ModelState(const ModelSpec& model, ParamLayout layout, Precision precision,
                       MakeStateBackend make_backend)
    : ModelState(model, std::move(layout), precision, OptimizerShard{-1}, make_backend) {}

ModelState::ModelState(const ModelSpec& model, ParamLayout layout, Precision precision,
                       OptimizerShard shard, MakeStateBackend make_backend)
    : model_(model), layout_(std::move(layout)), precision_(precision) {
  ETH_CHECK(runtime_precision(precision), "ModelState: the runtime trains in fp32 or bf16");
  const std::int64_t n = layout_.numel(), g = layout_.grad_numel();
  sharded_ = shard.numel >= 0;  // -1: the unsharded delegation above
  optimizer_numel_ = sharded_ ? shard.numel : n;
  ETH_CHECK(optimizer_numel_ <= n, "ModelState: a shard larger than the state");
  const std::int64_t s = optimizer_numel_;
  const bool bf16 = precision == Precision::Bf16;
  const std::int64_t masters = bf16 ? s : n;  // fp32: the whole weights are the masters
  const std::size_t bytes = arena_bytes<float>(masters) + 2 * arena_bytes<float>(s) +
                            arena_bytes<float>(g) + (bf16 ? arena_bytes<Bf16>(n) : 0);
  backend_ = (make_backend ? make_backend : &make_cpu_state_backend)(precision, bytes);
  params_ = backend_->take_f32(masters);
  grads_ = backend_->take_f32(g);
  adam_m_ = backend_->take_f32(s);
  adam_v_ = backend_->take_f32(s);
  if (bf16) params_bf16_ = backend_->take_bf16(n);
}

ModelState::~ModelState() = default;
ModelState::ModelState(ModelState&&) noexcept = default;
ModelState& ModelState::operator=(ModelState&&) noexcept = default;

std::size_t ModelState::state_bytes() const { return backend_->capacity(); }

ModelState::RoleBytes ModelState::role_bytes() const {
  const auto f = static_cast<double>(arena_bytes<float>(numel()));
  const auto g = static_cast<double>(arena_bytes<float>(layout_.grad_numel()));
  const auto s = static_cast<double>(arena_bytes<float>(optimizer_numel_));
  if (params_bf16_) return {static_cast<double>(arena_bytes<Bf16>(numel())), g, 3 * s};
  return {f, g, 2 * s};
}

void ModelState::refresh_compute_copy() {
  ETH_CHECK(!(sharded_ && params_bf16_), "refresh_compute_copy: a sharded bf16 state's masters "
                                         "are a shard; the sharded optimizer gathers the copy");
  if (params_bf16_) backend_->convert_to_bf16(params_bf16_, params_, numel());
}

void ModelState::zero_grads() { backend_->zero(grads_, layout_.grad_numel()); }

void ModelState::init(std::uint64_t seed) {
  ETH_CHECK(!sharded_, "ModelState::init: a sharded state is initialized by its optimizer");
  if (backend_->host_visible()) {
    for (const UnitSlot& s : layout_.units()) init_unit_params(params_, model_, s, seed);
  } else {  // drawn on the host, then one upload
    std::vector<float> host(static_cast<std::size_t>(numel()));
    for (const UnitSlot& s : layout_.units()) init_unit_params(host.data(), model_, s, seed);
    backend_->upload(params_, host.data(), numel());
  }
  backend_->zero(grads_, layout_.grad_numel());
  backend_->zero(adam_m_, numel());
  backend_->zero(adam_v_, numel());
  refresh_compute_copy();
}

void init_unit_params(float* params, const ModelSpec& model, const UnitSlot& slot,
                      std::uint64_t seed) {
  const RngStream stream{seed, 0, slot.unit, RngOp::Init};
  const float stddev = 0.02f;
  const float resid_stddev =
      stddev / static_cast<float>(std::sqrt(2.0 * static_cast<double>(model.layers)));
  for (std::size_t i = 0; i < slot.tensors.size(); ++i) {
    const TensorSlot& t = slot.tensors[i];
    float* p = params + t.offset;
    const std::int64_t n = t.desc.numel();
    const std::string& name = t.desc.name;
    const bool is_bias = name.size() > 2 && name.compare(name.size() - 2, 2, "_b") == 0;
    if (slot.unit != 0 && is_tied_tensor(model, slot.unit, name)) {
      // A tied head's lm_head_w draws the embedding's wte (unit 0, tensor 0): the same values.
      normal_fill(p, RngStream{seed, 0, 0, RngOp::Init}, stddev, 0, t.rows.begin * t.row_size(),
                  n);
      continue;
    }
    if (is_bias) {
      std::fill(p, p + n, 0.0f);
    } else if (t.desc.shape.size() == 1) {  // norm weights (layer norm, RMSNorm)
      std::fill(p, p + n, 1.0f);
    } else {
      // GPT-2 scales its residual projections; the Llama family (SwiGLU) draws every matrix
      // at 0.02, as Hugging Face's LlamaForCausalLM does.
      const bool resid =
          model.mlp == MlpKind::Gelu && (name == "proj_w" || name == "fcproj_w");
      // Element e of the whole tensor is draw e of its stream: a shard draws its rows' range.
      normal_fill(p, stream, resid ? resid_stddev : stddev, static_cast<std::int64_t>(i),
                  t.rows.begin * t.row_size(), n);
    }
  }
}

}  // namespace eth
