// The fine-tuning flags of `eth train`. See finetune_args.h.
#include "cli/finetune_args.h"

#include <cmath>

#include <CLI/CLI.hpp>

#include "cli/output.h"
#include "core/error.h"
#include "core/limits.h"
#include "train/init_from.h"

namespace eth::cli {

void add_finetune_options(CLI::App* sub, FinetuneArgs* a) {
  constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;
  auto* group = "Fine-tuning and validation";
  sub->add_option("--init-from", a->init_from,
                  "Start from this checkpoint's weights (eth train, or eth convert --from-hf): "
                  "fresh AdamW state, step 0, this run's data, seed and schedule; under a plan "
                  "each rank loads its own units. --model may be left out (the checkpoint's "
                  "model); a --model or plan of other dimensions is refused. Not with --resume")
      ->group(group);
  sub->add_option("--val-data", a->val_data,
                  "Validation token file: its windows in order (as eth eval), forward only, no "
                  "dropout; the mean loss is printed and logged (\"val_loss\") beside the "
                  "training loss. Under a plan rank 0 gathers the weights and evaluates them "
                  "in one process")
      ->group(group);
  sub->add_option("--val-every", a->val_every,
                  "Validation period in steps, and at the end (0: at the end only)")
      ->check(CLI::Range(std::int64_t{0}, kMaxCount))
      ->capture_default_str()
      ->group(group);
  sub->add_option("--val-batches", a->val_batches,
                  "Batches of the validation file per validation (0: every window)")
      ->check(CLI::Range(std::int64_t{0}, kMaxCount))
      ->capture_default_str()
      ->group(group);
  sub->add_option("--val-batch", a->val_batch, "Windows per validation batch (eth eval's --batch)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str()
      ->group(group);
}

std::int64_t validate_every(const FinetuneArgs& a, std::int64_t steps) {
  return a.val_every > 0 ? a.val_every : std::max<std::int64_t>(steps, 1);
}

void check_finetune_args(const FinetuneArgs& a, const std::string& resume, const ModelSpec& model,
                         std::int64_t seq_len) {
  if (!a.init_from.empty()) {
    check_init_not_resume(a.init_from, !resume.empty());
    check_init_model(a.init_from, checkpoint_model(a.init_from), model);
  }
  if (a.val_data.empty()) {
    for (const auto& [flag, set] : {std::pair{"--val-every", a.val_every != 0},
                                    std::pair{"--val-batches", a.val_batches != 0}}) {
      if (set) throw InputError("cli", flag, "", "give --val-data FILE too");
    }
    return;
  }
  make_validation(a, model, seq_len);  // opens and checks the file
}

std::unique_ptr<ValidationSet> make_validation(const FinetuneArgs& a, const ModelSpec& model,
                                               std::int64_t seq_len) {
  if (a.val_data.empty()) return nullptr;
  ValidationConfig vc;
  vc.data = a.val_data;
  vc.every = a.val_every;
  vc.eval.seq_len = seq_len;
  vc.eval.batch = a.val_batch;
  vc.eval.max_batches = a.val_batches;
  return std::make_unique<ValidationSet>(vc, model);
}

std::string validation_line(std::int64_t next_step, double loss) {
  return "validation after step " + std::to_string(next_step - 1) + ": loss " +
         fmt_num(loss, 4) + " (perplexity " + fmt_num(std::exp(loss), 4) + ")";
}

}  // namespace eth::cli
