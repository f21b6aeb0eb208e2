// eth train's flags and helpers (cli/train_args.h) in-process: flags into TrainArgs and then
// TrainConfig and the loop's options (the defaults that depend on other flags written out), the
// recompute list, the duration and number formats, --resume's resolution, the models that have
// no kernels, and the memory check's refusal naming the flag to change.
#include "cli/train_args.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include <CLI/CLI.hpp>

#include "test_util.h"
#include "train/checkpoint.h"

namespace eth::train_args_test {
namespace {

namespace fs = std::filesystem;
using cli::TrainArgs;

TrainArgs parse(const std::string& line) {
  CLI::App app;
  TrainArgs a;
  cli::add_train_options(&app, &a);
  app.parse(line, false);
  return a;
}

TEST(TrainArgs, FlagsReachTheConfigWithTheirDerivedDefaults) {
  TrainArgs a = parse("--data d.bin --model tiny --steps 50 --lr 0.01 --warmup 5");
  EXPECT_EQ(a.data, "d.bin");
  TrainConfig c = cli::make_config(a);
  EXPECT_EQ(c.model, model_preset("tiny"));
  EXPECT_EQ(c.steps, 50);
  EXPECT_EQ(c.global_batch, 8);        // --batch 0: 8
  EXPECT_EQ(c.micro_batch, 8);         // --micro-batch 0: the whole batch
  EXPECT_DOUBLE_EQ(c.lr.lr_min, 0.001);  // --lr-min unset: lr / 10
  EXPECT_EQ(c.lr.warmup_steps, 5);
  EXPECT_TRUE(c.recompute.empty());
  a = parse("--data d.bin --model tiny --batch 12 --micro-batch-size 4 --lr-min 0 "
            "--recompute qkv,mlp_act");
  c = cli::make_config(a);
  EXPECT_EQ(c.global_batch, 12);
  EXPECT_EQ(c.micro_batch, 4);
  EXPECT_DOUBLE_EQ(c.lr.lr_min, 0.0);
  EXPECT_TRUE(c.recompute.has(RecomputeOp::Qkv) && c.recompute.has(RecomputeOp::MlpAct));
  EXPECT_FALSE(c.recompute.has(RecomputeOp::AttnScore));
}

TEST(TrainArgs, DataIsRequiredAndAModelWithoutACheckpointToo) {
  EXPECT_THROW(parse("--model tiny"), CLI::RequiredError);
  const std::string e = test::error_of([] { cli::make_config(parse("--data d.bin")); });
  EXPECT_NE(e.find("--model"), std::string::npos) << e;
}

TEST(TrainArgs, LoopOptionsComeFromTheirFlags) {
  TrainArgs a = parse("--data d --model tiny --steps 30 --stop-at 12 --checkpoint-dir ck "
                      "--checkpoint-every 4 --stop-file s --print-every 3");
  TrainLoopOptions o = cli::loop_options(a);
  EXPECT_EQ(o.stop_at, 12);
  EXPECT_EQ(o.checkpoint_dir, "ck");
  EXPECT_EQ(o.checkpoint_every, 4);
  EXPECT_EQ(o.stop_file, "s");
  EXPECT_EQ(o.print_every, 3);
  a.finetune.val_data = "v.bin";  // validation at the end only: every 30 steps
  EXPECT_EQ(cli::loop_options(a).validate_every, 30);
}

TEST(TrainArgs, RecomputeListNamesAnUnknownOperator) {
  EXPECT_TRUE(cli::parse_recompute_list("").empty());
  EXPECT_TRUE(cli::parse_recompute_list("none").empty());
  const RecomputeSet all = cli::parse_recompute_list("qkv,attn_score,attn_softmax,attn_dropout,mlp_act");
  EXPECT_EQ(all, RecomputeSet::all_ops());
  const std::string e = test::error_of([] { cli::parse_recompute_list("qkv,softmax"); });
  EXPECT_NE(e.find("--recompute"), std::string::npos) << e;
  EXPECT_NE(e.find("\"softmax\""), std::string::npos) << e;
  EXPECT_NE(e.find("attn_softmax"), std::string::npos) << e;  // the names it takes
}

TEST(TrainArgs, DurationsAndScientificNumbers) {
  EXPECT_EQ(cli::fmt_duration(0), "0s");
  EXPECT_EQ(cli::fmt_duration(59.4), "59s");
  EXPECT_EQ(cli::fmt_duration(59.6), "1m0s");
  EXPECT_EQ(cli::fmt_duration(125), "2m5s");
  EXPECT_EQ(cli::fmt_duration(3725), "1h2m");
  EXPECT_EQ(cli::fmt_duration(-1), "?");
  EXPECT_EQ(cli::fmt_duration(std::numeric_limits<double>::quiet_NaN()), "?");
  EXPECT_EQ(cli::fmt_duration(std::numeric_limits<double>::infinity()), "?");
  EXPECT_EQ(cli::fmt_sci(0.0003), "3.00e-04");
  EXPECT_EQ(cli::fmt_sci(12345), "1.23e+04");
}

TEST(TrainArgs, ResumeTakesAFileAsItIsAndAFolderAtItsNewestCheckpoint) {
  const fs::path dir = test::scratch("train_args", "resume");
  EXPECT_FALSE(cli::resolve_resume("").has_value());
  EXPECT_EQ(cli::resolve_resume("x/step_5.safetensors"), fs::path("x/step_5.safetensors"));
  const std::string e = test::error_of([&] { cli::resolve_resume(dir.string()); });
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
  EXPECT_NE(e.find(dir.string()), std::string::npos) << e;
  test::write(checkpoint_path(dir, 2), "");
  test::write(checkpoint_path(dir, 10), "");
  EXPECT_EQ(cli::resolve_resume(dir.string()), checkpoint_path(dir, 10));
  fs::remove_all(dir);
}

TEST(TrainArgs, ModelsWithoutKernelsAreRefusedNamingTheField) {
  EXPECT_EQ(test::error_of([] { cli::require_trainable(model_preset("tiny")); }), "(no error)");
  ModelSpec m = model_preset("tiny");
  m.bias = false;
  EXPECT_NE(test::error_of([&] { cli::require_trainable(m); }).find("bias"), std::string::npos);
  m = model_preset("tiny");
  m.norm_eps = 1e-6;
  EXPECT_NE(test::error_of([&] { cli::require_trainable(m); }).find("norm_eps"),
            std::string::npos);
}

TEST(TrainArgs, MemoryCheckNamesTheFlagToChange) {
  TrainConfig c = cli::make_config(parse("--data d --model tiny --batch 4"));
  EXPECT_EQ(test::error_of([&] { cli::check_train_memory(c); }), "(no error)");
  // A petabyte of activations: refused naming --batch, or --micro-batch-size when it is smaller.
  c.model = model_preset("gpt3-1.3b");
  c.global_batch = c.micro_batch = 1 << 20;
  std::string e = test::error_of([&] { cli::check_train_memory(c); });
  EXPECT_NE(e.find("--batch"), std::string::npos) << e;
  EXPECT_NE(e.find("needs"), std::string::npos) << e;
  c.micro_batch = 1 << 19;
  e = test::error_of([&] { cli::check_train_memory(c); });
  EXPECT_NE(e.find("--micro-batch-size"), std::string::npos) << e;
}

}  // namespace
}  // namespace eth::train_args_test
