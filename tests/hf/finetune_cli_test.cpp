// Fine-tuning the transformers fixture as a user does (issue 26): `eth convert --from-hf`, 20
// steps of `eth train --init-from` under a two-pipeline plan (threads backend) with a validation
// set, `eth convert --to-hf`: the exported model's loss on the fixture batch (evaluated after
// converting it back, as `eth eval` does) is the validation loss ETH logged for those weights;
// the plan's losses are single-process init-from's; a run's logged validation loss is `eth
// eval`'s number on its checkpoint; bad combinations exit 2 naming the flag or the field.
// `eth sample`'s tests, on the same fixture: cmd_sample_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "core/json_file.h"
#include "eth_run.h"
#include "finetune_fixture.h"
#include "test_util.h"

namespace eth {
namespace {

double eval_loss(const Fixture& f, const fs::path& ckpt) {
  const auto r = test::eth_cli("eval --checkpoint '" + ckpt.string() + "' --data '" +
                                   f.batch.string() + "' --seq-len 32 --batch 4 --format json",
                               f.dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return Json::parse(r.out)["loss"].get<double>();
}

TEST(FinetuneCli, PlanRunFromConvertedGpt2ExportsTheModelWhoseLossItLogged) {
  const Fixture f = setup("export");
  auto r = test::eth_cli(train_args(f, "--plan '" + f.plan.string() + "' --cluster '" +
                                           f.cluster.string() + "' --backend threads",
                                    "plan"),
                         f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> plan_log = log_lines(f.dir / "plan.jsonl");
  ASSERT_EQ(plan_log.size(), 20u);
  // Validation every 10 steps and at the end, in the line of the step it follows.
  for (std::size_t i = 0; i < plan_log.size(); ++i) {
    EXPECT_EQ(plan_log[i].contains("val_loss"), i == 9 || i == 19) << i;
  }
  const double logged = plan_log.back()["val_loss"].get<double>();
  // Out to a Hugging Face folder and back in: the same weights bit for bit, so eth eval of the
  // export is the number the run logged (transformers' own loss of the export: docs/convert.md).
  r = test::eth_cli("convert --to-hf --checkpoint '" +
                        (f.dir / "plan" / "step_00000020.safetensors").string() + "' --out '" +
                        (f.dir / "exported").string() + "'",
                    f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  r = test::eth_cli("convert --from-hf '" + (f.dir / "exported").string() + "' --out '" +
                        (f.dir / "back.safetensors").string() + "'",
                    f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_DOUBLE_EQ(eval_loss(f, f.dir / "back.safetensors"), logged);
  // The run learned from the pretrained start: its loss is below the fixture's.
  const Json want = read_json_file(kData / "expected.json", "test");
  EXPECT_LT(logged, want["models"]["gpt2_f32"]["loss"].get<double>() - 0.5);

  // One process from the same checkpoint (its model taken from the file: no --model): the same
  // losses, up to the float rounding of the plan's other summation order.
  r = test::eth_cli(train_args(f, "--batch 4 --seq-len 32", "single"), f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> single_log = log_lines(f.dir / "single.jsonl");
  ASSERT_EQ(single_log.size(), plan_log.size());
  for (std::size_t i = 0; i < single_log.size(); ++i) {
    EXPECT_NEAR(single_log[i]["loss"].get<double>(), plan_log[i]["loss"].get<double>(), 1e-5)
        << "step " << i;
  }
  EXPECT_NEAR(single_log.back()["val_loss"].get<double>(), logged, 1e-5);
  // A single-process run's validation loss is eth eval's on its checkpoint, exactly.
  EXPECT_DOUBLE_EQ(eval_loss(f, f.dir / "single" / "step_00000020.safetensors"),
                   single_log.back()["val_loss"].get<double>());
}

TEST(FinetuneCli, BadCombinationsExitTwoBeforeTraining) {
  const Fixture f = setup("bad");
  const std::string base = "train --init-from '" + f.ckpt.string() + "' --data '" +
                           f.batch.string() + "' --steps 2 --seq-len 32 --print-every 0 ";
  auto r = test::eth_cli(base + "--resume '" + f.ckpt.string() + "'", f.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--init-from"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  // A model of other dimensions than the checkpoint's: the file and the field are named.
  test::write(f.dir / "wide.json",
              R"({"layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 300})");
  r = test::eth_cli(base + "--model '" + (f.dir / "wide.json").string() + "'", f.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("__metadata__.model.hidden"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(f.ckpt.string()), std::string::npos) << r.err;
  // Under a plan of another model (tiny's plan from the trace tests' shape).
  std::string plan = kPlan;
  plan.replace(plan.find("\"layers\": 2"), 11, "\"layers\": 3");
  plan.replace(plan.find("\"units\": [3, 3]"), 15, "\"units\": [3, 4]");
  plan.replace(plan.find("\"units\": [2, 3]"), 15, "\"units\": [2, 4]");
  test::write(f.dir / "plan3.json", plan);
  r = test::eth_cli(base + "--plan '" + (f.dir / "plan3.json").string() + "' --cluster '" +
                        f.cluster.string() + "' --backend threads",
                    f.dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("__metadata__.model.layers"), std::string::npos) << r.err;
  r = test::eth_cli(base + "--val-every 1", f.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--val-data"), std::string::npos) << r.err;
  // A validation file with a token outside the vocabulary of 300 is named before any step.
  r = test::eth_cli("data --synthetic 400 --vocab 1000 --out '" + (f.dir / "bad.bin").string() +
                        "'",
                    f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  r = test::eth_cli(base + "--val-data '" + (f.dir / "bad.bin").string() + "'", f.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.bin"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace eth
