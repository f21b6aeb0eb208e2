// The fine-tuning flags (cli/finetune_args.h) in-process: their defaults and ranges, the
// validation period, the refusal of validation flags without --val-data and of --init-from with
// --resume, and the validation line's wording and perplexity.
#include "cli/finetune_args.h"

#include <gtest/gtest.h>

#include <cmath>

#include <CLI/CLI.hpp>

#include "test_util.h"

namespace eth::finetune_args_test {
namespace {

using cli::FinetuneArgs;

FinetuneArgs parse(const std::string& line) {
  CLI::App app;
  FinetuneArgs a;
  cli::add_finetune_options(&app, &a);
  app.parse(line, false);
  return a;
}

TEST(FinetuneArgs, DefaultsAndFlags) {
  FinetuneArgs a = parse("");
  EXPECT_EQ(a.val_every, 0);
  EXPECT_EQ(a.val_batches, 0);
  EXPECT_EQ(a.val_batch, 8);
  a = parse("--init-from c.safetensors --val-data v.bin --val-every 5 --val-batches 2 "
            "--val-batch 3");
  EXPECT_EQ(a.init_from, "c.safetensors");
  EXPECT_EQ(a.val_data, "v.bin");
  EXPECT_EQ(a.val_every, 5);
  EXPECT_EQ(a.val_batches, 2);
  EXPECT_EQ(a.val_batch, 3);
  for (const std::string bad : {"--val-every -1", "--val-batches -2", "--val-batch 0",
                                "--val-batch 65537"}) {
    EXPECT_THROW(parse(bad), CLI::ValidationError) << bad;
  }
}

TEST(FinetuneArgs, ValidationPeriodIsTheRunsLengthWhenNotGiven) {
  FinetuneArgs a;
  EXPECT_EQ(cli::validate_every(a, 40), 40);
  EXPECT_EQ(cli::validate_every(a, 0), 1);
  a.val_every = 7;
  EXPECT_EQ(cli::validate_every(a, 40), 7);
}

TEST(FinetuneArgs, ValidationFlagsNeedAFileAndInitFromExcludesResume) {
  const ModelSpec tiny = model_preset("tiny");
  FinetuneArgs a;
  EXPECT_EQ(test::error_of([&] { cli::check_finetune_args(a, "", tiny, 16); }), "(no error)");
  EXPECT_EQ(cli::make_validation(a, tiny, 16), nullptr);
  a.val_every = 3;
  std::string e = test::error_of([&] { cli::check_finetune_args(a, "", tiny, 16); });
  EXPECT_NE(e.find("--val-every"), std::string::npos) << e;
  EXPECT_NE(e.find("--val-data"), std::string::npos) << e;
  a.val_every = 0;
  a.val_batches = 1;
  e = test::error_of([&] { cli::check_finetune_args(a, "", tiny, 16); });
  EXPECT_NE(e.find("--val-batches"), std::string::npos) << e;
  a = FinetuneArgs{};
  a.init_from = "c.safetensors";
  e = test::error_of([&] { cli::check_finetune_args(a, "ckpt", tiny, 16); });
  EXPECT_NE(e.find("--resume"), std::string::npos) << e;
}

TEST(FinetuneArgs, ValidationLineNamesTheStepDoneAndThePerplexity) {
  // Loss ln 10: perplexity 10. The step the loop is about to take is 10, so 9 are done.
  EXPECT_EQ(cli::validation_line(10, std::log(10.0)),
            "validation after step 9: loss 2.3026 (perplexity 10.0000)");
}

}  // namespace
}  // namespace eth::finetune_args_test
