// Checkpoints (train/checkpoint.h): a written state reads back bit for bit with its metadata;
// files do not depend on the plan (any unit range, any tp rank loads its part of one whole file);
// damaged or mismatched files are refused naming the file and the field or tensor; the file is
// written through a temporary sibling and rename; the step folder's naming and the latest
// checkpoint; the checksum sees every byte.
#include "train/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/model_state.h"
#include "train_test_util.h"

namespace eth::checkpoint_test {
namespace {

namespace fs = std::filesystem;

// An uneven vocabulary (31 rows) and 4 heads: tp 2 and 4 shard every block tensor evenly and
// the embedding / LM head in floor-division row ranges.
ModelSpec uneven_model() { return ModelSpec{"tp", 2, 16, 4, 8, 31, 24}; }

CheckpointMeta meta_of(const ModelSpec& m, std::int64_t step) {
  CheckpointMeta meta;
  meta.model = m;
  meta.step = step;
  meta.schedule = Json{{"lr_max", 0.5}, {"warmup", 3}};
  meta.data = Json{{"file", "x.bin"}, {"next", 17}};
  meta.run = Json{{"seed", 9}};
  return meta;
}

// A whole state with parameters from init and moments that differ from them and each other.
ModelState filled_state(const ModelSpec& m, std::uint64_t seed) {
  ModelState s(m, 0, m.num_units() - 1);
  s.init(seed);
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    s.adam_m()[i] = static_cast<float>(i % 13) * 0.25f;
    s.adam_v()[i] = static_cast<float>(i % 17) * 0.5f;
  }
  return s;
}

std::vector<float> span_of(const float* p, std::int64_t n) { return {p, p + n}; }

TEST(Checkpoint, AStateReadsBackBitForBitWithItsMetadata) {
  const fs::path dir = test::temp_dir("ckpt_round_trip");
  const ModelSpec m = test::small_model();
  const ModelState whole = filled_state(m, 4);
  const CheckpointMeta meta = meta_of(m, 12);
  write_checkpoint(dir / "c.safetensors", whole, meta);
  ModelState back(m, 0, m.num_units() - 1);
  const CheckpointMeta got = load_checkpoint(dir / "c.safetensors", back);
  const std::int64_t n = whole.numel();
  EXPECT_EQ(span_of(back.params(), n), span_of(whole.params(), n));
  EXPECT_EQ(span_of(back.adam_m(), n), span_of(whole.adam_m(), n));
  EXPECT_EQ(span_of(back.adam_v(), n), span_of(whole.adam_v(), n));
  EXPECT_EQ(got.model, m);
  EXPECT_EQ(got.step, 12);
  EXPECT_EQ(*got.schedule, *meta.schedule);
  EXPECT_EQ(*got.data, *meta.data);
  EXPECT_EQ(*got.run, *meta.run);
  const CheckpointMeta header_only = read_checkpoint_meta(dir / "c.safetensors");
  EXPECT_EQ(header_only.step, 12);
  EXPECT_EQ(*header_only.data, *meta.data);
}

// A file holds tensors by unit and name, so a stage of any unit range loads the same bits as
// the whole model holds at those units, and a file written by a stage holds only its units.
TEST(Checkpoint, AnyUnitRangeLoadsItsUnitsOfOneWholeFile) {
  const fs::path dir = test::temp_dir("ckpt_plans");
  const ModelSpec m = test::small_model();
  const ModelState whole = filled_state(m, 6);
  write_checkpoint(dir / "whole.safetensors", whole, meta_of(m, 1));
  for (const auto& [first, last] : {std::pair<std::int64_t, std::int64_t>{0, 0}, {1, 2}, {2, 3}}) {
    ModelState stage(m, first, last);
    load_checkpoint(dir / "whole.safetensors", stage);
    const std::int64_t off = whole.layout().offset(first, 0);
    EXPECT_EQ(span_of(stage.params(), stage.numel()),
              span_of(whole.params() + off, stage.numel()))
        << first << ".." << last;
    EXPECT_EQ(span_of(stage.adam_v(), stage.numel()),
              span_of(whole.adam_v() + off, stage.numel()))
        << first << ".." << last;
  }
  // A stage's own file: its units load, another stage's are missing (named).
  ModelState front(m, 0, 1);
  load_checkpoint(dir / "whole.safetensors", front);
  write_checkpoint(dir / "front.safetensors", front, meta_of(m, 1));
  ModelState again(m, 0, 1);
  load_checkpoint(dir / "front.safetensors", again);
  EXPECT_EQ(span_of(again.params(), again.numel()), span_of(front.params(), front.numel()));
  ModelState back(m, 2, 3);
  const std::string e =
      test::error_of([&] { load_checkpoint(dir / "front.safetensors", back); });
  EXPECT_NE(e.find("unit2.ln1_w: missing tensor"), std::string::npos) << e;
}

TEST(Checkpoint, TpShardsLoadTheirRowsOfAWholeCheckpoint) {
  const fs::path dir = test::temp_dir("ckpt_tp");
  const ModelSpec m = uneven_model();
  const ModelState whole = filled_state(m, 9);
  write_checkpoint(dir / "c.safetensors", whole, meta_of(m, 3));
  for (std::int64_t tp : {2, 4}) {
    for (std::int64_t r = 0; r < tp; ++r) {
      ModelState shard(m, 1, m.num_units() - 1, tp, r);  // units 1..3
      EXPECT_EQ(load_checkpoint(dir / "c.safetensors", shard).step, 3);
      for (const UnitSlot& u : shard.layout().units()) {
        for (std::size_t i = 0; i < u.tensors.size(); ++i) {
          const TensorSlot& t = u.tensors[i];
          const std::int64_t at =
              whole.layout().unit(u.unit).tensors[i].offset + t.rows.begin * t.row_size();
          const auto bytes = static_cast<std::size_t>(t.desc.numel()) * 4;
          EXPECT_EQ(0, std::memcmp(shard.params() + t.offset, whole.params() + at, bytes));
          EXPECT_EQ(0, std::memcmp(shard.adam_m() + t.offset, whole.adam_m() + at, bytes));
          EXPECT_EQ(0, std::memcmp(shard.adam_v() + t.offset, whole.adam_v() + at, bytes));
        }
      }
    }
  }
}

TEST(Checkpoint, DamagedFilesAreRefusedByName) {
  const fs::path dir = test::temp_dir("ckpt_damaged");
  const ModelSpec m = test::small_model();
  ModelState state = filled_state(m, 2);
  const fs::path good = dir / "good.safetensors";
  write_checkpoint(good, state, meta_of(m, 1));
  const std::string bytes = test::slurp(good);
  const fs::path bad = dir / "bad.safetensors";
  auto load_error = [&] { return test::error_of([&] { load_checkpoint(bad, state); }); };
  const std::string name = bad.string();

  test::write(bad, bytes.substr(0, bytes.size() - 100));  // truncated data
  std::string e = load_error();
  EXPECT_NE(e.find(name), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;

  test::write(bad, bytes + "xx");  // trailing bytes
  EXPECT_NE(load_error().find("trailing bytes"), std::string::npos);

  test::write(bad, bytes.substr(0, 5));  // not even a header length
  EXPECT_NE(load_error().find("truncated: 5 bytes"), std::string::npos);

  std::string s = bytes;
  s[bytes.size() - 3] = static_cast<char>(s[bytes.size() - 3] ^ 0x40);  // one flipped bit
  test::write(bad, s);
  e = load_error();
  EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
  EXPECT_NE(e.find("unit3.lm_head_w.adam_v"), std::string::npos) << e;  // the last tensor

  s = bytes;
  const auto ver = s.find("\"version\":\"2\"");
  ASSERT_NE(ver, std::string::npos);
  s[ver + 11] = '1';  // a version 1 file: qkv rows in the old [q; k; v] order
  test::write(bad, s);
  e = load_error();
  EXPECT_NE(e.find("__metadata__.version: version 1 checkpoints store qkv_w/qkv_b as"),
            std::string::npos)
      << e;

  s = bytes;
  const auto fmt = s.find("\"eth-checkpoint\"");
  ASSERT_NE(fmt, std::string::npos);
  s[fmt + 1] = 'E';  // another format
  test::write(bad, s);
  EXPECT_NE(load_error().find("__metadata__.format"), std::string::npos);

  s = bytes;
  s[7] = 0x7f;  // header length field absurd
  test::write(bad, s);
  EXPECT_NE(load_error().find("header length"), std::string::npos);

  s = bytes;
  const auto pos = s.find("\"dtype\"");
  s[pos + 1] = 'D';  // a JSON key nobody asked for
  test::write(bad, s);
  EXPECT_NE(load_error().find("unknown field"), std::string::npos);

  e = test::error_of([&] { load_checkpoint(dir / "missing.safetensors", state); });
  EXPECT_NE(e.find("missing.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("no such checkpoint file"), std::string::npos) << e;
}

TEST(Checkpoint, AnotherModelIsRefusedNamingTheFieldBeforeAnyTensorIsRead) {
  const fs::path dir = test::temp_dir("ckpt_mismatch");
  const ModelSpec m = test::small_model();
  ModelState state = filled_state(m, 2);
  write_checkpoint(dir / "c.safetensors", state, meta_of(m, 1));
  ModelSpec wider = m;
  wider.ffn = 64;
  ModelState other(wider, 0, wider.num_units() - 1);
  other.init(5);
  const std::vector<float> before = span_of(other.params(), other.numel());
  const std::string e = test::error_of([&] { load_checkpoint(dir / "c.safetensors", other); });
  EXPECT_NE(e.find((dir / "c.safetensors").string()), std::string::npos) << e;
  EXPECT_NE(e.find("__metadata__.model"), std::string::npos) << e;
  EXPECT_EQ(span_of(other.params(), other.numel()), before) << "a refused file changed the state";
  // Same model, a tensor of another shape: named with its field.
  std::string bytes = test::slurp(dir / "c.safetensors");
  const auto entry = bytes.find("\"unit1.fc_w\":{");
  ASSERT_NE(entry, std::string::npos);
  const auto shape = bytes.find("\"shape\":[48,16]", entry);
  ASSERT_LT(shape, bytes.find('}', entry)) << "not unit1.fc_w's shape";
  bytes.replace(shape, 15, "\"shape\":[16,48]");  // the same bytes, transposed
  test::write(dir / "t.safetensors", bytes);
  const std::string t = test::error_of([&] { load_checkpoint(dir / "t.safetensors", state); });
  EXPECT_NE(t.find("unit1.fc_w.shape"), std::string::npos) << t;
}

TEST(Checkpoint, IsWrittenThroughATemporarySiblingAndRename) {
  const fs::path dir = test::temp_dir("ckpt_atomic");
  const ModelSpec m = test::small_model();
  const ModelState a = filled_state(m, 1), b = filled_state(m, 2);
  const fs::path path = dir / "sub" / "c.safetensors";  // the folder is created
  write_checkpoint(path, a, meta_of(m, 1));
  const std::string first = test::slurp(path);
  // A second name of the first file's inode: a rename leaves it the first file's bytes, where
  // writing into the file in place would change them under it.
  fs::create_hard_link(path, dir / "old_link");
  write_checkpoint(path, b, meta_of(m, 2));
  EXPECT_EQ(test::slurp(dir / "old_link"), first) << "the file was rewritten in place";
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "sub")) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"c.safetensors"}) << "a temporary file was left";
  ModelState back(m, 0, m.num_units() - 1);
  EXPECT_EQ(load_checkpoint(path, back).step, 2);
  EXPECT_EQ(span_of(back.params(), back.numel()), span_of(b.params(), b.numel()));
  // A target that is a folder is refused naming it, and the folder is left as it was.
  fs::create_directories(dir / "taken.safetensors");
  const std::string e =
      test::error_of([&] { write_checkpoint(dir / "taken.safetensors", a, meta_of(m, 1)); });
  EXPECT_NE(e.find("taken.safetensors"), std::string::npos) << e;
  EXPECT_TRUE(fs::is_directory(dir / "taken.safetensors"));
  EXPECT_TRUE(fs::is_empty(dir / "taken.safetensors"));
}

TEST(Checkpoint, PathsAreNumberedByStepAndTheLatestIsTheHighest) {
  const fs::path dir = test::temp_dir("ckpt_latest");
  EXPECT_EQ(checkpoint_path(dir, 123), dir / "step_00000123.safetensors");
  EXPECT_EQ(checkpoint_step(dir / "step_00000123.safetensors"), 123);
  EXPECT_EQ(checkpoint_step(".step_00000123.safetensors.tmp-7-1"), std::nullopt);  // a temporary
  EXPECT_EQ(checkpoint_step("step_.safetensors"), std::nullopt);
  EXPECT_EQ(checkpoint_step("step_12a.safetensors"), std::nullopt);
  EXPECT_FALSE(latest_checkpoint(dir / "none").has_value());
  EXPECT_FALSE(latest_checkpoint(dir).has_value());
  for (std::int64_t step : {9, 40, 100}) test::write(checkpoint_path(dir, step), "x");
  test::write(dir / "step_99999999.tmp", "x");    // not a checkpoint's extension
  test::write(dir / "other_5.safetensors", "x");  // not a step file
  test::write(dir / "step_x.safetensors", "x");   // nor this
  ASSERT_TRUE(latest_checkpoint(dir).has_value());
  EXPECT_EQ(*latest_checkpoint(dir), checkpoint_path(dir, 100));
  // Past 8 digits the name is longer: the step decides, not the order of the names.
  EXPECT_EQ(checkpoint_path(dir, 123456789), dir / "step_123456789.safetensors");
  test::write(checkpoint_path(dir, 99999999), "x");
  test::write(checkpoint_path(dir, 100000000), "x");
  EXPECT_EQ(*latest_checkpoint(dir), checkpoint_path(dir, 100000000));
}

TEST(Checkpoint, TheChecksumSeesEveryByteAndTheLength) {
  std::vector<unsigned char> buf(100);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37);
  const std::uint64_t h = checkpoint_hash(buf.data(), buf.size());
  EXPECT_EQ(h, checkpoint_hash(buf.data(), buf.size()));
  for (std::size_t i = 0; i < buf.size(); ++i) {  // lanes and the tail alike
    buf[i] ^= 1;
    EXPECT_NE(checkpoint_hash(buf.data(), buf.size()), h) << "byte " << i;
    buf[i] ^= 1;
  }
  const std::vector<unsigned char> zeros(64, 0);
  EXPECT_NE(checkpoint_hash(zeros.data(), 32), checkpoint_hash(zeros.data(), 64));
}

}  // namespace
}  // namespace eth::checkpoint_test
