// Shared helpers of `eth train`. See train_args.h.
#include "cli/train_args.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "train/checkpoint.h"

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

TrainConfig make_config(const TrainArgs& a, const std::optional<ModelSpec>& model) {
  TrainConfig c;
  if (model) {
    c.model = *model;
  } else if (a.model.empty()) {
    throw InputError("cli", "--model", "",
                     "missing: name a preset (see `eth models`) or a model file");
  } else {
    c.model = load_model(a.model);
  }
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
  return c;
}

}  // namespace eth::cli
