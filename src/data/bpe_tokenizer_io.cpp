// Reading tokenizer.json into a BpeTokenizer: every field `tokenizers` would act on is either
// understood or refused, so ETH's ids cannot silently differ from the library's.
#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "data/bpe_tokenizer.h"

namespace eth {

namespace {

bool is_null_or_absent(const JsonCursor& obj, std::string_view key) {
  const auto v = obj.find(key);
  return !v || v->value().is_null();
}

// Requires obj[key], when present and not null, to equal `allowed` (a JSON value).
void require_value(const JsonCursor& obj, std::string_view key, const Json& allowed,
                   const std::string& why) {
  const auto v = obj.find(key);
  if (!v || v->value().is_null() || v->value() == allowed) return;
  v->fail(json_brief(allowed) + " or null (" + why + ")");
}

std::string type_of(const JsonCursor& obj) {
  obj.require_object();
  const auto t = obj.find("type");
  if (!t) obj.fail_detail("missing \"type\"");
  return t->as_string();
}

PreTokenizerStep parse_step(const JsonCursor& c) {
  const std::string type = type_of(c);
  PreTokenizerStep s;
  if (type == "ByteLevel") {
    c.allow_only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    s.byte_level = true;
    s.add_prefix_space = c.at("add_prefix_space").as_bool();
    const auto r = c.find("use_regex");
    s.use_regex = !r || r->as_bool();  // `tokenizers` defaults to true
    return s;
  }
  if (type == "Split") {
    c.allow_only({"type", "pattern", "behavior", "invert"});
    const JsonCursor pat = c.at("pattern");
    pat.require_object();
    pat.allow_only({"Regex", "String"});
    const auto regex = pat.find("Regex");
    if (!regex) pat.fail("{\"Regex\": ...} (a literal String split is not supported)");
    const std::string text = regex->as_string();
    const auto known = find_split_pattern(text);
    if (!known) {
      regex->fail_detail(
          "unknown pre-tokenizer regex: ETH matches only the GPT-2, Llama-3 and Qwen2 patterns "
          "(hand-coded, docs/tokenizers.md), got \"" + text + "\"");
    }
    s.pattern = *known;
    if (const std::string b = c.at("behavior").as_string(); b != "Isolated") {
      c.at("behavior").fail("\"Isolated\" (the only split behavior ETH supports)");
    }
    if (c.at("invert").as_bool()) c.at("invert").fail("false");
    return s;
  }
  c.at("type").fail_detail("unsupported pre-tokenizer \"" + type +
                           "\": ETH reads ByteLevel, Split (known regexes) and a Sequence of them");
}

std::vector<PreTokenizerStep> parse_pre_tokenizer(const JsonCursor& root) {
  const auto c = root.find("pre_tokenizer");
  if (!c || c->value().is_null()) {
    root.fail_detail("pre_tokenizer: missing; a byte-level BPE needs a ByteLevel pre-tokenizer");
  }
  std::vector<PreTokenizerStep> steps;
  std::vector<std::string> paths;
  if (type_of(*c) == "Sequence") {
    c->allow_only({"type", "pretokenizers"});
    const JsonCursor list = c->at("pretokenizers");
    for (std::size_t i = 0; i < list.size(); ++i) {
      steps.push_back(parse_step(list[i]));
      paths.push_back(list[i].path());
    }
  } else {
    steps.push_back(parse_step(*c));
    paths.push_back(c->path());
  }
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].byte_level && i + 1 != steps.size()) {
      throw InputError("data", root.origin().source, paths[i],
                       "ByteLevel must be the last pre-tokenizer (ETH splits raw bytes, not "
                       "byte-level characters)");
    }
  }
  if (steps.empty() || !steps.back().byte_level) {
    c->fail_detail("a byte-level BPE needs a ByteLevel pre-tokenizer (the last of a Sequence)");
  }
  return steps;
}

// Token text -> bytes; false when some character stands for no byte (such a token can never be
// produced from bytes, but still decodes to its UTF-8).
bool token_to_bytes(std::string_view text, std::string& bytes) {
  bytes.clear();
  bool all = true;
  for (std::size_t i = 0; i < text.size();) {
    const CodePoint c = decode_utf8(text, i);
    const int b = byte_level_byte(c.cp);
    if (b >= 0) {
      bytes += static_cast<char>(b);
    } else {
      bytes.append(text.substr(i, c.bytes));
      all = false;
    }
    i += c.bytes;
  }
  return all;
}

std::pair<std::string, std::string> merge_parts(const JsonCursor& m) {
  if (m.is_array()) {
    if (m.size() != 2) m.fail("a pair of tokens [\"a\", \"b\"]");
    return {m[0].as_string(), m[1].as_string()};
  }
  if (!m.is_string()) m.fail("\"a b\" or [\"a\", \"b\"]");
  const std::string s = m.as_string();
  const std::size_t sp = s.find(' ');
  if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos || sp == 0 ||
      sp + 1 == s.size()) {
    m.fail("two tokens separated by one space, \"a b\"");
  }
  return {s.substr(0, sp), s.substr(sp + 1)};
}

}  // namespace

void BpeTokenizer::read_merges(const JsonCursor& merges, const StringMap<std::uint32_t>& ids) {
  const std::size_t num_merges = merges.size();
  if (num_merges >= std::numeric_limits<std::uint32_t>::max()) merges.fail("fewer merges");
  merges_.reserve(num_merges);
  for (std::size_t i = 0; i < num_merges; ++i) {
    const JsonCursor m = merges[i];
    const auto [a, b] = merge_parts(m);
    const auto ia = ids.find(a), ib = ids.find(b), iab = ids.find(a + b);
    for (const auto& [it, what] : {std::pair{ia, &a}, std::pair{ib, &b}}) {
      if (it == ids.end()) m.fail_detail("token \"" + *what + "\" is not in model.vocab");
    }
    if (iab == ids.end()) m.fail_detail("the merged token \"" + a + b + "\" is not in model.vocab");
    // As in `tokenizers`, a pair listed twice keeps its last rank.
    merges_[pair_key(ia->second, ib->second)] = {static_cast<std::uint32_t>(i), iab->second};
  }
}

void BpeTokenizer::read_added_tokens(const std::vector<JsonCursor>& list,
                                     const StringMap<std::uint32_t>& ids, std::int64_t max_id) {
  for (const JsonCursor& c : list) {
    c.require_object();
    c.allow_only({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    AddedToken a;
    a.id = static_cast<std::uint32_t>(c.at("id").as_int(0, max_id));
    a.content = c.at("content").as_string();
    if (a.content.empty()) c.at("content").fail("a non-empty string");
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      if (const auto f = c.find(flag); f && f->as_bool()) {
        f->fail_detail(std::string("ETH does not support added tokens with ") + flag + " = true");
      }
    }
    a.normalized = c.find("normalized") && c.at("normalized").as_bool();
    a.special = c.find("special") && c.at("special").as_bool();
    // An id the vocabulary already gives another text would make that token decode to this
    // content: refused (real files repeat the vocabulary's own text, or use a new id).
    if (const auto v = ids.find(a.content); v == ids.end() || v->second != a.id) {
      if (!bytes_of_[a.id].empty()) {
        c.at("id").fail_detail("id " + std::to_string(a.id) +
                               " belongs to another token of model.vocab");
      }
    }
    for (const AddedToken& o : added_) {
      if (o.content == a.content) c.at("content").fail_detail("\"" + a.content + "\" is added twice");
    }
    bytes_of_[a.id] = a.content;
    vocab_size_ = std::max(vocab_size_, a.id + 1);
    added_.push_back(std::move(a));
  }
  for (std::uint32_t k = 0; k < added_.size(); ++k) {
    const AddedToken& a = added_[k];
    added_by_first_[a.normalized ? 1 : 0][static_cast<unsigned char>(a.content[0])].push_back(k);
    added_starts_[a.normalized ? 1 : 0][static_cast<unsigned char>(a.content[0])] = true;
  }
  for (auto& pass : added_by_first_) {
    for (auto& cands : pass) {
      std::stable_sort(cands.begin(), cands.end(), [&](std::uint32_t x, std::uint32_t y) {
        return added_[x].content.size() > added_[y].content.size();
      });
    }
  }
}

BpeTokenizer BpeTokenizer::load(const std::filesystem::path& path) {
  return from_json(read_json_file(path, "data"), path.string());
}

BpeTokenizer BpeTokenizer::from_json(const Json& doc, const std::string& source) {
  const JsonCursor root(doc, {"data", source, ""});
  root.require_object();
  root.allow_only({"version", "truncation", "padding", "added_tokens", "normalizer",
                   "pre_tokenizer", "post_processor", "decoder", "model"});
  BpeTokenizer t;
  const JsonCursor model = root.at("model");
  if (const std::string type = type_of(model); type != "BPE") {
    model.at("type").fail_detail("unsupported model type \"" + type +
                                 "\": ETH reads byte-level BPE tokenizers (\"BPE\") only");
  }
  model.allow_only({"type", "dropout", "unk_token", "continuing_subword_prefix",
                    "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges", "vocab",
                    "merges"});
  require_value(model, "dropout", 0, "ETH encodes deterministically");
  require_value(model, "continuing_subword_prefix", "", "byte-level BPE has none");
  require_value(model, "end_of_word_suffix", "", "byte-level BPE has none");
  require_value(model, "byte_fallback", false, "a SentencePiece-style option");
  if (const auto u = model.find("unk_token"); u && !u->value().is_null()) (void)u->as_string();
  if (const auto f = model.find("fuse_unk"); f && !f->value().is_null()) (void)f->as_bool();
  if (const auto g = model.find("ignore_merges"); g && !g->value().is_null()) {
    t.ignore_merges_ = g->as_bool();
  }
  if (!is_null_or_absent(root, "normalizer")) {
    const JsonCursor n = root.at("normalizer");
    n.fail_detail("unsupported normalizer" +
                  (n.is_object() && n.find("type") ? " \"" + n.at("type").as_string() + "\"" : "") +
                  ": ETH reads tokenizers without one (null), as GPT-2's and Llama-3's are");
  }
  t.steps_ = parse_pre_tokenizer(root);
  if (!is_null_or_absent(root, "decoder")) {
    const JsonCursor d = root.at("decoder");
    if (const std::string type = type_of(d); type != "ByteLevel") {
      d.at("type").fail_detail("unsupported decoder \"" + type + "\": expected ByteLevel");
    }
    d.allow_only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
  }

  // Added tokens first: their count bounds the ids (ids are dense in every real file; a bound
  // keeps a hostile id of 2^31 from allocating gigabytes).
  std::vector<JsonCursor> added_list;
  if (!is_null_or_absent(root, "added_tokens")) {
    const JsonCursor a = root.at("added_tokens");
    for (std::size_t i = 0; i < a.size(); ++i) added_list.push_back(a[i]);
  }
  const JsonCursor vocab = model.at("vocab");
  vocab.require_object();
  const auto entries = vocab.members();
  const std::int64_t max_id = static_cast<std::int64_t>(entries.size() + added_list.size()) - 1;
  t.bytes_of_.assign(static_cast<std::size_t>(std::max<std::int64_t>(max_id + 1, 0)), {});
  StringMap<std::uint32_t> ids;  // token text -> id
  ids.reserve(entries.size());
  std::string bytes;
  for (const auto& [text, cur] : entries) {
    const auto id = static_cast<std::uint32_t>(cur.as_int(0, max_id));
    if (text.empty()) cur.fail_detail("empty token");
    if (!t.bytes_of_[id].empty()) {
      cur.fail_detail("id " + std::to_string(id) + " is given to two tokens");
    }
    const bool mapped = token_to_bytes(text, bytes);
    t.bytes_of_[id] = bytes;
    if (mapped) t.whole_.emplace(bytes, id);
    ids.emplace(text, id);
    t.vocab_size_ = std::max(t.vocab_size_, id + 1);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string ch = byte_level_text(std::string(1, static_cast<char>(b)));
    const auto it = ids.find(ch);
    if (it == ids.end()) {
      vocab.fail_detail("no token for byte " + std::to_string(b) + " (\"" + ch +
                        "\"): a byte-level vocabulary holds all 256 bytes");
    }
    t.byte_id_[b] = it->second;
  }

  t.read_merges(model.at("merges"), ids);
  t.read_added_tokens(added_list, ids, max_id);
  t.bytes_of_.resize(t.vocab_size_);
  return t;
}

}  // namespace eth
