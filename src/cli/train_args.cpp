// Shared helpers of `eth train`. See train_args.h.
#include "cli/train_args.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/resources.h"
#include "core/error.h"
#include "data/sampler.h"
#include "kernels/constants.h"
#include "model/arithmetic.h"
#include "train/checkpoint.h"
#include "train/init_from.h"
#include "train/precision_stage.h"
#include "train/train_memory.h"

namespace eth::cli {

RecomputeSet parse_recompute_list(const std::string& text) {
  RecomputeSet rc;
  if (text.empty() || text == "none") return rc;
  std::stringstream ss(text);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const auto op = parse_recompute_op(name);
    if (!op) {
      throw InputError("cli", "--recompute", "",
                       "unknown operator \"" + name + "\"; expected a comma-separated list of: " +
                           recompute_op_names() + " (or none)");
    }
    rc.add(*op);
  }
  return rc;
}

std::string fmt_sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2e", v);
  return buf;
}

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto total = static_cast<long long>(s + 0.5);
  std::ostringstream o;
  if (total >= 3600) {
    o << total / 3600 << "h" << (total % 3600) / 60 << "m";
  }
  else if (total >= 60)
    o << total / 60 << "m" << total % 60 << "s";
  else
    o << total << "s";
  return o.str();
}

std::optional<std::filesystem::path> resolve_resume(const std::string& arg) {
  if (arg.empty()) return std::nullopt;
  std::error_code ec;
  if (std::filesystem::is_directory(arg, ec)) {
    auto latest = latest_checkpoint(arg);
    if (!latest) {
      throw InputError("cli", "--resume", "", "no step_*.safetensors checkpoint in " + arg);
    }
    return latest;
  }
  return std::filesystem::path(arg);
}

void require_trainable(const ModelSpec& m) {
  // Every architecture a model file describes plans and simulates; these few have no kernels
  // yet.
  std::string why;
  if (m.norm == NormKind::LayerNorm && !m.bias) {
    why = "bias: layer norm without biases has no kernels (use \"norm\": \"rmsnorm\")";
  } else if (m.norm == NormKind::LayerNorm && m.norm_eps != kLayerNormEps) {
    why = "norm_eps: the layer-norm kernels use 1e-5";
  }
  if (why.empty()) return;
  throw InputError("cli", "--model", "", "model \"" + message_text(m.name, 64) + "\": " + why);
}

TrainConfig make_config(const TrainArgs& a, const std::optional<ModelSpec>& model) {
  TrainConfig c;
  if (model) {
    c.model = *model;
  } else if (a.model.empty() && !a.finetune.init_from.empty()) {
    c.model = checkpoint_model(a.finetune.init_from);  // the checkpoint's own model
  } else if (a.model.empty()) {
    throw InputError("cli", "--model", "",
                     "missing: name a preset (see `eth models`) or a model file");
  } else {
    c.model = load_model(a.model);
  }
  require_trainable(c.model);
  c.data = a.data;
  c.steps = a.steps;
  c.global_batch = a.batch == 0 ? 8 : a.batch;
  c.micro_batch = a.micro_batch == 0 ? c.global_batch : a.micro_batch;
  c.seq_len = a.seq_len;
  c.lr = LrSchedule{a.lr, a.lr_min < 0 ? a.lr / 10 : a.lr_min, a.warmup, a.steps};
  c.adamw.weight_decay = static_cast<float>(a.weight_decay);
  c.adamw.grad_clip = static_cast<float>(a.grad_clip);
  c.recompute = parse_recompute_list(a.recompute);
  c.dropout = static_cast<float>(a.dropout);
  c.seed = a.seed;
  c.init_from = a.finetune.init_from;
  return c;
}

TrainLoopOptions loop_options(const TrainArgs& a) {
  TrainLoopOptions o;
  o.stop_at = a.stop_at;
  o.checkpoint_dir = a.checkpoint_dir;
  o.checkpoint_every = a.checkpoint_every;
  o.stop_file = a.stop_file;
  o.print_every = a.print_every;
  if (!a.finetune.val_data.empty()) o.validate_every = validate_every(a.finetune, a.steps);
  return o;
}

Json TrainReport::step_json(const StepStats& s) const {
  return Json{{"step", s.step},
              {"loss", s.loss},
              {"lr", s.lr},
              {"grad_norm", s.grad_norm},
              {"tokens_per_s", s.tokens_per_s},
              {"seconds", s.seconds}};
}

void TrainReport::on_step(const StepStats& s) {
  if (log_) {
    Json j = step_json(s);
    if (val_ && val_->first == s.step + 1) j["val_loss"] = val_->second;
    log_.write_line(j.dump());
  }
  val_.reset();
}

void TrainReport::on_validation(std::int64_t next_step, double loss) {
  val_.emplace(next_step, loss);
  std::cerr << validation_line(next_step, loss) << "\n";
}

void TrainReport::on_progress(const TrainProgress& p) {
  const StepStats& s = p.step;
  std::cerr << "step " << s.step << "/" << p.total_steps << "  loss " << fmt_num(s.loss, 4)
            << "  lr " << fmt_sci(s.lr) << "  grad_norm " << fmt_num(s.grad_norm, 3) << "  "
            << fmt_num(s.tokens_per_s, 0) << " tok/s  ETA " << fmt_duration(p.eta_s) << "\n";
}

namespace {

// Above this the exact sizing pass (64-bit products of batch, heads and sequence) could
// overflow; no machine has a petabyte, so the coarse figure is reason enough to refuse.
constexpr double kCoarseLimitBytes = 1e15;

// fp32 activations of units [first, last] for one micro-batch of `mb` samples: twice the
// 16-bit formula (model/arithmetic.h), computed in double so it cannot overflow.
double coarse_activation_bytes(const ModelSpec& m, std::int64_t first, std::int64_t last,
                               std::int64_t mb, std::int64_t T) {
  double bytes = 0;
  for (std::int64_t u = first; u <= last; ++u) {
    bytes += 2 * activation_bytes_16bit(m, u, mb, T, 1).total();
  }
  return bytes;
}

double state_bytes(const ModelSpec& m, std::int64_t first, std::int64_t last, Precision p) {
  double params = 0;
  for (std::int64_t u = first; u <= last; ++u) params += static_cast<double>(unit_params(m, u));
  // parameters, gradients, Adam m and v (and the bf16 compute copy): core/precision.h
  return precision_bytes(p).per_parameter() * params;
}

// The activation arena StageCompute will map, exactly, or the coarse figure when that alone is
// past any machine.
double arena_bytes(const ModelSpec& m, const StageComputeConfig& sc, Precision p) {
  const double coarse = coarse_activation_bytes(m, sc.first_unit, sc.last_unit,
                                                sc.max_micro_batch, sc.seq_len) *
                        static_cast<double>(sc.num_slots);
  if (coarse > kCoarseLimitBytes) return coarse;
  return static_cast<double>(PrecisionStage::planned_arena_bytes(p, m, sc));
}

}  // namespace

void check_train_memory(const TrainConfig& cfg) {
  const ModelSpec& m = cfg.model;
  const std::int64_t T = cfg.seq_len == 0 ? m.seq_len : cfg.seq_len;
  // Out-of-range values are the trainer's to name; only a valid run is sized here.
  if (T < 1 || T > m.seq_len || cfg.micro_batch < 1 || cfg.global_batch < 1) return;
  const std::int64_t mb = std::min(cfg.micro_batch, cfg.global_batch);
  const TrainMemory need = train_memory(cfg);
  const std::string flag = cfg.micro_batch < cfg.global_batch ? "--micro-batch-size" : "--batch";
  const std::string what =
      "model " + m.name + ": parameters, gradients and AdamW state " +
      fmt_bytes(need.state_bytes) + ", activations of a micro-batch of " + std::to_string(mb) +
      " x " + std::to_string(T) + " tokens " + fmt_bytes(need.arena_bytes);
  const std::string advice =
      "use a smaller --micro-batch-size (the batch is accumulated over micro-batches), "
      "--batch, --seq-len or model";
  if (need.on_device) {
    // The state and the stage live in device memory: the device's free memory is the limit
    // (the emulated device's pages are also the host's, so they count there too).
    const DeviceMemoryInfo dev = device_memory(cfg.device);
    if (need.device_bytes() > dev.free_bytes) {
      throw InputError("cli", flag, "",
                       "needs " + fmt_bytes(need.device_bytes()) + " of device memory (" + what +
                           ") on --device " + compute_device_name(cfg.device) + ", " + dev.name +
                           " has " + fmt_bytes(dev.free_bytes) + " free; " + advice);
    }
  }
  const double host = need.total_host_bytes() +
                      (cfg.device == ComputeDevice::Emulated ? need.device_bytes() : 0.0);
  check_memory(host,
               what + ", sample list and token staging " + fmt_bytes(need.host_bytes) +
                   (cfg.device == ComputeDevice::Emulated ? " (the emulated device's memory is "
                                                            "this host's)"
                                                          : ""),
               flag, advice);
}

void check_plan_train_memory(const Plan& plan, const TrainConfig& cfg, int ranks_here,
                             bool checkpoints) {
  const ModelSpec& m = plan.model;
  const std::int64_t T = plan.seq_len;
  double worst = 0;
  std::string worst_where;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    const auto S = static_cast<std::int64_t>(pipe.stages.size());
    for (std::int64_t s = 0; s < S; ++s) {
      const StagePlan& st = pipe.stages[static_cast<std::size_t>(s)];
      StageComputeConfig sc;
      sc.first_unit = st.first_unit;
      sc.last_unit = st.last_unit;
      sc.max_micro_batch = (pipe.micro_batch_size + st.dp - 1) / st.dp;
      sc.seq_len = T;
      sc.num_slots = std::min(S - s, pipe.num_microbatches());
      sc.recompute = st.recompute;
      sc.dropout = cfg.dropout;
      sc.seed = cfg.seed;
      const double bytes =
          state_bytes(m, st.first_unit, st.last_unit, cfg.precision) +
          arena_bytes(m, sc, cfg.precision) +
          2.0 * static_cast<double>(sc.num_slots * sc.max_micro_batch * T) * 4;
      if (bytes > worst) {
        worst = bytes;
        worst_where = "pipelines[" + std::to_string(p) + "].stages[" + std::to_string(s) + "]";
      }
    }
  }
  // The gather builds an fp32 state of the whole model (16 bytes per parameter, 12 of them used).
  const double whole =
      checkpoints ? state_bytes(m, 0, m.num_units() - 1, Precision::Fp32) * 0.75 : 0;
  const double samples = static_cast<double>(cfg.global_batch) * sizeof(SampleRef);
  check_memory(worst * ranks_here + whole + samples,
               std::to_string(ranks_here) + " ranks here, the largest " + worst_where + " at " +
                   fmt_bytes(worst) + " each (state and activations)" +
                   (checkpoints ? ", rank 0's checkpoint copy of the model " + fmt_bytes(whole)
                                : std::string()),
               "--plan", "plan with smaller micro-batches, more stages or recompute");
}

}  // namespace eth::cli
