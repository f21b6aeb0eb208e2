// `eth launch ... -- --init-from CKPT --val-data F` under mpirun (4 ranks): the run of the
// threads backend, the same losses and validation losses. Label mpi: runs mpirun.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "eth_run.h"
#include "finetune_fixture.h"
#include "test_util.h"

namespace eth {
namespace {

TEST(FinetuneMpi, LaunchFromConvertedGpt2LogsTheThreadsRunsLosses) {
  const Fixture f = setup("mpi");
  const std::string plan = "--plan '" + f.plan.string() + "'";
  auto r = test::eth_cli(train_args(f, plan + " --cluster '" + f.cluster.string() +
                                           "' --backend threads",
                                    "threads"),
                         f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string launch = train_args(f, "--cluster '" + f.cluster.string() + "' --threads 1", "mpi");
  launch.replace(0, 5, "launch " + plan + " --");  // "train" -> "launch --plan P --"
  r = test::eth_cli(launch, f.dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<Json> a = log_lines(f.dir / "threads.jsonl");
  const std::vector<Json> b = log_lines(f.dir / "mpi.jsonl");
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i]["loss"].get<double>(), a[i]["loss"].get<double>(),
                1e-6 * a[i]["loss"].get<double>())
        << "step " << i;
  }
  EXPECT_NEAR(b.back()["val_loss"].get<double>(), a.back()["val_loss"].get<double>(), 1e-6);
}

}  // namespace
}  // namespace eth
