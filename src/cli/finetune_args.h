// The flags of `eth train` (and of `eth launch ... -- `, which passes them on) for starting from
// a checkpoint's weights and for a validation set (issue 26): --init-from, --val-data,
// --val-every, --val-batches. Kept apart from train_args.h so the fine-tuning flags live in one
// place; both training modes (cmd_train.cpp, cmd_train_plan.cpp) check them with
// check_finetune_args before any rank starts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/cli_fwd.h"
#include "model/model_spec.h"
#include "train/validation.h"

namespace eth::cli {

struct FinetuneArgs {
  std::string init_from;        // checkpoint whose weights start the run (fresh optimizer)
  std::string val_data;         // token file of the validation set; empty: none
  std::int64_t val_every = 0;   // 0: at the end only
  std::int64_t val_batches = 0; // 0: every window of the file
  std::int64_t val_batch = 8;   // windows per forward (eth eval's --batch default)
};

void add_finetune_options(CLI::App* sub, FinetuneArgs* a);

// The loop's validation period: `val_every`, or the run's length when 0 (the end only).
std::int64_t validate_every(const FinetuneArgs& a, std::int64_t steps);

// Before any work: --init-from with --resume, a checkpoint whose model is not `model` (the run's,
// --model's or the plan's), a validation file that cannot serve `model` at sequences of `seq_len`.
// `resume`: the --resume argument.
void check_finetune_args(const FinetuneArgs& a, const std::string& resume, const ModelSpec& model,
                         std::int64_t seq_len);

// The validation set of a run at sequences of `seq_len`; null without --val-data.
std::unique_ptr<ValidationSet> make_validation(const FinetuneArgs& a, const ModelSpec& model,
                                               std::int64_t seq_len);

// "validation at step N: loss X (perplexity P)"
std::string validation_line(std::int64_t next_step, double loss);

}  // namespace eth::cli
