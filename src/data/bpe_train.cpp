// Byte-level BPE training: word counts, then merges by pair frequency with incremental updates
// (only the words holding the merged pair are rewritten) and a lazily corrected max-heap.
#include "data/bpe_train.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/bpe_tokenizer.h"

namespace eth {

namespace {

std::uint64_t key_of(std::uint32_t a, std::uint32_t b) { return (std::uint64_t{a} << 32) | b; }

struct Candidate {
  std::int64_t count;
  std::uint64_t pair;
  // Max-heap: the highest count on top; of equal counts, the pair of lower ids.
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

// The text's pre-tokenized words with their counts, sorted by bytes (so ids do not depend on
// hash order). Special tokens in the text are cut out first, as `tokenizers` does in training.
std::vector<std::pair<std::string, std::int64_t>> count_words(std::string_view text,
                                                              const BpeTrainConfig& cfg) {
  StringMap<std::int64_t> counts;
  std::vector<std::string_view> pieces;
  auto add_gap = [&](std::string_view gap) {
    pieces.clear();
    split_text(cfg.pattern, gap, pieces);
    for (const std::string_view p : pieces) {
      const auto it = counts.find(p);
      if (it != counts.end()) {
        ++it->second;
      } else {
        counts.emplace(std::string(p), 1);
      }
    }
  };
  std::size_t gap = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::size_t longest = 0;
    for (const std::string& s : cfg.special_tokens) {
      if (s.size() > longest && text.compare(i, s.size(), s) == 0) longest = s.size();
    }
    if (longest == 0) continue;
    add_gap(text.substr(gap, i - gap));
    i += longest - 1;
    gap = i + 1;
  }
  add_gap(text.substr(std::min(gap, text.size())));
  std::vector<std::pair<std::string, std::int64_t>> words(counts.begin(), counts.end());
  std::sort(words.begin(), words.end());
  return words;
}

Json pre_tokenizer_json(SplitPattern p) {
  Json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", p == SplitPattern::Gpt2}};
  if (p == SplitPattern::Gpt2) return byte_level;
  Json split = {{"type", "Split"},
                {"pattern", {{"Regex", std::string(split_pattern_regex(p))}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", Json::array({split, byte_level})}};
}

Json tokenizer_json(const BpeTrainConfig& cfg, const std::vector<std::string>& bytes_of,
                    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& merges) {
  Json added = Json::array();
  for (std::size_t i = 0; i < cfg.special_tokens.size(); ++i) {
    added.push_back({{"id", i},
                     {"content", cfg.special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  Json vocab = Json::object();
  std::vector<std::string> text_of(bytes_of.size());
  for (std::size_t id = 0; id < bytes_of.size(); ++id) {
    text_of[id] = id < cfg.special_tokens.size() ? bytes_of[id] : byte_level_text(bytes_of[id]);
    vocab[text_of[id]] = id;
  }
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) merge_list.push_back(text_of[a] + " " + text_of[b]);
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer_json(cfg.pattern)},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

void check_config(const BpeTrainConfig& cfg) {
  std::unordered_set<std::string> seen;
  for (const std::string& s : cfg.special_tokens) {
    if (s.empty()) throw InputError("data", "--special", "", "a special token cannot be empty");
    if (!seen.insert(s).second) {
      throw InputError("data", "--special", "", "\"" + s + "\" is given twice");
    }
  }
  const std::uint64_t least = cfg.special_tokens.size() + 256;
  if (cfg.vocab_size < least) {
    throw InputError("data", "--vocab", "",
                     "expected at least " + std::to_string(least) + " (the " +
                         std::to_string(cfg.special_tokens.size()) +
                         " special tokens and the 256 bytes), got " +
                         std::to_string(cfg.vocab_size));
  }
}

}  // namespace

BpeTrainResult train_bpe(std::string_view text, const BpeTrainConfig& cfg) {
  check_config(cfg);
  const auto words = count_words(text, cfg);
  const auto num_special = static_cast<std::uint32_t>(cfg.special_tokens.size());
  std::vector<std::string> bytes_of(cfg.special_tokens);
  for (int b = 0; b < 256; ++b) bytes_of.emplace_back(1, static_cast<char>(b));
  StringMap<std::uint32_t> id_of;  // merged tokens' bytes -> id

  std::vector<std::vector<std::uint32_t>> syms(words.size());
  std::unordered_map<std::uint64_t, std::int64_t> pair_count;
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> where;  // may repeat a word
  for (std::size_t w = 0; w < words.size(); ++w) {
    for (const char c : words[w].first) {
      syms[w].push_back(num_special + static_cast<unsigned char>(c));
    }
    for (std::size_t i = 0; i + 1 < syms[w].size(); ++i) {
      const std::uint64_t k = key_of(syms[w][i], syms[w][i + 1]);
      pair_count[k] += words[w].second;
      where[k].push_back(static_cast<std::uint32_t>(w));
    }
  }
  std::vector<Candidate> heap;
  for (const auto& [k, n] : pair_count) heap.push_back({n, k});
  std::make_heap(heap.begin(), heap.end());

  std::vector<std::pair<std::uint32_t, std::uint32_t>> merges;
  std::vector<std::uint32_t> rewritten;
  std::unordered_set<std::uint64_t> new_pairs;
  while (bytes_of.size() < cfg.vocab_size && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate top = heap.back();
    heap.pop_back();
    const std::int64_t now = pair_count[top.pair];
    if (now != top.count) {  // stale: counts only fall for pairs not holding a new token
      if (now > 0) {
        heap.push_back({now, top.pair});
        std::push_heap(heap.begin(), heap.end());
      }
      continue;
    }
    if (now < cfg.min_frequency) break;
    const auto a = static_cast<std::uint32_t>(top.pair >> 32);
    const auto b = static_cast<std::uint32_t>(top.pair & 0xFFFFFFFFu);
    // Two merge paths can spell the same bytes ("ab"+"c", "a"+"bc"): one token, as in
    // `tokenizers`, so the vocabulary has no key twice.
    std::string joined = bytes_of[a] + bytes_of[b];
    auto [known, added] = id_of.emplace(joined, static_cast<std::uint32_t>(bytes_of.size()));
    const std::uint32_t id = known->second;
    if (added) bytes_of.push_back(std::move(joined));
    merges.emplace_back(a, b);
    std::vector<std::uint32_t> ws = std::move(where[top.pair]);
    where.erase(top.pair);
    std::sort(ws.begin(), ws.end());
    ws.erase(std::unique(ws.begin(), ws.end()), ws.end());
    new_pairs.clear();
    for (const std::uint32_t w : ws) {
      auto& s = syms[w];
      const std::int64_t f = words[w].second;
      rewritten.clear();
      for (std::size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          rewritten.push_back(id);
          ++i;
        } else {
          rewritten.push_back(s[i]);
        }
      }
      if (rewritten.size() == s.size()) continue;  // a stale entry of `where`
      for (std::size_t i = 0; i + 1 < s.size(); ++i) pair_count[key_of(s[i], s[i + 1])] -= f;
      for (std::size_t i = 0; i + 1 < rewritten.size(); ++i) {
        const std::uint64_t k = key_of(rewritten[i], rewritten[i + 1]);
        pair_count[k] += f;
        if (rewritten[i] == id || rewritten[i + 1] == id) {
          where[k].push_back(w);
          new_pairs.insert(k);
        }
      }
      s.swap(rewritten);
    }
    pair_count.erase(top.pair);
    std::vector<std::uint64_t> fresh(new_pairs.begin(), new_pairs.end());
    std::sort(fresh.begin(), fresh.end());
    for (const std::uint64_t k : fresh) {
      heap.push_back({pair_count[k], k});
      std::push_heap(heap.begin(), heap.end());
    }
  }
  BpeTrainResult r;
  r.tokenizer = tokenizer_json(cfg, bytes_of, merges);
  r.vocab_size = static_cast<std::uint32_t>(bytes_of.size());
  r.num_merges = merges.size();
  r.num_distinct_words = words.size();
  return r;
}

}  // namespace eth
