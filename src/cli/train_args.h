// The flags of `eth train` and the helpers both its modes share (single process in
// cmd_train.cpp, a plan over ranks in cmd_train_plan.cpp): turning flags into a TrainConfig and
// the training loop's options, finding the checkpoint to resume, and reporting the loop
// (train/train_loop.h: the loop itself is the library's, the same for both modes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_fwd.h"
#include "cli/finetune_args.h"
#include "cli/output.h"
#include "core/atomic_file.h"
#include "model/recompute.h"
#include "plan/plan.h"
#include "train/train_loop.h"
#include "train/trainer.h"

namespace eth::cli {

struct TrainArgs {
  std::string model;  // required without --plan; with --plan it must match the plan's
  std::string data;
  std::int64_t steps = 100;
  std::int64_t batch = 0;        // 0: the plan's gbs with --plan, else 8
  std::int64_t micro_batch = 0;  // 0: the whole batch at once
  std::int64_t seq_len = 0;      // 0: the plan's, else the model's
  double lr = 3e-4;
  double lr_min = -1;  // < 0: lr / 10
  std::int64_t warmup = 0;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  double dropout = 0;
  std::string recompute = "none";
  std::string precision;  // fp32 | bf16; empty: bf16 where the CPU has bf16 instructions
  std::string device = "cpu";  // cpu | emulated | cuda (device_choice.h)
  std::uint64_t seed = 1;
  std::string checkpoint_dir;
  std::int64_t checkpoint_every = 0;
  std::string resume;
  std::string log;
  std::int64_t print_every = 1;
  std::int64_t stop_at = 0;  // 0: run to --steps
  Format format = Format::Text;
  // Distributed (with --plan).
  std::string plan;
  std::string cluster;
  std::string allreduce = "block";
  std::vector<std::string> emulate;  // TYPE=FACTOR
  // What an emulated op's length follows: profile (the device's profiled time for the op, with
  // --profile), cpu-time (FACTOR x the op's CPU time in this run), auto (profile when --profile
  // is given).
  std::string emulate_from = "auto";
  std::string backend = "mpi";       // mpi | threads
  std::string profile;               // measured profile for the predicted iteration time
  double timeout_s = 120;
  int threads = 0;  // OpenMP threads per rank; 0: this host's cores / its ranks (at least 1)
  bool pin = false;  // each rank on one core of this host (local rank i on core i mod cores)
  std::string trace;        // Chrome trace of the run (rank 0 writes it)
  std::string trace_steps;  // which steps; empty: a few after the first
  std::string stop_file;    // checked by rank 0 after each checkpoint: stop there if it exists
  FinetuneArgs finetune;    // --init-from, --val-data, --val-every, --val-batches (finetune_args.h)
};

// Declares every flag of `eth train` on `sub`, bound to `*a` (eth train, and eth launch --elastic
// reading the arguments it passes on).
void add_train_options(CLI::App* sub, TrainArgs* a);

RecomputeSet parse_recompute_list(const std::string& text);
std::string fmt_sci(double v);
std::string fmt_duration(double seconds);
std::optional<std::filesystem::path> resolve_resume(const std::string& arg);
// Throws an InputError naming --model and the model field unless the kernels and the runtime
// train `m`'s architecture: GPT and the Llama family do, tied or not; layer norm without biases
// or with another epsilon than 1e-5 does not.
void require_trainable(const ModelSpec& m);
// The run's configuration; `model` replaces --model when given (the plan's model).
TrainConfig make_config(const TrainArgs& a, const std::optional<ModelSpec>& model = std::nullopt);
// --stop-at, --checkpoint-dir, --checkpoint-every, --stop-file and --print-every.
TrainLoopOptions loop_options(const TrainArgs& a);

// What both modes print of the loop: one JSON line per step into --log (when open) and the
// progress line on stderr. The distributed run adds its ranks' times to each line.
class TrainReport : public TrainLoopSink {
 public:
  explicit TrainReport(AppendFile& log) : log_(log) {}
  void on_step(const StepStats& s) override;
  void on_progress(const TrainProgress& p) override;
  // A line on stderr, and "val_loss" in the step's log line.
  void on_validation(std::int64_t next_step, double loss) override;

 protected:
  // The log line of step `s`: step, loss, lr, grad_norm, tokens_per_s, seconds.
  virtual Json step_json(const StepStats& s) const;

 private:
  AppendFile& log_;
  std::optional<std::pair<std::int64_t, double>> val_;  // (next step, loss) of the step to log
};

// Throws InputError naming the flag to change when one process of `eth train` would need more
// memory than this machine has available, before anything is allocated: parameters, gradients
// and the two AdamW moments (fp32), the activation arena of one micro-batch (StageCompute's own
// sizing pass), the token buffers of one micro-batch and the sample list of one step.
void check_train_memory(const TrainConfig& cfg);
// The same for the ranks of `plan` this machine runs (`ranks_here` of them; each rank's state,
// arena and buffers, rank 0's whole-model checkpoint buffer when checkpointing).
void check_plan_train_memory(const Plan& plan, const TrainConfig& cfg, int ranks_here,
                             bool checkpoints);

// --emulate TYPE=FACTOR: sets the factors on `cluster`'s types; InputError naming --emulate for a
// malformed spec or a type the cluster lacks.
void apply_emulation(ClusterSpec& cluster, const std::vector<std::string>& specs);

// `eth train --plan`: cmd_train_plan.cpp.
int run_train_plan(const TrainArgs& a);

}  // namespace eth::cli
