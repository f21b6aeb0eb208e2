// GPT-2 conversion against transformers' own numbers (tests/data/hf, tools/make_hf_fixtures.py):
// after import, ETH's forward gives the loss transformers computed on the fixture batch (which
// only holds if every tensor, the qkv permutation and the transposes land right); export of an
// import reproduces every tensor bit for bit; single and sharded files give one checkpoint;
// eval's batching gives the mean of per-window losses; bad folders are refused by name; the
// tensor mapping itself places every value as gpt2_convert.h's table says.
#include "hf/gpt2_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "data/sampler.h"
#include "hf/evaluate.h"
#include "hf_test_util.h"
#include "test_util.h"
#include "train/precision_stage.h"

namespace eth::hf::gpt2_convert_test {
namespace {

namespace fs = std::filesystem;
const fs::path kData = test::hf_data();

fs::path converted(const std::string& model) {
  const fs::path dir = test::scratch("hf", "convert");
  const fs::path out = dir / (model + ".safetensors");
  convert_from_hf(kData / model, out, true);
  return out;
}

double eval_loss(const fs::path& ckpt, Precision p, std::int64_t batch, std::int64_t batches = 0) {
  const CheckpointMeta meta = read_checkpoint_meta(ckpt);
  ModelState state(meta.model, 0, meta.model.num_units() - 1, 1, 0, p);
  load_checkpoint(ckpt, state);
  EvalConfig cfg;
  cfg.seq_len = test::hf_expected("expected.json")["seq_len"].get<std::int64_t>();
  cfg.batch = batch;
  cfg.max_batches = batches;
  return evaluate(state, TokenFile::open(kData / "batch.bin"), cfg).loss;
}

double fixture_loss(const std::string& model, const char* key = "loss") {
  return test::hf_expected("expected.json")["models"][model][key].get<double>();
}

// The mapping alone, against gpt2_convert.h's table worked out here: Conv1D weights (in, out)
// transposed where ETH stores (out, in), c_attn's columns [q; k; v] to head-interleaved rows
// h*3hs + p*hs + d, everything else as is; and back to the same bits.
TEST(HfConvert, MappingPlacesEveryValueAsTheTableSays) {
  ModelSpec m;
  m.name = "map";
  m.layers = 1;
  m.hidden = 6;
  m.heads = 2;  // hs 3
  m.seq_len = 4;
  m.vocab = 5;
  m.ffn = 8;
  const std::int64_t C = m.hidden, hs = m.head_dim();
  auto interleaved_row = [&](std::int64_t col) {
    const std::int64_t part = col / C, head = (col % C) / hs, d = col % hs;
    return head * 3 * hs + part * hs + d;
  };
  for (const Gpt2Tensor& t : gpt2_tensors(m, false)) {
    std::int64_t n = 1;
    for (std::int64_t d : t.hf_shape) n *= d;
    std::vector<float> hf(static_cast<std::size_t>(n)), eth(hf.size(), -1.0f), back(hf.size());
    for (std::size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i);
    gpt2_to_eth(m, t, hf.data(), eth.data());
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t e = i;  // where HF element i lands in ETH's tensor
      const std::int64_t rows = t.hf_shape[0], cols = t.hf_shape.size() > 1 ? t.hf_shape[1] : 1;
      if (t.map == Gpt2Tensor::Map::Transpose) e = (i % cols) * rows + i / cols;
      if (t.map == Gpt2Tensor::Map::Qkv) {
        e = t.hf_shape.size() == 1 ? interleaved_row(i) : interleaved_row(i % cols) * C + i / cols;
      }
      ASSERT_EQ(eth[static_cast<std::size_t>(e)], hf[static_cast<std::size_t>(i)])
          << t.hf_name << " element " << i;
    }
    eth_to_gpt2(m, t, eth.data(), back.data());
    EXPECT_EQ(back, hf) << t.hf_name;
  }
}

TEST(HfConvert, Fp32LossEqualsTransformers) {
  const fs::path ckpt = converted("gpt2_f32");
  const double want = fixture_loss("gpt2_f32");
  // The fixture's weights are large enough that the loss is far from ln(V) = 5.70: every tensor
  // matters. Batches of 4 (one) and of 3 (3 + 1) average the same 128 predictions.
  EXPECT_GT(std::fabs(want - std::log(300.0)), 0.5);
  EXPECT_NEAR(eval_loss(ckpt, Precision::Fp32, 4), want, 1e-5);
  EXPECT_NEAR(eval_loss(ckpt, Precision::Fp32, 3), want, 1e-5);
  const CheckpointMeta meta = read_checkpoint_meta(ckpt);
  EXPECT_EQ(meta.step, 0);
  EXPECT_EQ(meta.model.vocab, 300);
  EXPECT_EQ((*meta.run)["hf"]["dtype"], "F32");
}

TEST(HfConvert, Bf16AndFp16LossesEqualTransformers) {
  // The bf16 file's values widened to fp32 exactly: the fp32 forward of transformers on the
  // same values is matched to fp32 rounding.
  const fs::path bf = converted("gpt2_bf16");
  EXPECT_NEAR(eval_loss(bf, Precision::Fp32, 4), fixture_loss("gpt2_bf16"), 1e-5);
  // ETH's bf16 compute (bf16 weights and activations, fp32 accumulation) against fp32: within
  // 1e-2 nats on this model (measured 1.8e-4; transformers' own bf16 run differs by
  // |loss_bf16_compute - loss| = 2.1e-3).
  EXPECT_NEAR(eval_loss(bf, Precision::Bf16, 4), fixture_loss("gpt2_bf16"), 1e-2);
  const fs::path h = converted("gpt2_f16_untied");
  EXPECT_NEAR(eval_loss(h, Precision::Fp32, 4), fixture_loss("gpt2_f16_untied"), 1e-5);
}

TEST(HfConvert, ShardedAndSingleFilesGiveTheSameCheckpoint) {
  const fs::path a = converted("gpt2_f32");
  const fs::path dir = test::scratch("hf", "sharded");
  convert_from_hf(kData / "gpt2_f32_sharded", dir / "s.safetensors", true);
  EXPECT_EQ(test::read_bytes(a), test::read_bytes(dir / "s.safetensors"));
}

// Files saved from a bare GPT2Model (the original OpenAI conversion) name tensors without the
// "transformer." prefix and carry the causal-mask buffers: the same model.
TEST(HfConvert, ReadsUnprefixedNamesAndSkipsMaskBuffers) {
  const fs::path dir = test::scratch("hf", "unprefixed");
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kData / "gpt2_f32" / "config.json", dir / "config.json");
  const SafetensorsFile src(kData / "gpt2_f32" / "model.safetensors");
  std::vector<TensorOut> outs;
  for (const TensorInfo& t : src.tensors()) {
    outs.push_back({t.name.substr(std::string("transformer.").size()), t.dtype, t.shape});
  }
  outs.push_back({"h.0.attn.bias", Dtype::F32, {1, 1, 4, 4}});
  outs.push_back({"h.1.attn.masked_bias", Dtype::F32, {}});
  write_safetensors(dir / "model.safetensors", outs, {{"format", "pt"}},
                    [&](std::size_t i, std::span<float> v) {
                      if (i < src.tensors().size()) {
                        src.read_f32(src.tensors()[i], v.data());
                      } else {
                        std::fill(v.begin(), v.end(), 1.0f);
                      }
                    });
  convert_from_hf(dir, dir / "ckpt.safetensors", false);
  EXPECT_EQ(test::read_bytes(dir / "ckpt.safetensors"),
            test::read_bytes(converted("gpt2_f32")));
}

TEST(HfConvert, ExportOfAnImportReproducesEveryTensorBitForBit) {
  for (const std::string model : {"gpt2_f32", "gpt2_bf16", "gpt2_f16_untied"}) {
    const fs::path ckpt = converted(model);
    const fs::path out = test::scratch("hf", "export_" + model);
    fs::remove_all(out);
    const ConvertReport r = convert_to_hf(ckpt, out, "auto", false);
    EXPECT_EQ(r.tied, model != "gpt2_f16_untied") << model;
    test::expect_same_tensors(kData / model, out);
    const Json src = read_json_file(kData / model / "config.json", "test");
    const Json got = read_json_file(out / "config.json", "test");
    EXPECT_EQ(got, src) << model;  // every field kept, dimensions and dtype unchanged
  }
  // The sharded folder exports as one file holding the same tensors.
  const fs::path out = test::scratch("hf", "export_sharded");
  fs::remove_all(out);
  const fs::path dir = test::scratch("hf", "sharded_src");
  convert_from_hf(kData / "gpt2_f32_sharded", dir / "s.safetensors", true);
  convert_to_hf(dir / "s.safetensors", out, "auto", false);
  test::expect_same_tensors(kData / "gpt2_f32_sharded", out);
}

TEST(HfConvert, ExportUntiesAHeadThatDiffersAndRoundsToTheAskedDtype) {
  const fs::path ckpt = converted("gpt2_f32");
  // Training moves ETH's LM head away from wte: the export must keep both.
  const CheckpointMeta meta = read_checkpoint_meta(ckpt);
  const ModelSpec& m = meta.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_checkpoint(ckpt, state);
  float* head = state.params() + state.layout().offset(m.layers + 1, kLmHeadW);
  head[5] += 0.5f;
  const fs::path dir = test::scratch("hf", "untie");
  write_checkpoint(dir / "trained.safetensors", state, meta);
  fs::remove_all(dir / "out");
  const ConvertReport r = convert_to_hf(dir / "trained.safetensors", dir / "out", "bf16", false);
  EXPECT_FALSE(r.tied);
  const Json cfg = read_json_file(dir / "out" / "config.json", "test");
  EXPECT_EQ(cfg["tie_word_embeddings"], false);
  EXPECT_EQ(cfg.at(cfg.contains("dtype") ? "dtype" : "torch_dtype").get<std::string>(), "bfloat16");
  const SafetensorsFile f(dir / "out" / "model.safetensors");
  const TensorInfo* lm = f.find("lm_head.weight");
  ASSERT_NE(lm, nullptr);
  EXPECT_EQ(lm->dtype, Dtype::BF16);
  std::vector<float> v(static_cast<std::size_t>(lm->numel()));
  f.read_f32(*lm, v.data());
  for (std::size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(v[i], f32_from_bf16(bf16_from_f32(head[i]))) << i;
  }
}

// Eval over several batches is the mean of every window's own loss, each computed alone.
TEST(HfEval, LossIsTheMeanOverTheSameWindows) {
  const fs::path ckpt = converted("gpt2_f32");
  const CheckpointMeta meta = read_checkpoint_meta(ckpt);
  const ModelSpec& m = meta.model;
  ModelState state(m, 0, m.num_units() - 1);
  load_checkpoint(ckpt, state);
  const TokenFile data = TokenFile::open(kData / "batch.bin");
  const std::int64_t T = 8;  // 129 tokens: 16 windows of 8
  StageComputeConfig sc;
  sc.first_unit = 0;
  sc.last_unit = m.num_units() - 1;
  sc.max_micro_batch = 1;
  sc.seq_len = T;
  PrecisionStage one(Precision::Fp32, m, sc);
  std::vector<double> per_window;
  std::vector<std::int32_t> in(T), tg(T);
  for (std::int64_t w = 0; w < (data.size() - 1) / T; ++w) {
    for (std::int64_t t = 0; t < T; ++t) {
      in[t] = data.tokens()[w * T + t];
      tg[t] = data.tokens()[w * T + t + 1];
    }
    MicroBatch mb;
    mb.size = 1;
    mb.tokens = in.data();
    mb.targets = tg.data();
    mb.loss_scale = 1.0 / T;
    one.forward(0, state, mb, nullptr, nullptr);
    per_window.push_back(one.take_loss());
  }
  ASSERT_EQ(per_window.size(), 16u);
  auto mean = [&](std::size_t n) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += per_window[i];
    return s / static_cast<double>(n);
  };
  EvalConfig cfg;
  cfg.seq_len = T;
  cfg.batch = 5;  // 5 + 5 + 5 + 1
  const EvalResult all = evaluate(state, data, cfg);
  EXPECT_EQ(all.windows, 16);
  EXPECT_EQ(all.batches, 4);
  EXPECT_EQ(all.tokens, 128);
  EXPECT_NEAR(all.loss, mean(16), 1e-6);
  EXPECT_NEAR(all.perplexity, std::exp(mean(16)), 1e-4);
  cfg.max_batches = 2;  // the first 10 windows
  const EvalResult two = evaluate(state, data, cfg);
  EXPECT_EQ(two.windows, 10);
  EXPECT_NEAR(two.loss, mean(10), 1e-6);
  cfg.seq_len = 65;
  EXPECT_NE(test::error_of([&] { evaluate(state, data, cfg); }).find("--seq-len"),
            std::string::npos);
}

// A fixture folder copied to scratch, for breaking one thing in it.
fs::path copy_fixture(const std::string& model, const std::string& name) {
  const fs::path dir = test::scratch("hf", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(kData / model)) {
    fs::copy_file(e.path(), dir / e.path().filename());
  }
  return dir;
}

TEST(HfConvert, RefusesBadFoldersByNameBeforeWritingAnything) {
  struct Case {
    const char* what;
    std::function<void(const fs::path&)> edit;
    const char* file;  // the file the error names, relative to the folder
    const char* field;
    const char* phrase;
  };
  auto edit_config = [](const std::function<void(Json&)>& f) {
    return [f](const fs::path& dir) {
      Json j = read_json_file(dir / "config.json", "test");
      f(j);
      std::ofstream(dir / "config.json") << j.dump();
    };
  };
  const std::vector<Case> cases = {
      {"architecture", edit_config([](Json& j) { j["architectures"] = {"GPT2Model"}; }),
       "config.json", "architectures[0]", "unsupported architecture"},
      {"untied without head", edit_config([](Json& j) { j["tie_word_embeddings"] = false; }),
       "model.safetensors", "lm_head.weight", "missing tensor"},
      {"dims disagree with tensors", edit_config([](Json& j) { j["n_inner"] = 64; }),
       "model.safetensors", "transformer.h.0.mlp.c_fc.weight.shape", "expected [32, 64]"},
      {"more layers than tensors", edit_config([](Json& j) { j["n_layer"] = 3; }),
       "model.safetensors", "transformer.h.2.ln_1.weight", "missing tensor"},
      {"fewer layers than tensors", edit_config([](Json& j) { j["n_layer"] = 1; }),
       "model.safetensors", "transformer.h.1.attn.c_attn.bias", "unexpected tensor"},
      {"truncated weights",
       [](const fs::path& dir) {
         const std::string s = test::read_bytes(dir / "model.safetensors");
         std::ofstream(dir / "model.safetensors", std::ios::binary)
             .write(s.data(), static_cast<std::streamsize>(s.size() - 100));
       },
       "model.safetensors", "", "ends at byte"},
      {"no weights", [](const fs::path& dir) { fs::remove(dir / "model.safetensors"); }, "", "",
       "no model.safetensors"},
      {"no config", [](const fs::path& dir) { fs::remove(dir / "config.json"); }, "config.json",
       "", ""},
  };
  for (const Case& c : cases) {
    const fs::path dir = copy_fixture("gpt2_f32", "bad");
    c.edit(dir);
    const fs::path out = test::scratch("hf", "bad_out") / "never.safetensors";
    fs::remove(out);
    test::expect_refused(c.what, [&] { convert_from_hf(dir, out, false); },
                         (*c.file ? dir / c.file : dir).string(), c.field, c.phrase);
    EXPECT_FALSE(fs::exists(out)) << c.what;
  }
}

}  // namespace
}  // namespace eth::hf::gpt2_convert_test
