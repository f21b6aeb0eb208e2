// `eth data` and `eth train` end to end through the built binary: files made, one JSON log line
// per step with the documented keys, a checkpoint, and exit code 2 naming a damaged data file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/json_cursor.h"
#include "data/token_file.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::eth_run;
using test::slurp;

TEST(Cli, DataThenTrainWritesLogAndCheckpoint) {
  const fs::path dir = test::temp_dir("cli");
  const fs::path data = dir / "succ.bin", log = dir / "log.jsonl", out = dir / "out",
                 err = dir / "err";
  ASSERT_EQ(eth_run("data --synthetic 5000 --vocab 256 --out " + data.string(), out, err), 0)
      << slurp(err);
  EXPECT_EQ(TokenFile::open(data).size(), 5000);
  ASSERT_EQ(eth_run("train --model tiny --data " + data.string() +
                        " --steps 3 --batch 2 --micro-batch-size 1 --print-every 0 --format json"
                        " --log " +
                        log.string() + " --checkpoint-dir " + (dir / "ckpt").string(),
                    out, err),
            0)
      << slurp(err);
  const Json summary = Json::parse(slurp(out));
  EXPECT_EQ(summary["steps"], 3);
  EXPECT_TRUE(fs::exists(summary["checkpoint"].get<std::string>()));
  std::istringstream lines(slurp(log));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const Json j = Json::parse(line);
    EXPECT_EQ(j["step"], n);
    for (const char* key : {"loss", "lr", "grad_norm", "tokens_per_s"}) {
      EXPECT_TRUE(j.contains(key) && j[key].is_number()) << key << " in " << line;
    }
  }
  EXPECT_EQ(n, 3);
}

TEST(Cli, DamagedDataIsRefusedWithExitCode2) {
  const fs::path dir = test::temp_dir("cli_bad");
  const fs::path data = dir / "bad.bin", out = dir / "out", err = dir / "err";
  std::ofstream(data) << "garbage, not a token file";
  EXPECT_EQ(eth_run("train --model tiny --data " + data.string() + " --steps 1", out, err), 2);
  EXPECT_NE(slurp(err).find(data.string()), std::string::npos) << slurp(err);
}

}  // namespace
}  // namespace eth
