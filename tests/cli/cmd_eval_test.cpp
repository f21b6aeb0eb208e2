// `eth eval` as a user runs it, on the GPT-2 fixture converted by `eth convert`: the JSON loss is
// the one transformers computed on the same batch (tests/data/hf/expected.json), the text form
// states the same numbers, windows are taken in file order whatever the batching, and bad input
// exits naming the file and the field (or the flag) without printing a result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "data/token_file.h"
#include "eth_run.h"
#include "hf/hf_cli_util.h"
#include "hf/hf_test_util.h"
#include "test_util.h"

namespace eth::cmd_eval_test {
namespace {

namespace fs = std::filesystem;

const fs::path kBatch = test::hf_data() / "batch.bin";  // 129 tokens: 4 windows of 32

// transformers' mean loss of gpt2_f32 on the fixture batch (4 windows of 32 predictions).
double transformers_loss() {
  return test::hf_expected("expected.json")["models"]["gpt2_f32"]["loss"].get<double>();
}

// A scratch folder for the test holding gpt2_f32 converted by `eth convert` as ckpt.safetensors.
fs::path converted_fixture(const std::string& name) {
  const fs::path dir = test::scratch("cmd_eval", name);
  fs::remove(dir / "ckpt.safetensors");
  const test::EthRun r =
      test::eth_convert_from_hf(test::hf_data() / "gpt2_f32", (dir / "ckpt.safetensors").string(),
                                dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return dir;
}

test::EthRun eval(const fs::path& ckpt, const fs::path& data, const std::string& extra,
                  const fs::path& dir) {
  return test::eth_cli("eval --checkpoint '" + ckpt.string() + "' --data '" + data.string() +
                           "'" + extra,
                       dir);
}

// `eth eval ... --format json`, which must succeed (null and a failure otherwise).
Json eval_json(const fs::path& ckpt, const fs::path& data, const std::string& extra,
               const fs::path& dir) {
  const test::EthRun r = eval(ckpt, data, extra + " --format json", dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? Json::parse(r.out) : Json();
}

TEST(EvalCli, JsonLossIsTransformersLossAndTheTextStatesTheSame) {
  const fs::path dir = converted_fixture("json");
  const fs::path ckpt = dir / "ckpt.safetensors";
  // The windows and batch transformers evaluated.
  const Json ev = test::eth_eval_json(ckpt.string(), kBatch, dir);
  ASSERT_FALSE(ev.is_null());
  EXPECT_NEAR(ev["loss"].get<double>(), transformers_loss(), 1e-5);
  EXPECT_NEAR(ev["perplexity"].get<double>(), std::exp(ev["loss"].get<double>()), 1e-9);
  EXPECT_EQ(ev["tokens"], 128);
  EXPECT_EQ(ev["windows"], 4);
  EXPECT_EQ(ev["batches"], 1);
  EXPECT_EQ(ev["seq_len"], 32);
  EXPECT_EQ(ev["precision"], "fp32");
  EXPECT_EQ(ev["checkpoint"], ckpt.string());
  EXPECT_EQ(ev["data"], kBatch.string());

  // The text form, read back as a user would: the same loss, perplexity and counts.
  const test::EthRun text = eval(ckpt, kBatch, " --seq-len 32 --batch 4", dir);
  ASSERT_EQ(text.code, 0) << text.err;
  std::istringstream in(text.out);
  std::string word, paren;
  double loss = 0, ppl = 0;
  std::int64_t predictions = 0;
  in >> word >> loss >> paren >> ppl;
  EXPECT_EQ(word, "loss") << text.out;
  EXPECT_EQ(paren, "(perplexity") << text.out;
  in.ignore(2) >> word >> predictions;  // ") over N"
  EXPECT_EQ(word, "over") << text.out;
  EXPECT_NEAR(loss, ev["loss"].get<double>(), 1e-5 * loss) << text.out;
  EXPECT_NEAR(ppl, ev["perplexity"].get<double>(), 1e-5 * ppl) << text.out;
  EXPECT_EQ(predictions, 128) << text.out;
}

// Window w is tokens [32w, 32w + 32]: the first two windows and the file without their 64 tokens
// average to the whole, and how the windows are batched does not change the mean.
TEST(EvalCli, WindowsAreTakenInFileOrderWhateverTheBatching) {
  const fs::path dir = converted_fixture("windows");
  const fs::path ckpt = dir / "ckpt.safetensors";
  const Json whole = eval_json(ckpt, kBatch, " --seq-len 32 --batch 4", dir);
  const Json first = eval_json(ckpt, kBatch, " --seq-len 32 --batch 2 --batches 1", dir);
  const TokenFile all = TokenFile::open(kBatch);
  ASSERT_EQ(all.size(), 129);
  std::vector<std::uint16_t> rest;
  for (std::int64_t i = 64; i < all.size(); ++i) {
    rest.push_back(static_cast<std::uint16_t>(all.tokens()[static_cast<std::size_t>(i)]));
  }
  write_token_file(dir / "rest.bin", rest);
  const Json second = eval_json(ckpt, dir / "rest.bin", " --seq-len 32 --batch 2", dir);
  const Json uneven = eval_json(ckpt, kBatch, " --seq-len 32 --batch 3", dir);  // 3 + 1
  ASSERT_FALSE(whole.is_null() || first.is_null() || second.is_null() || uneven.is_null());
  EXPECT_EQ(first["windows"], 2);
  EXPECT_EQ(first["tokens"], 64);
  EXPECT_EQ(second["windows"], 2);
  EXPECT_EQ(uneven["batches"], 2);
  EXPECT_EQ(uneven["windows"], 4);
  const double halves = (first["loss"].get<double>() + second["loss"].get<double>()) / 2;
  EXPECT_NEAR(halves, whole["loss"].get<double>(), 1e-6);
  EXPECT_NEAR(uneven["loss"].get<double>(), whole["loss"].get<double>(), 1e-6);
  // Not a vacuous split: the two halves differ.
  EXPECT_GT(std::fabs(first["loss"].get<double>() - second["loss"].get<double>()), 1e-3);
}

// `ckpt` with its recorded model edited by `edit`, written to `out` (the tensors unchanged).
void write_with_model_edited(const fs::path& ckpt, const fs::path& out,
                             const std::function<void(Json&)>& edit) {
  const std::string bytes = test::read_bytes(ckpt);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  Json header = Json::parse(bytes.substr(8, n));
  Json model = Json::parse(header["__metadata__"]["model"].get<std::string>());
  edit(model);
  header["__metadata__"]["model"] = model.dump();
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data stays 8-byte aligned
  const std::uint64_t m = text.size();
  std::string head(8, '\0');
  std::memcpy(head.data(), &m, 8);
  test::write_bytes(out, head + text + bytes.substr(8 + n));
}

TEST(EvalCli, BadInputExitsNamingTheFileAndFieldWithoutAResult) {
  const fs::path dir = converted_fixture("bad");
  const fs::path ckpt = dir / "ckpt.safetensors";
  test::write(dir / "garbage.safetensors", "not a checkpoint");
  write_with_model_edited(ckpt, dir / "heads.safetensors", [](Json& m) { m["heads"] = 5; });
  write_token_file(dir / "short.bin", std::vector<std::uint16_t>(10, 1));
  write_token_file(dir / "big_id.bin", std::vector<std::uint16_t>(40, 300));  // vocab is 300
  struct Case {
    const char* what;
    fs::path ckpt, data;
    std::string extra;
    int code;
    std::vector<std::string> phrases;  // each must be in the message
  };
  const std::string nope = (dir / "nope.safetensors").string();
  const std::vector<Case> cases = {
      {"no checkpoint", nope, kBatch, "", 2, {nope, "no such checkpoint file"}},
      {"not a checkpoint", dir / "garbage.safetensors", kBatch, "", 2,
       {(dir / "garbage.safetensors").string(), "corrupt"}},
      {"bad recorded model", dir / "heads.safetensors", kBatch, "", 2,
       {(dir / "heads.safetensors").string(), "__metadata__.model.heads", "must divide hidden"}},
      {"no data", ckpt, dir / "nope.bin", "", 2, {(dir / "nope.bin").string(), "cannot open"}},
      {"not a token file", ckpt, ckpt, "", 2, {ckpt.string(), "[data]"}},
      {"too few tokens", ckpt, dir / "short.bin", " --seq-len 32", 2,
       {(dir / "short.bin").string(), "needs 33"}},
      {"token outside the vocabulary", ckpt, dir / "big_id.bin", " --seq-len 32", 2,
       {(dir / "big_id.bin").string(), "token id 300", "vocabulary of 300"}},
      {"longer than the positions", ckpt, kBatch, " --seq-len 65", 2, {"--seq-len", "1..64"}},
      {"no windows per batch", ckpt, kBatch, " --batch 0", 1, {"--batch"}},
      {"unknown precision", ckpt, kBatch, " --precision fp16", 1, {"--precision", "fp16"}},
  };
  for (const Case& c : cases) {
    const test::EthRun r = eval(c.ckpt, c.data, c.extra + " --format json", dir);
    EXPECT_EQ(r.code, c.code) << c.what << ": " << r.err;
    for (const std::string& p : c.phrases) {
      EXPECT_NE(r.err.find(p), std::string::npos) << c.what << ": wants " << p << " in " << r.err;
    }
    EXPECT_EQ(r.out, "") << c.what;
  }
  // Without --data nothing runs: the flag is named.
  const test::EthRun r = test::eth_cli("eval --checkpoint '" + ckpt.string() + "'", dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("--data"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace eth::cmd_eval_test
