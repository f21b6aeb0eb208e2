// `eth data`: make token files in llm.c's format: from a text file with the byte-level tokenizer
// or a Hugging Face byte-level BPE tokenizer.json (--tokenizer), or a synthetic learnable
// sequence for tests and demos; learn a BPE tokenizer from a text (--train-tokenizer); turn a
// token file back into text (--decode); `--info` describes an existing file.
#include <climits>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/resources.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "data/bpe_tokenizer.h"
#include "data/bpe_train.h"
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
  std::string tokenizer;
  std::string decode;
  bool train_tokenizer = false;
  std::vector<std::string> special = {"<|endoftext|>"};
  std::string pretokenizer = "gpt2";
  Format format = Format::Text;
};

// Facts about how a token file was made, printed beside the file's own description.
struct Made {
  std::string what;  // "tokenized X (bytes) -> "
  Json extra = Json::object();
};

int report(const DataArgs& a, const std::string& path, const Made& m) {
  const TokenFile f = TokenFile::open(path);
  if (a.format == Format::Json) {
    Json j{{"file", path},
           {"tokens", f.size()},
           {"max_token", f.max_token()},
           {"bytes_per_token", f.tokens().bytes_per_token()},
           {"source", m.what}};
    j.update(m.extra);
    print_json(j);
  } else {
    std::cout << m.what << path << ": " << f.size()
              << (f.version() == kTokenFileVersionWide ? " tokens (32-bit ids)" : " tokens")
              << ", largest token id " << f.max_token() << " (a model needs vocab > "
              << f.max_token() << ")\n";
    if (const auto r = m.extra.find("invalid_utf8_replaced"); r != m.extra.end() && *r != 0) {
      std::cout << "  " << r->get<std::int64_t>()
                << " invalid UTF-8 sequences were replaced by U+FFFD (as Python's "
                   "errors=\"replace\")\n";
    }
  }
  return kExitOk;
}

std::string read_text_input(const std::string& path, double bytes_per_byte,
                            const std::string& what) {
  std::error_code ec;
  const auto bytes = static_cast<double>(std::filesystem::file_size(path, ec));
  check_memory(bytes_per_byte * bytes, what, "--text",
               "split the text and make one token file per part");
  return read_text_file(path, "data", INT32_MAX);
}

int encode_with_tokenizer(const DataArgs& a) {
  const BpeTokenizer tok = BpeTokenizer::load(a.tokenizer);  // refusals before the text is read
  // Text, its repaired copy, up to one 4-byte id per byte and the narrowed copy.
  const std::string raw = read_text_input(a.text, 8, "the text and its tokens");
  std::string text;
  const std::int64_t replaced = repair_utf8(raw, text);
  std::vector<std::uint32_t> ids;
  BpeEncoder(tok).encode(text, ids);
  write_token_file(a.out, ids, tok.vocab_size());
  Made m{"tokenized " + a.text + " (BPE " + a.tokenizer + ", vocab " +
             std::to_string(tok.vocab_size()) + ") -> ",
         {{"tokenizer", a.tokenizer},
          {"vocab_size", tok.vocab_size()},
          {"text_bytes", raw.size()},
          {"invalid_utf8_replaced", replaced}}};
  return report(a, a.out, m);
}

int train_tokenizer(const DataArgs& a) {
  if (a.vocab > (std::int64_t{1} << 24)) {
    throw InputError("data", "--vocab", "",
                     "expected at most 16777216 for --train-tokenizer, got " +
                         std::to_string(a.vocab));
  }
  BpeTrainConfig cfg;
  cfg.vocab_size = static_cast<std::uint32_t>(a.vocab);
  cfg.special_tokens = a.special;
  cfg.pattern = a.pretokenizer == "gpt2"     ? SplitPattern::Gpt2
                : a.pretokenizer == "llama3" ? SplitPattern::Llama3
                                             : SplitPattern::Qwen2;
  const std::string raw = read_text_input(a.text, 12, "the text, its words and their counts");
  std::string text;
  const std::int64_t replaced = repair_utf8(raw, text);
  const BpeTrainResult r = train_bpe(text, cfg);
  AtomicFile out(a.out, "data");
  out.write(r.tokenizer.dump() + "\n");
  out.commit();
  if (a.format == Format::Json) {
    print_json(Json{{"file", a.out},
                    {"vocab_size", r.vocab_size},
                    {"merges", r.num_merges},
                    {"distinct_words", r.num_distinct_words},
                    {"invalid_utf8_replaced", replaced}});
  } else {
    std::cout << "learned a byte-level BPE from " << a.text << " -> " << a.out << ": vocab "
              << r.vocab_size << " (" << a.special.size() << " special, 256 bytes, "
              << r.num_merges << " merges) over " << r.num_distinct_words << " distinct words\n";
    if (r.vocab_size < a.vocab) {
      std::cout << "  fewer than the " << a.vocab
                << " asked: no pair left that occurs twice; a longer text gives more\n";
    }
  }
  return kExitOk;
}

int decode_tokens(const DataArgs& a) {
  const BpeTokenizer tok = BpeTokenizer::load(a.tokenizer);
  const TokenFile f = TokenFile::open(a.decode);
  if (f.size() > 0 && f.max_token() >= tok.vocab_size()) {
    throw InputError("data", a.decode, "",
                     "token id " + std::to_string(f.max_token()) + " is outside " +
                         a.tokenizer + "'s vocabulary of " + std::to_string(tok.vocab_size()));
  }
  const TokenSpan t = f.tokens();
  std::vector<std::uint32_t> ids(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) ids[i] = t[i];
  const std::string text = tok.decode(ids);
  AtomicFile out(a.out, "data");
  out.write(text);
  out.commit();
  if (a.format == Format::Json) {
    print_json(Json{{"file", a.out}, {"tokens", f.size()}, {"bytes", text.size()}});
  } else {
    std::cout << "decoded " << a.decode << " (" << f.size() << " tokens) with " << a.tokenizer
              << " -> " << a.out << ": " << text.size() << " bytes\n";
  }
  return kExitOk;
}

}  // namespace

void add_data_command(CLI::App& app, Registry& r) {
  auto* sub = app.add_subcommand(
      "data",
      "Make a token file (llm.c format): --text FILE (bytes as tokens, vocabulary 256; with "
      "--tokenizer tokenizer.json, a Hugging Face byte-level BPE) or --synthetic N (a learnable "
      "sequence); --train-tokenizer learns a BPE from --text; --decode F.bin turns tokens back "
      "into text; --info FILE describes one");
  auto a = std::make_shared<DataArgs>();
  auto* text = sub->add_option("--text", a->text,
                               "Text file to tokenize (one token per byte, or --tokenizer's BPE) "
                               "or to learn a tokenizer from")
                   ->check(CLI::ExistingFile);
  auto* syn = sub->add_option("--synthetic", a->synthetic,
                              "Generate this many tokens of a synthetic learnable sequence")
                  ->check(CLI::Range(std::int64_t{1}, std::int64_t{INT32_MAX}));
  auto* info = sub->add_option("--info", a->info, "Describe an existing token file")
                   ->check(CLI::ExistingFile);
  auto* tokenizer = sub->add_option("--tokenizer", a->tokenizer,
                                    "Hugging Face tokenizer.json (byte-level BPE: GPT-2 or "
                                    "Llama-3 style) to encode --text or --decode with")
                        ->check(CLI::ExistingFile);
  auto* decode = sub->add_option("--decode", a->decode,
                                 "Token file to turn back into text (needs --tokenizer)")
                     ->check(CLI::ExistingFile);
  auto* train = sub->add_flag("--train-tokenizer", a->train_tokenizer,
                              "Learn a byte-level BPE of --vocab tokens from --text and write "
                              "it to --out as a tokenizer.json");
  text->excludes(syn)->excludes(info)->excludes(decode);
  syn->excludes(info)->excludes(tokenizer)->excludes(decode)->excludes(train);
  info->excludes(tokenizer)->excludes(decode)->excludes(train);
  train->excludes(tokenizer)->excludes(decode);
  sub->add_option("--pattern", a->pattern,
                  "Synthetic pattern: successor (next token = fixed function of the current one) "
                  "or periodic (a random block of --period tokens, repeated)")
      ->check(CLI::IsMember({"successor", "periodic"}))
      ->capture_default_str();
  sub->add_option("--period", a->period, "Block length of the periodic pattern")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--vocab", a->vocab,
                  "Synthetic tokens are in [0, vocab) (at most 65536); with --train-tokenizer, "
                  "the vocabulary to learn, special tokens and the 256 bytes included")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{INT32_MAX}))
      ->capture_default_str();
  sub->add_option("--special", a->special,
                  "--train-tokenizer: special tokens, ids 0, 1, ... (repeat the flag)")
      ->capture_default_str();
  sub->add_option("--pretokenizer", a->pretokenizer,
                  "--train-tokenizer: the pre-tokenizer regex and file shape: gpt2 (ByteLevel "
                  "with GPT-2's regex), llama3 or qwen2 (a Split, then ByteLevel)")
      ->check(CLI::IsMember({"gpt2", "llama3", "qwen2"}))
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the synthetic sequence")->capture_default_str();
  sub->add_option("--out", a->out,
                  "File to write (atomically): the token file, the tokenizer.json of "
                  "--train-tokenizer, or the text of --decode");
  add_format_option(sub, &a->format);
  r.on(sub, [a, text, syn, info, decode, train] {
    if (!info->empty()) return report(*a, a->info, {});
    if (text->empty() && syn->empty() && decode->empty()) {
      throw UsageError("eth data", "give one of --text FILE, --synthetic N, --decode F.bin, "
                                   "--info FILE");
    }
    if (a->out.empty()) throw UsageError("--out", "missing: the file to write");
    if (!decode->empty() && a->tokenizer.empty()) {
      throw UsageError("--decode", "needs --tokenizer tokenizer.json");
    }
    if (*train && text->empty()) throw UsageError("--train-tokenizer", "needs --text FILE");
    check_output_file(a->out, "data");  // before the work
    if (*train) return train_tokenizer(*a);
    if (!decode->empty()) return decode_tokens(*a);
    if (!a->tokenizer.empty()) return encode_with_tokenizer(*a);
    std::vector<std::uint16_t> tokens;
    Made m;
    if (!text->empty()) {
      // One token per byte, and the file's count is an int32.
      tokens = tokenize_bytes(read_text_input(a->text, 3, "the text and its tokens"));
      m.what = "tokenized " + a->text + " (bytes) -> ";
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
      m.what = "synthetic " + a->pattern + " -> ";
    }
    write_token_file(a->out, tokens);
    return report(*a, a->out, m);
  });
}

}  // namespace eth::cli
