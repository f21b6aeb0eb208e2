// Starting a run from a checkpoint's weights (train/init_from.h): the state holds exactly the
// file's parameters of its units (a stage, a tp shard) with zero moments; another model is
// refused naming the first field that differs, and so is --init-from with --resume; the trainer
// started that way is at step 0.
#include "train/init_from.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace eth::init_from_test {
namespace {

namespace fs = std::filesystem;

std::vector<float> values(const float* p, std::int64_t n) { return {p, p + n}; }

// A whole-model checkpoint whose moments are not zero.
fs::path trained_file(const fs::path& dir, const ModelSpec& m) {
  ModelState s(m, 0, m.num_units() - 1);
  s.init(21);
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    s.adam_m()[i] = 0.5f;
    s.adam_v()[i] = 0.25f;
  }
  CheckpointMeta meta;
  meta.model = m;
  meta.step = 7;
  meta.schedule = meta.data = meta.run = Json::object();
  write_checkpoint(dir / "c.safetensors", s, meta);
  return dir / "c.safetensors";
}

TEST(InitFrom, AStageAndATpShardTakeTheirParametersWithZeroMoments) {
  const fs::path dir = test::temp_dir("init_from_stage");
  const ModelSpec m{"tp", 2, 16, 4, 8, 31, 24};
  const fs::path file = trained_file(dir, m);
  ModelState whole(m, 0, m.num_units() - 1);
  whole.init(21);  // what the file holds
  EXPECT_EQ(checkpoint_model(file), m);
  ModelState stage(m, 1, 2);
  stage.init(3);
  init_from_checkpoint(file, stage);
  const std::int64_t off = whole.layout().offset(1, 0);
  EXPECT_EQ(values(stage.params(), stage.numel()), values(whole.params() + off, stage.numel()));
  EXPECT_EQ(values(stage.adam_m(), stage.numel()), std::vector<float>(stage.numel(), 0.0f));
  EXPECT_EQ(values(stage.adam_v(), stage.numel()), std::vector<float>(stage.numel(), 0.0f));
  ModelState shard(m, 0, m.num_units() - 1, 2, 1);  // tp rank 1 of 2
  init_from_checkpoint(file, shard);
  for (const UnitSlot& u : shard.layout().units()) {
    for (std::size_t i = 0; i < u.tensors.size(); ++i) {
      const TensorSlot& t = u.tensors[i];
      const std::int64_t at =
          whole.layout().unit(u.unit).tensors[i].offset + t.rows.begin * t.row_size();
      EXPECT_EQ(values(shard.params() + t.offset, t.desc.numel()),
                values(whole.params() + at, t.desc.numel()))
          << t.desc.name;
    }
  }
  EXPECT_EQ(values(shard.adam_v(), shard.numel()), std::vector<float>(shard.numel(), 0.0f));
}

TEST(InitFrom, AnotherModelIsRefusedNamingTheFirstFieldThatDiffers) {
  const ModelSpec m = test::small_model();
  const fs::path file = "/x/c.safetensors";
  ModelSpec renamed = m;
  renamed.name = "other";
  EXPECT_EQ(test::error_of([&] { check_init_model(file, m, renamed); }), "(no error)");
  const std::pair<const char*, std::int64_t ModelSpec::*> fields[] = {
      {"layers", &ModelSpec::layers}, {"hidden", &ModelSpec::hidden},
      {"heads", &ModelSpec::heads},   {"seq_len", &ModelSpec::seq_len},
      {"vocab", &ModelSpec::vocab},   {"ffn", &ModelSpec::ffn}};
  for (const auto& [field, member] : fields) {
    ModelSpec want = m;
    want.*member += 1;
    const std::string e = test::error_of([&] { check_init_model(file, m, want); });
    EXPECT_NE(e.find("/x/c.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("__metadata__.model.") + field), std::string::npos) << e;
  }
  ModelSpec two = m;
  two.hidden += 1;
  two.vocab += 1;
  const std::string e = test::error_of([&] { check_init_model(file, m, two); });
  EXPECT_NE(e.find("__metadata__.model.hidden"), std::string::npos) << e;  // the first
  EXPECT_EQ(test::error_of([&] { check_init_not_resume("", true); }), "(no error)");
  EXPECT_EQ(test::error_of([&] { check_init_not_resume(file, false); }), "(no error)");
  EXPECT_NE(test::error_of([&] { check_init_not_resume(file, true); }).find("--init-from"),
            std::string::npos);
}

TEST(InitFrom, StartsAtTheCheckpointsWeightsWithAFreshOptimizer) {
  const test::OneThread one;
  const fs::path dir = test::temp_dir("init_from");
  const ModelSpec m = test::small_model();
  TrainConfig c = test::short_run(m, test::synthetic_file(dir, 2000, m.vocab), 3);
  Trainer source(c);
  for (int i = 0; i < 3; ++i) source.step();
  const fs::path ckpt = source.save_checkpoint(dir / "ckpt");
  TrainConfig f = c;
  f.seed = 11;
  f.steps = 2;
  f.lr = LrSchedule{1e-3, 1e-4, 0, 2};
  f.init_from = ckpt;
  Trainer t(f);
  EXPECT_EQ(t.next_step(), 0);
  const auto n = static_cast<std::size_t>(t.state().numel());
  const std::vector<float> want(source.state().params(), source.state().params() + n);
  EXPECT_EQ(std::vector<float>(t.state().params(), t.state().params() + n), want);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(t.state().adam_m()[i], 0.0f) << i;
    ASSERT_EQ(t.state().adam_v()[i], 0.0f) << i;
  }
  // Refused: another model, a resume.
  TrainConfig other = f;
  other.model.hidden = 32;
  other.model.ffn = 128;
  try {
    Trainer bad(other);
    ADD_FAILURE() << "another model accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("__metadata__.model.hidden"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Trainer(f, ckpt), InputError);
}

}  // namespace
}  // namespace eth::init_from_test
