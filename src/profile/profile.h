// Profiles: per (device type, tp, micro-batch size), the cost of every unit of a model: forward
// and backward time, parameters, and activation bytes per operator class with the extra time
// recomputing each class costs. The database answers lookups, interpolating in micro-batch size
// only where that is sound and saying so. Sources: profile/analytic.h (FLOP counts),
// profile/metis_format.h (Metis's files), the runtime's measurements (`eth profile --measure`).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/precision.h"
#include "model/arithmetic.h"
#include "model/model_spec.h"

namespace eth {

struct UnitProfile {
  double forward_ms = 0;   // one micro-batch, forward
  double backward_ms = 0;  // one micro-batch, backward, nothing recomputed
  std::int64_t params = 0; // parameters held per tp rank (bytes each: the entry's precision)
  ActivationBytes activation;  // bytes held per micro-batch, per operator class
  // Extra backward time when recomputing each class (indexed by RecomputeOp; Unit = a full
  // forward of the unit).
  std::array<double, kNumRecomputeOps> recompute_ms{};
  bool operator==(const UnitProfile& o) const;

  // Backward time including the recomputed forward work of `rc`.
  double backward_with_recompute_ms(const RecomputeSet& rc) const;
};

struct ProfileKey {
  std::string device_type;
  std::int64_t tp = 1;
  std::int64_t mbs = 1;
  auto operator<=>(const ProfileKey&) const = default;
};

struct ProfileEntry {
  ProfileKey key;
  std::int64_t seq_len = 0;
  std::string source;  // "analytic", "metis", "measured"
  // What was measured (or modelled): the bytes of its activations and the state the memory model
  // charges per parameter (core/precision.h). Analytic and Metis profiles describe the paper's
  // 16-bit GPU training (Mixed16); `eth profile --measure` records fp32 or bf16.
  Precision precision = Precision::Mixed16;
  std::vector<UnitProfile> units;  // one per model unit
  double optimizer_ms = 0;  // whole-model optimizer step on this device at this tp (Metis field)
  // Resident memory of the training process before any model buffer exists (libraries, the
  // communication and threading runtimes): what every device of this type holds besides the
  // model. `eth profile --measure` records its own; 0 where not measured (analytic, Metis).
  double process_baseline_bytes = 0;
  bool operator==(const ProfileEntry&) const = default;
};

// How a lookup was answered.
enum class ProfileQuality : std::uint8_t { Exact, Interpolated, Extrapolated };
std::string_view profile_quality_name(ProfileQuality q);

struct ProfileLookup {
  ProfileEntry entry;  // key.mbs is the requested micro-batch size
  ProfileQuality quality = ProfileQuality::Exact;
};

class ProfileDb {
 public:
  explicit ProfileDb(ModelSpec model) : model_(std::move(model)) {}

  const ModelSpec& model() const { return model_; }
  void add(ProfileEntry e);  // ETH_CHECKs that units.size() == model.num_units()
  const std::map<ProfileKey, ProfileEntry>& entries() const { return entries_; }
  bool has_device_tp(const std::string& device_type, std::int64_t tp) const;

  // Exact entry, or linear interpolation between the nearest profiled micro-batch sizes of the
  // same (device type, tp), or linear extrapolation (time and bytes proportional to mbs) above
  // the largest profiled size. Never across tp or device types. Throws InputError naming the key
  // when no sound answer exists (no entry for that device type and tp, or mbs below the smallest
  // profiled size).
  ProfileLookup lookup(const std::string& device_type, std::int64_t tp, std::int64_t mbs) const;

 private:
  ModelSpec model_;
  std::map<ProfileKey, ProfileEntry> entries_;
};

}  // namespace eth
