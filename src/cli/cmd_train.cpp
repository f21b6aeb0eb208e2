// `eth train`: training of a model on a token file, with a progress line on stderr, JSON-lines
// logging (--log), checkpoints and resume. Without --plan, in this process (train/trainer.h);
// with --plan, one rank per device of an HPP plan (cmd_train_plan.cpp, runtime/). This file
// declares the flags, and runs the single-process trainer through the training loop
// (train/train_loop.h) and reports it.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/device_choice.h"
#include "cli/output.h"
#include "cli/precision_choice.h"
#include "cli/train_args.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/limits.h"
#include "train/checkpoint.h"
#include "train/train_loop.h"
#include "train/trainer.h"

namespace eth::cli {

namespace {

int run_train(const TrainArgs& a) {
  const Device device = choose_device(a.device, "--device");  // before anything is read
  if (!a.plan.empty()) return run_train_plan(a);  // chooses the device again, the same way
  if (!a.trace.empty() || !a.trace_steps.empty()) {
    throw InputError("cli", a.trace.empty() ? "--trace-steps" : "--trace", "",
                     "tracing records the distributed runtime: use it with --plan");
  }
  if (!a.stop_file.empty()) throw InputError("cli", "--stop-file", "", "use it with --plan");
  const PrecisionChoice precision = choose_device_precision(device, a.precision, "--precision");
  std::cerr << precision.line << "\n" << std::flush;
  TrainConfig cfg = make_config(a);
  cfg.precision = precision.precision;
  cfg.device = compute_device(device);
  // Every output is checked before the first step: a bad --checkpoint-dir found at the end
  // would throw the whole run away.
  if (!a.checkpoint_dir.empty()) prepare_output_dir(a.checkpoint_dir, "checkpoint");
  AppendFile log;
  if (!a.log.empty()) log = AppendFile(a.log, "log");
  check_train_memory(cfg);
  check_finetune_args(a.finetune, a.resume, cfg.model, resolve_seq_len(cfg));
  const std::unique_ptr<ValidationSet> validation =
      make_validation(a.finetune, cfg.model, resolve_seq_len(cfg));
  Trainer trainer(cfg, resolve_resume(a.resume));
  const std::int64_t first = trainer.next_step();
  const double held = trainer.compute().held_bytes_per_slot();
  std::cerr << "training " << cfg.model.name << " ("
            << fmt_num(static_cast<double>(trainer.state().numel()) / 1e6, 2)
            << " M parameters) on " << cfg.data.string() << ": steps " << first << ".."
            << cfg.steps - 1 << " of " << cfg.steps << ", batch " << cfg.global_batch << " x "
            << trainer.tokens_per_step() / cfg.global_batch << " tokens in micro-batches of "
            << cfg.micro_batch << ", activations held " << fmt_bytes(held) << "\n";
  TrainerRun run(trainer, validation.get());
  TrainLoop loop(run, loop_options(a));
  TrainReport report(log);
  const TrainLoopResult done = loop.run(report);
  log.close();
  const std::int64_t end = done.end_step;
  const std::string checkpoint = done.checkpoint.string();
  const double seconds = done.seconds;
  const double tok_s = seconds > 0 ? done.tokens / seconds : 0;
  if (a.format == Format::Json) {
    print_json(Json{{"model", cfg.model.name},
                    {"precision", std::string(precision_name(cfg.precision))},
                    {"params", trainer.state().numel()},
                    {"first_step", first},
                    {"next_step", trainer.next_step()},
                    {"steps", cfg.steps},
                    {"final_loss", done.last ? Json(done.last->loss) : Json(nullptr)},
                    {"tokens_per_s", tok_s},
                    {"seconds", seconds},
                    {"activation_bytes_per_micro_batch", held},
                    {"checkpoint", checkpoint.empty() ? Json(nullptr) : Json(checkpoint)}});
  } else if (first >= end) {
    std::cout << "nothing to do: the run is already at step " << first << " of " << end << "\n";
  } else {
    std::cout << "trained steps " << first << ".." << end - 1 << " in " << fmt_duration(seconds)
              << ": final loss " << fmt_num(done.last->loss, 4) << ", " << fmt_num(tok_s, 0)
              << " tokens/s";
    if (!checkpoint.empty()) std::cout << ", checkpoint " << checkpoint;
    std::cout << "\n";
  }
  return kExitOk;
}

// Bounds keep every product of these flags in 64 bits; memory decides the rest (checked before
// anything is allocated).
constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;

// The run's length and batch shape, the optimizer's schedule, the model's numerics and device.
void add_schedule_options(CLI::App* sub, TrainArgs* a) {
  sub->add_option("--steps", a->steps, "Total optimizer steps (the schedule's length)")
      ->check(CLI::Range(std::int64_t{1}, kMaxCount))
      ->capture_default_str();
  sub->add_option("--batch", a->batch,
                  "Global batch: samples per step (default 8; with --plan, the plan's gbs)")
      ->check(CLI::Range(std::int64_t{1}, kMaxCount));
  sub->add_option("--micro-batch-size", a->micro_batch,
                  "Samples per forward/backward (default: the whole batch)")
      ->check(CLI::Range(std::int64_t{1}, kMaxCount));
  sub->add_option("--seq-len", a->seq_len, "Tokens per sample (default: the model's seq_len)")
      ->check(CLI::Range(std::int64_t{1}, limits::kMaxSeqLen));
  sub->add_option("--lr", a->lr, "Peak learning rate")
      ->check(CLI::Range(1e-12, 1e3))
      ->capture_default_str();
  sub->add_option("--lr-min", a->lr_min, "Final learning rate of the cosine (default: lr / 10)")
      ->check(CLI::Range(0.0, 1e3));
  sub->add_option("--warmup", a->warmup, "Linear warm-up steps")
      ->check(CLI::Range(std::int64_t{0}, kMaxCount))
      ->capture_default_str();
  sub->add_option("--weight-decay", a->weight_decay, "AdamW weight decay (matrices only)")
      ->check(CLI::Range(0.0, 1e3))
      ->capture_default_str();
  sub->add_option("--grad-clip", a->grad_clip, "Max global gradient norm (0: no clipping)")
      ->check(CLI::Range(0.0, 1e12))
      ->capture_default_str();
  sub->add_option("--dropout", a->dropout, "Dropout probability (embedding, attention, residual)")
      ->check(CLI::Range(0.0, 0.95))
      ->capture_default_str();
  sub->add_option("--recompute", a->recompute,
                  "Operators to recompute in backward, comma-separated: " + recompute_op_names() +
                      ", or none")
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              parse_recompute_list(v);
              return std::string();
            } catch (const InputError& e) {
              return e.detail();
            }
          },
          "OPS"))
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of initialization, data order and dropout")
      ->capture_default_str();
  sub->add_option("--precision", a->precision,
                  "fp32, or bf16: bf16 weights copy and activations, fp32 master weights, Adam "
                  "moments and gradients (default: bf16 where the CPU has bf16 matrix "
                  "instructions, fp32 otherwise; checkpoints resume in either)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  sub->add_option("--device", a->device, kDeviceHelp)
      ->check(CLI::IsMember(kDeviceNames))
      ->capture_default_str();
}

// Checkpoints, resuming, the log and progress lines.
void add_checkpoint_options(CLI::App* sub, TrainArgs* a) {
  sub->add_option(
      "--checkpoint-dir", a->checkpoint_dir,
      "Write step_<N>.safetensors here at the end (and every --checkpoint-every steps)");
  sub->add_option("--checkpoint-every", a->checkpoint_every,
                  "Checkpoint period in steps (0: end only)")
      ->check(CLI::Range(std::int64_t{0}, kMaxCount));
  sub->add_option("--resume", a->resume,
                  "Continue from a checkpoint file, or the latest one in a directory");
  sub->add_option("--log", a->log,
                  "Append one JSON line per step (step, loss, lr, grad_norm, "
                  "tokens_per_s, seconds) to this file");
  sub->add_option("--print-every", a->print_every, "Progress line period in steps (0: none)")
      ->check(CLI::Range(std::int64_t{0}, kMaxCount))
      ->capture_default_str();
  sub->add_option("--stop-at", a->stop_at,
                  "Stop (and checkpoint) once this step is reached, keeping the --steps schedule; "
                  "--resume continues from there")
      ->check(CLI::Range(std::int64_t{1}, kMaxCount));
}

// Running one rank of an HPP plan: its cluster, backend, emulation and trace.
void add_plan_options(CLI::App* sub, TrainArgs* a) {
  auto* dist = "Distributed (HPP)";
  sub->add_option("--plan", a->plan,
                  "Run this plan (eth plan --out): one MPI rank per device, rank i on the i-th "
                  "device id; each pipeline keeps its own micro-batch size, local batch, stages "
                  "and recompute")
      ->group(dist);
  sub->add_option("--cluster", a->cluster,
                  "Cluster preset or file the plan runs on (default: the plan's \"cluster\")")
      ->group(dist);
  sub->add_option("--allreduce", a->allreduce,
                  "Gradient aggregation: block (one all-reduce per holder group), tensor (one per "
                  "parameter tensor) or device (whole-model zero-padded buffer)")
      ->check(CLI::IsMember({"block", "tensor", "device"}))
      ->capture_default_str()
      ->group(dist);
  sub->add_option("--emulate", a->emulate,
                  "EMULATION on one machine: TYPE=FACTOR makes ranks of device type TYPE FACTOR "
                  "times slower than a cpu core: every forward, backward and optimizer step lasts "
                  "FACTOR times its cpu time (--emulate-from says which: the profile's or this "
                  "run's) (repeatable; overrides the cluster file's emulated_slowdown)")
      ->group(dist);
  sub->add_option("--emulate-from", a->emulate_from,
                  "What an emulated op lasts: profile (the time --profile gives a device of its "
                  "type for the op: a device of fixed speed), cpu-time (FACTOR x the op's CPU "
                  "time in this run: this machine's speed of the moment, host contention "
                  "included), auto (profile when --profile is given, else cpu-time)")
      ->check(CLI::IsMember({"auto", "profile", "cpu-time"}))
      ->capture_default_str()
      ->group(dist);
  sub->add_option("--backend", a->backend,
                  "mpi (under mpirun / eth launch) or threads (every rank a thread of this "
                  "process: no MPI needed, for tests and small demos). With --device emulated or "
                  "cuda, threads share the one device (each rank on its own stream, messages "
                  "and collectives device to device); under mpi each rank is a process with "
                  "its own device: cuda one GPU per rank over NCCL, emulated its own emulated "
                  "device, messages staged through host copies")
      ->check(CLI::IsMember({"mpi", "threads"}))
      ->capture_default_str()
      ->group(dist);
  sub->add_option("--profile", a->profile,
                  "Profile directory (eth profile --measure) for the predicted iteration time "
                  "printed beside the measured one")
      ->group(dist);
  sub->add_option("--threads", a->threads,
                  "OpenMP threads per rank (default: this host's cores divided by its ranks, at "
                  "least 1; more ranks than cores each spinning on 2 threads is many times slower)")
      ->check(CLI::Range(1, 1024))
      ->group(dist);
  sub->add_flag("--pin", a->pin,
                "Pin each rank to one core of its host (local rank i on allowed core i mod "
                "cores), so a rank keeps its core and its caches; profile with the same "
                "conditions (docs/runtime.md)")
      ->group(dist);
  sub->add_option("--timeout", a->timeout_s,
                  "Seconds any rank waits for another before it gives up and names it")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str()
      ->group(dist);
  sub->add_option("--trace", a->trace,
                  "Write a Chrome trace (JSON; open in https://ui.perfetto.dev) of the chosen "
                  "steps: one process per rank, every forward, backward, recompute, send, wait on "
                  "a neighbour, gradient collective, optimizer step and emulation stretch; "
                  "`eth simulate --plan P --measured FILE` sets it beside the simulation")
      ->group(dist);
  sub->add_option("--trace-steps", a->trace_steps,
                  "Steps --trace records: N, A-B or a comma list (default: the 3 steps after the "
                  "first, which pays for set-up)")
      ->group(dist);
  sub->add_option("--stop-file", a->stop_file,
                  "With --plan and --checkpoint-dir: after each checkpoint, stop there (exit 0) "
                  "when this file exists; eth launch --elastic asks a run to stop this way")
      ->group(dist);
}

}  // namespace

void add_train_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "train",
      "Train a model on a token file: in this process (all units, gradient accumulation over "
      "micro-batches), or with --plan on one rank per device of an HPP plan (start it with "
      "`eth launch`). AdamW, warm-up + cosine schedule, checkpoints any plan can resume.");
  auto a = std::make_shared<TrainArgs>();
  add_train_options(sub, a.get());
  r.on(sub, [a] { return run_train(*a); });
}

void add_train_options(CLI::App* sub, TrainArgs* a) {
  sub->add_option("--model", a->model,
                  "Model preset name or JSON file (see `eth models`); with --plan, the plan's");
  sub->add_option("--data", a->data, "Token file (llm.c format; see `eth data`)")->required();
  add_schedule_options(sub, a);
  add_checkpoint_options(sub, a);
  add_plan_options(sub, a);
  add_finetune_options(sub, &a->finetune);
  add_format_option(sub, &a->format);
}

}  // namespace eth::cli
