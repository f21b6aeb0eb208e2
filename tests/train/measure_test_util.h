// What the measured-profile tests share (measure_profile_test.cpp on the CPU,
// measure_device_test.cpp on the emulated GPU, cmd_profile_test.cpp on both): the quickest measurement of `tiny` that still
// gives every figure, and the check that a measured profile folder plans and simulates. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "eth_run.h"
#include "model/model_spec.h"
#include "test_util.h"
#include "train/measure_profile.h"

namespace eth::test {

// `tiny` at micro-batch `mbs` and sequence `seq` on one thread, measured once with no warm-up and
// no recompute times: the tests check values and relations, not speed.
inline MeasureOptions quick_measure(std::int64_t mbs, std::int64_t seq) {
  MeasureOptions o;
  o.model = load_model("tiny");
  o.micro_batch = mbs;
  o.seq_len = seq;
  o.threads = 1;
  o.warmup = 0;
  o.repeats = 1;
  o.recompute_times = false;
  return o;
}

// `eth plan` of `tiny` on the measured folder `prof` for `cluster` (seq 32, gbs 8, tp 1, micro-
// batches 1 and 2) exits 0 and writes the plan; `eth validate` of it (when `validate`) and
// `eth simulate` with the profile exit 0 too. eth's output is in `dir` (eth_cli's files).
inline void expect_measured_profile_plans(const std::filesystem::path& dir,
                                          const std::filesystem::path& cluster,
                                          const std::filesystem::path& prof, bool validate) {
  const std::filesystem::path plan = dir / "plan.json", out = dir / "eth.stdout",
                              err = dir / "eth.stderr";
  ASSERT_EQ(
      eth_cli("plan --model tiny --cluster " + cluster.string() + " --profile " + prof.string() +
                  " --seq 32 --gbs 8 --tp 1 --micro-batch-sizes 1,2 --out " + plan.string(),
              dir)
          .code,
      0)
      << slurp(err) << slurp(out);
  ASSERT_TRUE(std::filesystem::exists(plan));
  if (validate) {
    EXPECT_EQ(
        eth_cli("validate --plan " + plan.string() + " --cluster " + cluster.string(), dir).code,
        0)
        << slurp(err) << slurp(out);
  }
  EXPECT_EQ(eth_cli("simulate --plan " + plan.string() + " --cluster " + cluster.string() +
                        " --profile " + prof.string(),
                    dir)
                .code,
            0)
      << slurp(err) << slurp(out);
}

}  // namespace eth::test
