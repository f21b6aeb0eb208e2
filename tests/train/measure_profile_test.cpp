// Measured profiles (train/measure_profile.h, `eth profile --measure`): the activation bytes
// read off StageCompute's buffers stand in an exact, stated relation to model/arithmetic.h's
// 16-bit formula; times are positive and grow with the micro-batch; the written folder
// round-trips through the profile reader. Tiny model, one thread. The command,
// `eth profile --measure`, end to end: cmd_profile_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "model/arithmetic.h"
#include "profile/profile_io.h"
#include "train/measure_profile.h"
#include "measure_test_util.h"
#include "train_test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

MeasureOptions quick(std::int64_t mbs, std::int64_t seq, float dropout) {
  MeasureOptions o = test::quick_measure(mbs, seq);
  o.dropout = dropout;
  o.cold_cache = false;  // these tests check values, not conditions: warm is seconds faster
  return o;
}

std::size_t idx(RecomputeOp op) { return static_cast<std::size_t>(op); }

// fp32 against the 16-bit formula (t = 1, ffn = 4h as in `tiny`), term by term:
//  - every tensor the formula counts at 2 bytes per element is 4 here (factor 2): Q/K/V, P,
//    the dropped-out P, the GELU output and input, the norm inputs and outputs, proj's input,
//    each unit's input; the 1-byte dropout masks are 1 byte here too (factor 1);
//  - layer norm keeps its mean and rstd (2 floats per token per norm: 16*s*b per block, 16*s*b
//    in the head), which the formula neglects;
//  - without dropout there are no masks and no separate dropped-out P (it is P itself);
//  - the head keeps fp32 logits only (4*s*b*V; the gradient overwrites them in place), where the
//    formula has 16-bit logits plus their fp32 softmax (6*s*b*V), and log-sum-exp and loss per
//    token (8*s*b).
void expect_bytes_relation(std::int64_t mbs, std::int64_t seq, float dropout) {
  const MeasureOptions o = quick(mbs, seq, dropout);
  const ModelSpec& m = o.model;
  ASSERT_EQ(m.ffn, 4 * m.hidden) << "the relation below assumes ffn = 4h";
  const ProfileEntry e = measure_profile(o);
  ASSERT_EQ(e.units.size(), static_cast<std::size_t>(m.num_units()));
  const double s = static_cast<double>(seq), b = static_cast<double>(mbs);
  const double sb = s * b, sbh = sb * static_cast<double>(m.hidden);
  const bool drop = dropout > 0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    SCOPED_TRACE("unit " + std::to_string(u) + (drop ? " with dropout" : " without dropout"));
    const ActivationBytes& got = e.units[static_cast<std::size_t>(u)].activation;
    const ActivationBytes f = activation_bytes_16bit(m, u, mbs, seq, 1);
    switch (unit_kind(m, u)) {
      case UnitKind::Embedding:
        // int32 token ids (and the mask): the formula's own bytes.
        EXPECT_EQ(got.other, drop ? f.other : f.other - sbh);
        EXPECT_EQ(got.unit_input, f.unit_input);
        for (double op : got.op) EXPECT_EQ(op, 0.0);
        break;
      case UnitKind::Block:
        EXPECT_EQ(got.op[idx(RecomputeOp::Qkv)], 2 * f.op[idx(RecomputeOp::Qkv)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnSoftmax)], 2 * f.op[idx(RecomputeOp::AttnSoftmax)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::MlpAct)], 2 * f.op[idx(RecomputeOp::MlpAct)]);
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnScore)],
                  drop ? 2 * f.op[idx(RecomputeOp::AttnScore)] : 0.0);
        EXPECT_EQ(got.op[idx(RecomputeOp::AttnDropout)],
                  drop ? f.op[idx(RecomputeOp::AttnDropout)] : 0.0);
        // f.other = 18 sbh at 2 bytes per element + 2 sbh of masks.
        EXPECT_EQ(got.other, 2 * (f.other - 2 * sbh) + (drop ? 2 * sbh : 0.0) + 16 * sb);
        EXPECT_EQ(got.unit_input, 2 * f.unit_input);
        break;
      case UnitKind::Head: {
        const double sbv = sb * static_cast<double>(m.vocab);
        // f.other = 4 sbh (norm input and output) + 6 sbV (logits and softmax).
        EXPECT_EQ(f.other, 4 * sbh + 6 * sbv);
        EXPECT_EQ(got.other, 2 * 4 * sbh + 4 * sbv + 16 * sb);
        EXPECT_EQ(got.unit_input, 2 * f.unit_input);
        for (double op : got.op) EXPECT_EQ(op, 0.0);
        break;
      }
    }
  }
}

TEST(Measure, ActivationBytesStandInTheStatedRelationToTheFormula) {
  expect_bytes_relation(2, 32, 0.1f);
  expect_bytes_relation(3, 64, 0.0f);
}

TEST(Measure, RecordsTheProcessBaselineGivenOrReadBeforeMeasuring) {
  MeasureOptions o = quick(1, 16, 0.0f);
  o.process_baseline_bytes = 12345;
  EXPECT_EQ(measure_profile(o).process_baseline_bytes, 12345);
  // Unset, the resident set when measuring starts: more than nothing (this test binary's code
  // and libraries are resident), at most what the process holds afterwards.
  o.process_baseline_bytes = -1;
  const double got = measure_profile(o).process_baseline_bytes;
  EXPECT_GT(got, 1e6);
  EXPECT_LE(got, process_resident_bytes() + 64e6);  // allocator slack since then
}

TEST(Measure, TimesArePositiveAndGrowWithTheMicroBatch) {
  MeasureOptions small = quick(1, 64, 0.0f), big = quick(16, 64, 0.0f);
  for (MeasureOptions* o : {&small, &big}) {
    o->repeats = 5;
    o->warmup = 1;
    o->recompute_times = true;
  }
  const ProfileEntry a = measure_profile(small), b = measure_profile(big);
  EXPECT_EQ(a.key, (ProfileKey{"cpu", 1, 1}));
  EXPECT_EQ(b.key, (ProfileKey{"cpu", 1, 16}));
  EXPECT_EQ(a.source, "measured");
  EXPECT_EQ(a.seq_len, 64);
  EXPECT_GT(a.optimizer_ms, 0.0);
  double blocks_a = 0, blocks_b = 0;
  for (std::size_t u = 0; u < a.units.size(); ++u) {
    for (const ProfileEntry* e : {&a, &b}) {
      EXPECT_GT(e->units[u].forward_ms, 0.0) << "unit " << u;
      EXPECT_GT(e->units[u].backward_ms, 0.0) << "unit " << u;
      for (double r : e->units[u].recompute_ms) EXPECT_GE(r, 0.0);
    }
    EXPECT_EQ(a.units[u].params, unit_params(small.model, static_cast<std::int64_t>(u)));
    if (u > 0 && u + 1 < a.units.size()) {
      blocks_a += a.units[u].forward_ms + a.units[u].backward_ms;
      blocks_b += b.units[u].forward_ms + b.units[u].backward_ms;
    }
  }
  // 16 times the tokens: far more than the noise of medians of five on a loaded machine, but
  // below 16x (fixed costs per call), so only "larger" is claimed.
  EXPECT_GT(blocks_b, 2 * blocks_a) << blocks_a << " ms at mbs 1, " << blocks_b << " at mbs 16";
}

TEST(Measure, BadOptionsAreRefusedByFlagBeforeWork) {
  const ModelSpec gpt2 = load_model("gpt2-small");
  MeasureOptions o = quick(0, 32, 0.0f);
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--micro-batch-sizes"),
            std::string::npos);
  o = quick(1, 65, 0.0f);
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--seq"),
            std::string::npos);
  o = quick(1, 32, 1.0f);
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--dropout"),
            std::string::npos);
  o = quick(1, 32, 0.0f);
  o.optimizer_neighbours = -1;
  EXPECT_NE(test::error_of([&] { check_measure_options(o, 1e12); }).find("--optimizer-neighbours"),
            std::string::npos);
  // gpt2-small at micro-batch 4096 needs far more than 64 GB (its logits alone: 4096 x 1024 x
  // 50257 floats); refused by arithmetic, nothing allocated.
  o = quick(4096, 0, 0.0f);
  o.model = gpt2;
  const std::string msg = test::error_of([&] { check_measure_options(o, 64e9); });
  EXPECT_NE(msg.find("--micro-batch-sizes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4096"), std::string::npos) << msg;
  EXPECT_GT(measure_peak_bytes(o), 4096.0 * 1024 * 50257 * 4);
}

TEST(Measure, PeakCountsTheWholeModelsOptimizerStateAndEachNeighboursBuffers) {
  // gpt2-small at micro-batch 1: its optimizer step holds every parameter's master, gradient
  // and two moments (4 x 4 bytes) beside the bf16 copy, more than any one unit's measurement.
  MeasureOptions o = quick(1, 32, 0.0f);
  o.model = load_model("gpt2-small");
  o.precision = Precision::Bf16;
  const double params = static_cast<double>(total_params(o.model));
  const double alone = measure_peak_bytes(o);
  EXPECT_GE(alone, 18.0 * params);
  // Each neighbour streams four arrays of its own, 64 MiB in all.
  o.optimizer_neighbours = 3;
  EXPECT_NEAR(measure_peak_bytes(o) - alone, 3 * 64.0 * 1024 * 1024, 1.0);
}

TEST(Measure, NeighboursFollowEveryRoundAndEnd) {
  // A tiny model's optimizer step takes microseconds, a neighbour's pass over its 64 MiB
  // milliseconds: every stop() and the next go() land inside one pass, the case in which a
  // neighbour that only watched a running flag never took the next round and measuring hung.
  // ctest's timeout is the failure here.
  MeasureOptions o = quick(1, 16, 0.0f);
  o.optimizer_neighbours = 2;
  o.repeats = 25;
  o.recompute_times = false;
  const ProfileEntry e = measure_profile(o);
  EXPECT_GT(e.optimizer_ms, 0.0);
}

// ---- through the files and the tool ------------------------------------------------------

TEST(Measure, WrittenProfileRoundTripsThroughTheReader) {
  const fs::path dir = test::temp_dir("measure_roundtrip");
  const ModelSpec m = load_model("tiny");
  ProfileDb db(m);
  for (std::int64_t b : {1, 2}) {
    MeasureOptions o = quick(b, 32, 0.1f);
    o.recompute_times = true;
    db.add(measure_profile(o));
  }
  EXPECT_EQ(write_profile_dir(db, dir), 2u);
  EXPECT_TRUE(fs::exists(dir / "cpu_tp1_mbs2.json"));
  const ProfileDb back = read_profile_dir(dir, m);
  EXPECT_EQ(back.entries(), db.entries());
  // Interpolation between measured sizes works like any profile's.
  EXPECT_EQ(back.lookup("cpu", 1, 2).quality, ProfileQuality::Exact);
}

}  // namespace
}  // namespace eth
