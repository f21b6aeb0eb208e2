// What the `eth convert` / `eth eval` command-line tests share (cmd_convert_test.cpp and
// tests/cli/cmd_eval_test.cpp for GPT-2, llama_cli_test.cpp for Llama): the two commands as a
// user types them, and a fixture folder whose config.json is broken in one field. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "core/json_file.h"
#include "eth_run.h"
#include "test_util.h"

namespace eth::test {

// `eth convert --from-hf 'src' --out 'ckpt' <extra>`, run in `dir`.
inline EthRun eth_convert_from_hf(const std::filesystem::path& src, const std::string& ckpt,
                                  const std::filesystem::path& dir,
                                  const std::string& extra = "") {
  return eth_cli("convert --from-hf '" + src.string() + "' --out '" + ckpt + "'" + extra, dir);
}

// `eth eval` of `ckpt` on the token file `data`, windows of 32 in batches of 4, as JSON; the run
// must succeed (a failed assertion and null otherwise).
inline Json eth_eval_json(const std::string& ckpt, const std::filesystem::path& data,
                          const std::filesystem::path& dir) {
  const EthRun r = eth_cli("eval --checkpoint '" + ckpt + "' --data '" + data.string() +
                               "' --seq-len 32 --batch 4 --format json",
                           dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? Json::parse(r.out) : Json();
}

// Fixture `model`'s weights in dir/m beside its config.json changed by `edit`, converted to
// dir/x.safetensors: the refusal exits 2, names the config file and writes nothing. The run, for
// the field and reason its message must name.
inline EthRun expect_convert_refuses_config(const std::filesystem::path& model,
                                            const std::filesystem::path& dir,
                                            const std::function<void(Json&)>& edit) {
  std::filesystem::remove_all(dir / "m");
  std::filesystem::create_directories(dir / "m");
  std::filesystem::copy_file(model / "model.safetensors", dir / "m" / "model.safetensors");
  Json cfg = read_json_file(model / "config.json", "test");
  edit(cfg);
  write(dir / "m" / "config.json", cfg.dump());
  const EthRun r = eth_convert_from_hf(dir / "m", (dir / "x.safetensors").string(), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find((dir / "m" / "config.json").string()), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors"));
  return r;
}

}  // namespace eth::test
