// `eth sample`: text generated from a checkpoint (train/sampling.h), greedy or sampled with a
// temperature and top-k, encoded and decoded by the tokenizer (cli/text_codec.h).
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/text_codec.h"
#include "train/sampling.h"

namespace eth::cli {

namespace {

struct SampleArgs {
  std::string checkpoint;
  std::string prompt;
  std::string tokenizer;
  GenerateConfig gen;
  Format format = Format::Text;
};

}  // namespace

void add_sample_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "sample",
      "Generate text from a checkpoint: greedy, or sampled with --temperature and --top-k. Each "
      "token recomputes the whole window (the last seq_len tokens) through the training "
      "forward, without a key/value cache: fine for small models, slow for large ones");
  auto a = std::make_shared<SampleArgs>();
  sub->add_option("--checkpoint", a->checkpoint, "ETH checkpoint (eth train, eth convert)")
      ->required();
  sub->add_option("--prompt", a->prompt,
                  "Text the generation continues (default: empty, which starts from token id "
                  "0)");
  sub->add_option("--tokens", a->gen.tokens, "Tokens to generate")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20))
      ->capture_default_str();
  sub->add_option("--temperature", a->gen.temperature,
                  "Softmax temperature (> 0; lower is more conservative)")
      ->check(CLI::Range(1e-6, 1e6))
      ->capture_default_str();
  sub->add_option("--top-k", a->gen.top_k,
                  "Sample among the K most likely tokens only (0: all; 1: greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--seed", a->gen.seed, "Seed of the sampling (same seed, same text)")
      ->capture_default_str();
  sub->add_flag("--greedy", a->gen.greedy,
                "Always the most likely token (ties: the lowest id); ignores the sampling flags");
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.json to encode the prompt and decode the output (default: bytes, "
                  "as eth data --text writes them)");
  add_format_option(sub, &a->format);
  r.on(sub, [a] {
    const std::unique_ptr<TextCodec> codec = make_text_codec(a->tokenizer);
    TextGenerator gen(a->checkpoint);
    std::vector<std::int32_t> prompt = codec->encode(a->prompt);
    if (prompt.empty()) prompt.push_back(0);
    const std::vector<std::int32_t> all = gen.generate(prompt, a->gen);
    const std::span<const std::int32_t> added =
        std::span<const std::int32_t>(all).subspan(prompt.size());
    if (a->format == Format::Json) {
      print_json(Json{{"checkpoint", a->checkpoint},
                      {"tokenizer", codec->name()},
                      {"prompt", a->prompt},
                      {"prompt_ids", prompt},
                      {"ids", std::vector<std::int32_t>(added.begin(), added.end())},
                      {"text", codec->decode(added)}});
    } else {
      std::cout << a->prompt << codec->decode(added) << "\n";
    }
    return kExitOk;
  });
}

}  // namespace eth::cli
