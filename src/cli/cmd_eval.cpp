// `eth eval`: the mean next-token loss and perplexity of a checkpoint on a token file, through
// the single-process trainer's forward path (hf/evaluate.h).
#include <cmath>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/precision_choice.h"
#include "data/token_file.h"
#include "hf/evaluate.h"
#include "train/checkpoint.h"

namespace eth::cli {

namespace {

struct EvalArgs {
  std::string checkpoint;
  std::string data;
  std::int64_t batches = 0;
  std::int64_t batch = 8;
  std::int64_t seq_len = 0;
  std::string precision = "fp32";
  Format format = Format::Text;
};

}  // namespace

void add_eval_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "eval", "Mean loss and perplexity of a checkpoint on a token file (its windows in order)");
  auto a = std::make_shared<EvalArgs>();
  sub->add_option("--checkpoint", a->checkpoint, "ETH checkpoint (eth train, eth convert)")
      ->required();
  sub->add_option("--data", a->data, "Token file (eth data): windows of --seq-len + 1 tokens")
      ->required();
  sub->add_option("--batches", a->batches, "Batches to evaluate; 0: every window of the file")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--batch", a->batch, "Windows per batch")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16))
      ->capture_default_str();
  sub->add_option("--seq-len", a->seq_len,
                  "Predictions per window, T (window w is tokens [w*T, w*T + T]); 0: the "
                  "model's sequence length")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--precision", a->precision,
                  "fp32 (exact) or bf16 (bf16 weights and activations, fp32 accumulation)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  add_format_option(sub, &a->format);
  r.on(sub, [a] {
    const PrecisionChoice pc = choose_precision(a->precision, "--precision");
    const TokenFile data = TokenFile::open(a->data);
    const CheckpointMeta meta = read_checkpoint_meta(a->checkpoint);
    ModelState state(meta.model, 0, meta.model.num_units() - 1, 1, 0, pc.precision);
    load_checkpoint(a->checkpoint, state);
    hf::EvalConfig cfg;
    cfg.seq_len = a->seq_len;
    cfg.batch = a->batch;
    cfg.max_batches = a->batches;
    const hf::EvalResult res = hf::evaluate(state, data, cfg);
    if (a->format == Format::Json) {
      print_json(Json{{"checkpoint", a->checkpoint},
                      {"data", a->data},
                      {"precision", a->precision},
                      {"loss", res.loss},
                      {"perplexity", res.perplexity},
                      {"seq_len", res.seq_len},
                      {"windows", res.windows},
                      {"batches", res.batches},
                      {"tokens", res.tokens}});
    } else {
      std::cout << "loss " << res.loss << " (perplexity " << res.perplexity << ") over "
                << res.tokens << " predictions: " << res.windows << " windows of "
                << res.seq_len << " in " << res.batches << " batches, " << a->precision << "\n";
    }
    return kExitOk;
  });
}

}  // namespace eth::cli
