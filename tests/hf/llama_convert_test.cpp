// Llama conversion against transformers' own files and numbers (tests/data/hf/llama_*, made by
// tools/make_hf_fixtures.py): export of an import reproduces every tensor and the config bit
// for bit (fp32, bf16, sharded, tied); single and sharded files give one checkpoint; under
// multi-head attention the grouped qkv rows are exactly GPT-2's head-interleaved ones, whose
// mapping the GPT-2 fixtures check against transformers' loss; after import ETH's forward
// gives the loss transformers computed; bad folders are refused by name before anything is
// written.
#include "hf/llama_convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "hf/convert.h"
#include "hf/evaluate.h"
#include "hf_test_util.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace eth::hf::llama_convert_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

fs::path converted(const std::string& model) {
  const fs::path out = test::scratch("hf_llama", "convert") / (model + ".safetensors");
  convert_any_from_hf(kData / model, out, true);
  return out;
}

// The mapping alone, tensor by tensor: HF values into their ETH tensor and back give the same
// bits, and the q, k and v rows of a layer fill qkv_w exactly once between them.
TEST(LlamaConvert, MappingIsABijectionOnEveryTensor) {
  for (const std::string model : {"llama_f32", "llama_bf16_tied"}) {
    const LlamaSource src = open_llama(kData / model);
    const ModelSpec& m = src.config.model;
    std::vector<std::vector<int>> qkv_hits(static_cast<std::size_t>(m.layers + 1));
    for (const LlamaTensor& t : src.tensors) {
      std::int64_t n = 1;
      for (std::int64_t d : t.hf_shape) n *= d;
      std::vector<float> hf(static_cast<std::size_t>(n)), back(hf.size(), -1.0f);
      src.weights->read_f32(t.hf_name, hf.data());
      const TensorDesc desc = unit_tensors(m, t.unit)[static_cast<std::size_t>(t.tensor)];
      std::vector<float> eth(static_cast<std::size_t>(desc.numel()), std::nanf(""));
      llama_to_eth(m, t, hf.data(), eth.data());
      eth_to_llama(m, t, eth.data(), back.data());
      EXPECT_EQ(std::memcmp(hf.data(), back.data(), hf.size() * 4), 0) << t.hf_name;
      if (desc.name != "qkv_w") {
        EXPECT_EQ(desc.numel(), n) << t.hf_name;
        continue;
      }
      auto& hits = qkv_hits[static_cast<std::size_t>(t.unit)];
      hits.resize(static_cast<std::size_t>(desc.numel()));
      for (std::size_t i = 0; i < eth.size(); ++i) hits[i] += std::isnan(eth[i]) ? 0 : 1;
    }
    for (std::int64_t u = 1; u <= m.layers; ++u) {
      const auto& hits = qkv_hits[static_cast<std::size_t>(u)];
      ASSERT_EQ(static_cast<std::int64_t>(hits.size()), (m.hidden + 2 * m.kv_dim()) * m.hidden);
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; })) << u;
    }
  }
}

// The grouped layout written out for the GQA fixture (G = 2 query heads per kv head, hd 8):
// group g holds q heads 2g and 2g+1, then k_g, then v_g.
TEST(LlamaConvert, GqaRowsAreGroupedPerKeyValueHead) {
  const LlamaSource src = open_llama(kData / "llama_f32");
  const ModelSpec& m = src.config.model;
  ASSERT_EQ(m.heads, 4);
  ASSERT_EQ(m.num_kv_heads(), 2);
  const std::int64_t C = 32, hd = 8;
  std::vector<float> qkv(static_cast<std::size_t>((C + 2 * 16) * C));
  std::vector<float> q(static_cast<std::size_t>(C * C)), k(16 * C), v(16 * C);
  for (const LlamaTensor& t : src.tensors) {
    if (t.unit != 2) continue;
    if (t.hf_name.ends_with("q_proj.weight")) src.weights->read_f32(t.hf_name, q.data());
    if (t.hf_name.ends_with("k_proj.weight")) src.weights->read_f32(t.hf_name, k.data());
    if (t.hf_name.ends_with("v_proj.weight")) src.weights->read_f32(t.hf_name, v.data());
    if (t.map == LlamaTensor::Map::Q || t.map == LlamaTensor::Map::K ||
        t.map == LlamaTensor::Map::V) {
      std::vector<float> hf(static_cast<std::size_t>(t.hf_shape[0] * C));
      src.weights->read_f32(t.hf_name, hf.data());
      llama_to_eth(m, t, hf.data(), qkv.data());
    }
  }
  // ETH row blocks of hd rows, in order: q0 q1 k0 v0 q2 q3 k1 v1.
  const std::vector<std::pair<const std::vector<float>*, std::int64_t>> blocks = {
      {&q, 0}, {&q, 1}, {&k, 0}, {&v, 0}, {&q, 2}, {&q, 3}, {&k, 1}, {&v, 1}};
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const float* want = blocks[b].first->data() + blocks[b].second * hd * C;
    EXPECT_EQ(std::memcmp(qkv.data() + static_cast<std::int64_t>(b) * hd * C, want,
                          static_cast<std::size_t>(hd * C) * 4),
              0)
        << "block " << b;
  }
}

// Through a Llama ModelState and checkpoint (train/model_state.h, train/checkpoint.h).
TEST(LlamaCheckpoint, ExportOfAnImportReproducesEveryTensorBitForBit) {
  for (const std::string model : {"llama_f32", "llama_f32_sharded", "llama_bf16_tied"}) {
    const fs::path ckpt = converted(model);
    const fs::path out = test::scratch("hf_llama", "export_" + model);
    fs::remove_all(out);
    const ConvertReport r = convert_any_to_hf(ckpt, out, "auto", false);
    EXPECT_EQ(r.tied, model == "llama_bf16_tied") << model;
    EXPECT_EQ(r.dtype, model == "llama_bf16_tied" ? "BF16" : "F32") << model;
    test::expect_same_tensors(kData / model, out);  // the sharded one exported as one file
    EXPECT_EQ(read_json_file(out / "config.json", "test"),
              read_json_file(kData / model / "config.json", "test"))
        << model;
    // Exported again over itself: refused unless forced.
    EXPECT_THROW(convert_any_to_hf(ckpt, out, "auto", false), InputError);
  }
}

TEST(LlamaCheckpoint, ShardedAndSingleFilesGiveTheSameCheckpoint) {
  EXPECT_EQ(test::read_bytes(converted("llama_f32")),
            test::read_bytes(converted("llama_f32_sharded")));
  const CheckpointMeta meta = read_checkpoint_meta(converted("llama_f32"));
  EXPECT_EQ(meta.step, 0);
  EXPECT_EQ(meta.model, read_llama_config(kData / "llama_f32" / "config.json").model);
  EXPECT_EQ((*meta.run)["hf"]["dtype"], "F32");
}

// Multi-head attention (the tied fixture's 4 of 4 kv heads): ETH's grouped layout is GPT's
// head-interleaved one, so the Llama mapping of q/k/v must equal the GPT-2 mapping of the
// same rows fused and transposed as a GPT-2 c_attn (C, 3C) — an independent permutation,
// checked against transformers by the GPT-2 fixtures' loss.
TEST(LlamaConvert, MultiHeadQkvRowsAreGpt2sHeadInterleavedRows) {
  const LlamaSource src = open_llama(kData / "llama_bf16_tied");
  const ModelSpec& m = src.config.model;
  ASSERT_EQ(m.num_kv_heads(), m.heads);
  const std::int64_t C = m.hidden;
  std::vector<float> llama_qkv(static_cast<std::size_t>(3 * C * C));
  std::vector<float> c_attn(static_cast<std::size_t>(3 * C * C));
  std::vector<float> rows(static_cast<std::size_t>(C * C));
  int part = 0;
  for (const LlamaTensor& t : src.tensors) {
    if (t.unit != 1 || (t.map != LlamaTensor::Map::Q && t.map != LlamaTensor::Map::K &&
                        t.map != LlamaTensor::Map::V)) {
      continue;
    }
    src.weights->read_f32(t.hf_name, rows.data());
    llama_to_eth(m, t, rows.data(), llama_qkv.data());
    const int p = t.map == LlamaTensor::Map::Q ? 0 : t.map == LlamaTensor::Map::K ? 1 : 2;
    for (std::int64_t o = 0; o < C; ++o) {
      for (std::int64_t i = 0; i < C; ++i) c_attn[i * 3 * C + p * C + o] = rows[o * C + i];
    }
    ++part;
  }
  ASSERT_EQ(part, 3);
  ModelSpec gpt{"g", m.layers, m.hidden, m.heads, m.seq_len, m.vocab, m.ffn};
  const Gpt2Tensor t{"c_attn", {C, 3 * C}, 1, kQkvW, Gpt2Tensor::Map::Qkv};
  std::vector<float> gpt_qkv(c_attn.size());
  gpt2_to_eth(gpt, t, c_attn.data(), gpt_qkv.data());
  EXPECT_EQ(llama_qkv, gpt_qkv);
}

double eval_loss(const fs::path& ckpt) {
  const CheckpointMeta meta = read_checkpoint_meta(ckpt);
  ModelState state(meta.model, 0, meta.model.num_units() - 1);
  load_checkpoint(ckpt, state);
  EvalConfig cfg;
  cfg.seq_len = test::hf_expected("llama_expected.json")["seq_len"].get<std::int64_t>();
  cfg.batch = 4;
  return evaluate(state, TokenFile::open(kData / "llama_batch.bin"), cfg).loss;
}

// fp16 out and back in: the export rounds each fp32 value to nearest fp16, and re-importing
// that folder and exporting it again writes the same bits (every fp16 value is exact in fp32).
TEST(LlamaCheckpoint, Fp16ExportRoundsOnceAndRoundTrips) {
  const fs::path ckpt = converted("llama_f32");
  const fs::path a = test::scratch("hf_llama", "f16_a"), b = test::scratch("hf_llama", "f16_b");
  fs::remove_all(a);
  fs::remove_all(b);
  convert_any_to_hf(ckpt, a, "fp16", false);
  const fs::path again = test::scratch("hf_llama", "convert") / "f16.safetensors";
  convert_any_from_hf(a, again, true);
  EXPECT_EQ((*read_checkpoint_meta(again).run)["hf"]["dtype"], "F16");
  convert_any_to_hf(again, b, "auto", false);
  test::expect_same_tensors(a, b);
  const SafetensorsModel src(kData / "llama_f32"), half(a);
  std::vector<float> x(128 * 32), y(x.size());
  src.read_f32("lm_head.weight", x.data());
  half.read_f32("lm_head.weight", y.data());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(y[i], f32_from_f16(f16_from_f32(x[i]))) << i;
  }
}

// A Llama model ETH trained from scratch (no recorded config): the export's config reads back
// to the same model, and importing the export gives the same parameters bit for bit.
TEST(LlamaCheckpoint, FromScratchModelExportsAndReimports) {
  ModelSpec m = model_preset("llama-tiny");
  m.tied_embeddings = true;
  ModelState state(m, 0, m.num_units() - 1);
  state.init(5);
  const fs::path dir = test::scratch("hf_llama", "scratch");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CheckpointMeta meta;
  meta.model = m;
  meta.step = 7;
  meta.schedule = Json::object();
  meta.data = Json::object();
  meta.run = Json::object();
  write_checkpoint(dir / "ckpt.safetensors", state, meta);
  const ConvertReport r = convert_any_to_hf(dir / "ckpt.safetensors", dir / "hf", "auto", false);
  EXPECT_EQ(r.dtype, "F32");
  EXPECT_TRUE(r.tied);
  ModelSpec back = read_llama_config(dir / "hf" / "config.json").model;
  EXPECT_EQ(back.name, "hf-llama");
  back.name = m.name;
  EXPECT_EQ(back, m);
  convert_any_from_hf(dir / "hf", dir / "again.safetensors", false);
  ModelState again(read_checkpoint_meta(dir / "again.safetensors").model, 0, m.num_units() - 1);
  load_checkpoint(dir / "again.safetensors", again);
  ASSERT_EQ(again.numel(), state.numel());
  const auto bytes = static_cast<std::size_t>(state.numel()) * 4;
  EXPECT_EQ(std::memcmp(again.params(), state.params(), bytes), 0);
}

// ETH's forward on the converted weights against transformers' loss on the same batch: holds
// only if every tensor, the q/k/v grouping, the transposes, RMSNorm's epsilon and the rotary
// base land right. The multi-head tied fixture (bf16 values, evaluated in fp32 by both).
TEST(LlamaCheckpoint, Fp32LossEqualsTransformersMultiHeadTied) {
  const double want =
      test::hf_expected("llama_expected.json")["models"]["llama_bf16_tied"]["loss"].get<double>();
  EXPECT_GT(std::fabs(want - std::log(128.0)), 0.3);  // far from uniform: every tensor matters
  EXPECT_NEAR(eval_loss(converted("llama_bf16_tied")), want, 1e-5);
}

// The grouped-query fixture (2 kv heads, untied): the q/k/v grouping as ETH's attention reads it.
TEST(LlamaCheckpoint, Fp32LossEqualsTransformersGroupedQuery) {
  const double want =
      test::hf_expected("llama_expected.json")["models"]["llama_f32"]["loss"].get<double>();
  EXPECT_GT(std::fabs(want - std::log(128.0)), 0.3);
  EXPECT_NEAR(eval_loss(converted("llama_f32")), want, 1e-5);
}

// A copy of a fixture folder with config.json edited and the weights rewritten by `edit`.
fs::path edited_copy(const std::string& name, const std::function<void(Json&)>& config,
                     const std::function<void(std::vector<TensorOut>&)>& tensors) {
  const fs::path dir = test::scratch("hf_llama", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  Json cfg = read_json_file(kData / "llama_f32" / "config.json", "test");
  config(cfg);
  test::write(dir / "config.json", cfg.dump());
  const SafetensorsFile src(kData / "llama_f32" / "model.safetensors");
  std::vector<TensorOut> outs;
  for (const TensorInfo& t : src.tensors()) outs.push_back({t.name, t.dtype, t.shape});
  tensors(outs);
  write_safetensors(dir / "model.safetensors", outs, {{"format", "pt"}},
                    [&](std::size_t, std::span<float> v) { std::fill(v.begin(), v.end(), 0.5f); });
  return dir;
}

TEST(LlamaConvert, BadFoldersAreRefusedByNameBeforeAnythingIsWritten) {
  auto none = [](auto&) {};
  struct Case {
    fs::path dir;
    const char* field;
    const char* phrase;
  };
  const std::vector<Case> cases = {
      {edited_copy("no_k", none,
                   [](std::vector<TensorOut>& o) {
                     std::erase_if(o, [](const TensorOut& t) {
                       return t.name == "model.layers.1.self_attn.k_proj.weight";
                     });
                   }),
       "model.layers.1.self_attn.k_proj.weight", "missing tensor"},
      {edited_copy("mha_config", [](Json& j) { j["num_key_value_heads"] = 4; }, none),
       "model.layers.0.self_attn.k_proj.weight.shape", "expected [32, 32] from config.json"},
      {edited_copy("bias", none,
                   [](std::vector<TensorOut>& o) {
                     o.push_back({"model.layers.0.self_attn.q_proj.bias", Dtype::F32, {32}});
                   }),
       "model.layers.0.self_attn.q_proj.bias", "unexpected tensor"},
      {edited_copy("untied_no_head", [](Json&) {},
                   [](std::vector<TensorOut>& o) {
                     std::erase_if(o,
                                   [](const TensorOut& t) { return t.name == "lm_head.weight"; });
                   }),
       "lm_head.weight", "tie_word_embeddings false"},
      {edited_copy("scaled", [](Json& j) { j["rope_parameters"]["rope_type"] = "yarn"; }, none),
       "rope_parameters", "\"yarn\""},
      {edited_copy("mistral", [](Json& j) { j["model_type"] = "mistral"; }, none), "model_type",
       "ETH converts \"gpt2\" (GPT2LMHeadModel) and \"llama\""},
  };
  for (const Case& c : cases) {
    const fs::path out = c.dir / "out" / "ckpt.safetensors";
    test::expect_refused(c.dir.string(), [&] { convert_any_from_hf(c.dir, out, false); }, "",
                         c.field, c.phrase);
    EXPECT_FALSE(fs::exists(c.dir / "out")) << c.dir;
  }
}

// A model of neither family (GPT's blocks with grouped-query attention, which GPT2LMHeadModel
// cannot express) is refused by the export before anything is written.
TEST(LlamaConvert, ExportRefusesAModelOfNeitherFamily) {
  ModelSpec m = model_preset("tiny");
  m.kv_heads = 2;
  ModelState state(m, 0, m.num_units() - 1);
  const fs::path dir = test::scratch("hf_llama", "mixed");
  fs::remove_all(dir);
  fs::create_directories(dir);
  CheckpointMeta meta;
  meta.model = m;
  meta.schedule = Json::object();
  meta.data = Json::object();
  meta.run = Json::object();
  write_checkpoint(dir / "ckpt.safetensors", state, meta);
  try {
    convert_any_to_hf(dir / "ckpt.safetensors", dir / "out", "auto", false);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "model") << e.what();
    EXPECT_NE(std::string(e.what()).find("neither GPT-2's"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// Loaded tied: the one embedding is both ETH copies; an imported model trained and exported
// stays tied (no lm_head.weight), as transformers saves a tied model.
TEST(LlamaCheckpoint, TiedEmbeddingFillsBothCopies) {
  const LlamaSource src = open_llama(kData / "llama_bf16_tied");
  const ModelSpec& m = src.config.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_llama(src, state);
  const std::int64_t n = m.vocab * m.hidden;
  const float* wte = state.params() + state.layout().offset(0, 0);
  const float* head = state.params() + state.layout().offset(m.layers + 1, 1);
  EXPECT_EQ(std::memcmp(wte, head, static_cast<std::size_t>(n) * 4), 0);
  std::vector<float> emb(static_cast<std::size_t>(n));
  src.weights->read_f32("model.embed_tokens.weight", emb.data());
  EXPECT_EQ(std::memcmp(wte, emb.data(), emb.size() * 4), 0);
}

}  // namespace
}  // namespace eth::hf::llama_convert_test
