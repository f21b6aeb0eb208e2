// Tokenizer throughput on one core: the byte tokenizer (the baseline: a copy), the pre-tokenizer
// alone, and byte-level BPE encoding (a fresh encoder per run, so its word cache starts empty)
// with the GPT-2-style and Llama-3-style fixture tokenizers (tests/data/tokenizer), on the
// Debian licence texts repeated to about 8 MB. Figures are MB of UTF-8 text per second of this
// thread's CPU time (the machine is shared: wall-clock rates fall with the load, CPU-time rates
// much less), the median of 3 runs, printed beside the machine's CPU model and load.
// Usage: tokenizer_bench [--format text|json]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "data/bpe_tokenizer.h"
#include "data/pretokenize.h"
#include "data/tokenize.h"

namespace {

using namespace eth;

std::string licence_text() {
  std::string all;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/common-licenses")) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    all += ss.str();
  }
  std::string text;
  while (!all.empty() && text.size() < (std::size_t{8} << 20)) text += all;
  std::string fixed;
  repair_utf8(text, fixed);
  return fixed;
}

template <class F>
double mb_per_s(std::size_t bytes, F&& f) {
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    const double s = static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec);
    rates.push_back(static_cast<double>(bytes) / 1e6 / std::max(s, 1e-9));
  }
  return bench::median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
      json = std::strcmp(argv[++i], "json") == 0;
    } else {
      std::fprintf(stderr, "usage: tokenizer_bench [--format text|json]\n");
      return 2;
    }
  }
  const std::string text = licence_text();
  if (text.empty()) {
    std::fprintf(stderr, "tokenizer_bench: no text under /usr/share/common-licenses\n");
    return 1;
  }
  Json doc{{"machine", bench::machine_info()}, {"text_bytes", text.size()}};
  std::size_t sink = 0;
  doc["bytes_mb_per_s"] = mb_per_s(text.size(), [&] { sink += tokenize_bytes(text).size(); });
  const std::filesystem::path dir = std::filesystem::path(ETH_BENCH_TOKENIZER_DIR);
  for (const char* style : {"gpt2", "llama3"}) {
    const BpeTokenizer tok = BpeTokenizer::load(dir / (std::string(style) + "_style.json"));
    std::vector<std::string_view> pieces;
    const SplitPattern p = tok.pre_tokenizer()[0].byte_level ? SplitPattern::Gpt2
                                                             : tok.pre_tokenizer()[0].pattern;
    const double split = mb_per_s(text.size(), [&] {
      pieces.clear();
      split_text(p, text, pieces);
      sink += pieces.size();
    });
    std::vector<std::uint32_t> ids;
    const double bpe = mb_per_s(text.size(), [&] {
      ids.clear();
      BpeEncoder(tok).encode(text, ids);
      sink += ids.size();
    });
    doc[style] = {{"pre_tokenizer_mb_per_s", split},
                  {"bpe_mb_per_s", bpe},
                  {"tokens", ids.size()},
                  {"bytes_per_token", static_cast<double>(text.size()) / ids.size()}};
  }
  if (json) {
    std::printf("%s\n", doc.dump(1).c_str());
  } else {
    std::printf("%s\n", bench::machine_line(doc["machine"]).c_str());
    std::printf("text: %zu bytes (Debian licences, repeated)\n", text.size());
    std::printf("byte tokenizer (baseline)        %8.1f MB/s of CPU time\n", doc["bytes_mb_per_s"].get<double>());
    for (const char* style : {"gpt2", "llama3"}) {
      const Json& s = doc[style];
      std::printf("%-6s pre-tokenizer alone        %8.1f MB/s\n", style,
                  s["pre_tokenizer_mb_per_s"].get<double>());
      std::printf("%-6s BPE encode (cache cold)    %8.1f MB/s  (%.2f bytes per token)\n", style,
                  s["bpe_mb_per_s"].get<double>(), s["bytes_per_token"].get<double>());
    }
  }
  return sink == 0 ? 1 : 0;
}
