// ProfileDb: exact lookups, linear interpolation in micro-batch size, proportional extrapolation
// above the largest size, refusals (below the smallest size, a tp never profiled) that name the
// key, and backward time with recompute.
#include <gtest/gtest.h>

#include "cluster/cluster_spec.h"
#include "core/error.h"
#include "profile/analytic.h"
#include "profile/profile.h"

namespace eth {
namespace {

class ProfileDbTest : public ::testing::Test {
 protected:
  ModelSpec m = model_preset("tiny");
  DeviceType a100 = *find_device_type_preset("A100");
  ProfileDb db{m};
  void SetUp() override {
    db.add(analytic_profile(m, a100, 1, 2, m.seq_len));
    db.add(analytic_profile(m, a100, 1, 4, m.seq_len));
  }
};

TEST_F(ProfileDbTest, ExactLookupReturnsTheEntry) {
  const ProfileLookup l = db.lookup("A100", 1, 4);
  EXPECT_EQ(l.quality, ProfileQuality::Exact);
  EXPECT_EQ(l.entry, analytic_profile(m, a100, 1, 4, m.seq_len));
  EXPECT_EQ(profile_quality_name(l.quality), "exact");
}

TEST_F(ProfileDbTest, InterpolatesMidwayBetweenTwoAndFour) {
  const ProfileEntry e2 = db.lookup("A100", 1, 2).entry;
  const ProfileEntry e4 = db.lookup("A100", 1, 4).entry;
  const ProfileLookup l = db.lookup("A100", 1, 3);
  EXPECT_EQ(l.quality, ProfileQuality::Interpolated);
  EXPECT_EQ(l.entry.key.mbs, 3);
  for (std::size_t u = 0; u < e2.units.size(); ++u) {
    const UnitProfile& got = l.entry.units[u];
    // mbs 3 is halfway from 2 to 4: every time and byte count is the midpoint.
    EXPECT_DOUBLE_EQ(got.forward_ms, (e2.units[u].forward_ms + e4.units[u].forward_ms) / 2);
    EXPECT_DOUBLE_EQ(got.backward_ms, (e2.units[u].backward_ms + e4.units[u].backward_ms) / 2);
    EXPECT_DOUBLE_EQ(got.activation.total(),
                     (e2.units[u].activation.total() + e4.units[u].activation.total()) / 2);
    EXPECT_DOUBLE_EQ(got.recompute_ms[0],
                     (e2.units[u].recompute_ms[0] + e4.units[u].recompute_ms[0]) / 2);
    EXPECT_EQ(got.params, e2.units[u].params);  // parameters do not depend on the batch
  }
}

TEST_F(ProfileDbTest, ExtrapolatesProportionallyAboveTheLargest) {
  const ProfileEntry e4 = db.lookup("A100", 1, 4).entry;
  const ProfileLookup l = db.lookup("A100", 1, 10);
  EXPECT_EQ(l.quality, ProfileQuality::Extrapolated);
  for (std::size_t u = 0; u < e4.units.size(); ++u) {
    // 10 / 4 = 2.5 times the largest profiled size.
    EXPECT_DOUBLE_EQ(l.entry.units[u].forward_ms, 2.5 * e4.units[u].forward_ms);
    EXPECT_DOUBLE_EQ(l.entry.units[u].activation.other, 2.5 * e4.units[u].activation.other);
  }
}

TEST(ProfileDbBlend, KeepsThePrecisionAndTheProcessBaseline) {
  // Neither depends on the micro-batch size: an interpolated or extrapolated entry is of the
  // measured precision (its bytes per parameter) with the larger baseline of its two entries,
  // not scaled.
  const ModelSpec m = model_preset("tiny");
  ProfileDb db(m);
  for (std::int64_t mbs : {2, 4}) {
    ProfileEntry e = analytic_profile(m, *find_device_type_preset("A100"), 1, mbs, m.seq_len);
    e.precision = Precision::Bf16;
    e.process_baseline_bytes = mbs == 2 ? 2e7 : 3e7;
    db.add(e);
  }
  for (std::int64_t mbs : {3, 10}) {
    const ProfileEntry got = db.lookup("A100", 1, mbs).entry;
    EXPECT_EQ(got.precision, Precision::Bf16) << "mbs " << mbs;
    EXPECT_EQ(got.process_baseline_bytes, 3e7) << "mbs " << mbs;
  }
}

TEST_F(ProfileDbTest, RefusesBelowTheSmallestSizeNamingTheKey) {
  try {
    db.lookup("A100", 1, 1);
    FAIL() << "mbs 1 is below the smallest profiled size 2";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(device type A100, tp 1, mbs 1)"), std::string::npos)
        << e.what();
  }
}

TEST_F(ProfileDbTest, RefusesAMissingTpOrDeviceTypeNamingTheKey) {
  try {
    db.lookup("A100", 2, 4);
    FAIL() << "tp 2 was never profiled";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("(device type A100, tp 2, mbs 4)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(db.lookup("RTX3090", 1, 4), InputError);
  EXPECT_TRUE(db.has_device_tp("A100", 1));
  EXPECT_FALSE(db.has_device_tp("A100", 2));
  EXPECT_FALSE(db.has_device_tp("RTX3090", 1));
}

TEST(UnitProfileTest, BackwardWithRecomputeAddsTheChosenClasses) {
  UnitProfile u;
  u.backward_ms = 10;
  u.forward_ms = 5;
  u.recompute_ms = {1, 2, 3,
                    4, 6, 5};  // qkv, attn_score, attn_softmax, attn_dropout, mlp_act, unit
  RecomputeSet rc;
  EXPECT_DOUBLE_EQ(u.backward_with_recompute_ms(rc), 10);
  rc.add(RecomputeOp::Qkv);
  rc.add(RecomputeOp::MlpAct);
  EXPECT_DOUBLE_EQ(u.backward_with_recompute_ms(rc), 10 + 1 + 6);
  // The full unit reruns the whole forward once, whatever else is listed.
  rc.add(RecomputeOp::Unit);
  EXPECT_DOUBLE_EQ(u.backward_with_recompute_ms(rc), 10 + 5);
}

}  // namespace
}  // namespace eth
