// `eth data`: make token files in llm.c's format: from a text file with the byte-level tokenizer,
// or a synthetic learnable sequence for tests and demos; `--info` describes an existing file.
// Not a BPE tokenizer: GPT-2-tokenized shards made by llm.c's scripts are used as they are.
#include <climits>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/resources.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "data/token_file.h"
#include "data/tokenize.h"

namespace eth::cli {

namespace {

struct DataArgs {
  std::string text;
  std::int64_t synthetic = 0;
  std::string pattern = "successor";
  std::int64_t period = 16;
  std::int64_t vocab = 256;
  std::uint64_t seed = 1;
  std::string out;
  std::string info;
  Format format = Format::Text;
};

int report(const DataArgs& a, const std::string& path, const std::string& what) {
  const TokenFile f = TokenFile::open(path);
  if (a.format == Format::Json) {
    print_json(
        Json{{"file", path}, {"tokens", f.size()}, {"max_token", f.max_token()}, {"source", what}});
  } else {
    std::cout << what << path << ": " << f.size() << " tokens, largest token id " << f.max_token()
              << " (a model needs vocab > " << f.max_token() << ")\n";
  }
  return kExitOk;
}

}  // namespace

void add_data_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "data",
      "Make a token file (llm.c format): --text FILE (bytes as tokens, vocabulary 256) "
      "or --synthetic N (a learnable sequence); --info FILE describes one");
  auto a = std::make_shared<DataArgs>();
  auto* text = sub->add_option("--text", a->text, "Text file to tokenize, one token per byte")
                   ->check(CLI::ExistingFile);
  auto* syn = sub->add_option("--synthetic", a->synthetic,
                              "Generate this many tokens of a synthetic learnable sequence")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{INT32_MAX}));
  auto* info = sub->add_option("--info", a->info, "Describe an existing token file")
                   ->check(CLI::ExistingFile);
  text->excludes(syn)->excludes(info);
  syn->excludes(info);
  sub->add_option("--pattern", a->pattern,
                  "Synthetic pattern: successor (next token = fixed function of the current one) "
                  "or periodic (a random block of --period tokens, repeated)")
      ->check(CLI::IsMember({"successor", "periodic"}))
      ->capture_default_str();
  sub->add_option("--period", a->period, "Block length of the periodic pattern")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--vocab", a->vocab, "Synthetic tokens are in [0, vocab)")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{65536}))
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the synthetic sequence")->capture_default_str();
  sub->add_option("--out", a->out, "Token file to write (atomically)");
  add_format_option(sub, &a->format);
  r.on(sub, [a, text, syn, info] {
    if (!info->empty()) return report(*a, a->info, "");
    if (text->empty() && syn->empty()) {
      throw UsageError("eth data", "give one of --text FILE, --synthetic N, --info FILE");
    }
    if (a->out.empty()) throw UsageError("--out", "missing: the token file to write");
    check_output_file(a->out, "data");  // before the work
    std::vector<std::uint16_t> tokens;
    std::string what;
    if (!text->empty()) {
      // One token per byte, and the file's count is an int32.
      std::error_code ec;
      const auto bytes = static_cast<double>(std::filesystem::file_size(a->text, ec));
      check_memory(3 * bytes, "the text and its tokens", "--text",
                   "split the text and make one token file per part");
      tokens = tokenize_bytes(read_text_file(a->text, "data", INT32_MAX));
      what = "tokenized " + a->text + " (bytes) -> ";
    } else {
      check_memory(2.0 * static_cast<double>(a->synthetic), "the synthetic tokens",
                   "--synthetic", "ask for fewer tokens");
      SyntheticSpec spec;
      spec.pattern = parse_synthetic_pattern(a->pattern);
      spec.num_tokens = a->synthetic;
      spec.vocab = a->vocab;
      spec.period = a->period;
      spec.seed = a->seed;
      tokens = synthetic_tokens(spec);
      what = "synthetic " + a->pattern + " -> ";
    }
    write_token_file(a->out, tokens);
    return report(*a, a->out, what);
  });
}

}  // namespace eth::cli
