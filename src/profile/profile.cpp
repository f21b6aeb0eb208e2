// ProfileDb: storing entries and answering lookups, with interpolation in micro-batch size
// between profiled sizes and proportional extrapolation above the largest. Not a file format:
// see profile_io.h and metis_format.h.
#include "profile/profile.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace eth {

bool UnitProfile::operator==(const UnitProfile& o) const {
  return forward_ms == o.forward_ms && backward_ms == o.backward_ms && params == o.params &&
         activation.op == o.activation.op && activation.other == o.activation.other &&
         activation.unit_input == o.activation.unit_input && recompute_ms == o.recompute_ms;
}

double UnitProfile::backward_with_recompute_ms(const RecomputeSet& rc) const {
  // A full-unit recompute reruns the whole forward, which already covers every operator class.
  if (rc.full_unit()) {
    return backward_ms + recompute_ms[static_cast<std::size_t>(RecomputeOp::Unit)];
  }
  double t = backward_ms;
  for (RecomputeOp op : rc.ops()) t += recompute_ms[static_cast<std::size_t>(op)];
  return t;
}

std::string_view profile_quality_name(ProfileQuality q) {
  switch (q) {
    case ProfileQuality::Exact:
      return "exact";
    case ProfileQuality::Interpolated:
      return "interpolated";
    case ProfileQuality::Extrapolated:
      return "extrapolated";
  }
  return "unknown";
}

void ProfileDb::add(ProfileEntry e) {
  ETH_CHECK(static_cast<std::int64_t>(e.units.size()) == model_.num_units(),
            "profile entry for " + e.key.device_type + " has " + std::to_string(e.units.size()) +
                " units, model has " + std::to_string(model_.num_units()));
  ETH_CHECK(e.key.tp >= 1 && e.key.mbs >= 1, "profile key needs tp >= 1 and mbs >= 1");
  ProfileKey k = e.key;
  entries_.insert_or_assign(std::move(k), std::move(e));
}

bool ProfileDb::has_device_tp(const std::string& device_type, std::int64_t tp) const {
  auto it = entries_.lower_bound(ProfileKey{device_type, tp, 0});
  return it != entries_.end() && it->first.device_type == device_type && it->first.tp == tp;
}

namespace {

// wa*a + wb*b for every time and byte count; parameters do not depend on the micro-batch size
// and are taken from `a`.
UnitProfile blend(const UnitProfile& a, double wa, const UnitProfile& b, double wb) {
  UnitProfile u;
  u.forward_ms = wa * a.forward_ms + wb * b.forward_ms;
  u.backward_ms = wa * a.backward_ms + wb * b.backward_ms;
  u.params = a.params;
  for (std::size_t i = 0; i < u.activation.op.size(); ++i) {
    u.activation.op[i] = wa * a.activation.op[i] + wb * b.activation.op[i];
  }
  u.activation.other = wa * a.activation.other + wb * b.activation.other;
  u.activation.unit_input = wa * a.activation.unit_input + wb * b.activation.unit_input;
  for (std::size_t i = 0; i < u.recompute_ms.size(); ++i) {
    u.recompute_ms[i] = wa * a.recompute_ms[i] + wb * b.recompute_ms[i];
  }
  return u;
}

ProfileEntry blend_entry(const ProfileEntry& a, double wa, const ProfileEntry& b, double wb,
                         std::int64_t mbs) {
  ProfileEntry e;
  e.key = a.key;
  e.key.mbs = mbs;
  e.seq_len = a.seq_len;
  e.source = a.source;
  e.precision = a.precision;
  e.optimizer_ms = a.optimizer_ms;  // the optimizer step does not depend on the micro-batch
  // Nor does the process's own memory: the larger of the two.
  e.process_baseline_bytes = std::max(a.process_baseline_bytes, b.process_baseline_bytes);
  e.units.reserve(a.units.size());
  for (std::size_t u = 0; u < a.units.size(); ++u) {
    e.units.push_back(blend(a.units[u], wa, b.units[u], wb));
  }
  return e;
}

std::string key_text(const std::string& device_type, std::int64_t tp, std::int64_t mbs) {
  return "(device type " + device_type + ", tp " + std::to_string(tp) + ", mbs " +
         std::to_string(mbs) + ")";
}

}  // namespace

ProfileLookup ProfileDb::lookup(const std::string& device_type, std::int64_t tp,
                                std::int64_t mbs) const {
  const std::string key = key_text(device_type, tp, mbs);
  if (mbs < 1) throw InputError("profile", "", "", "no profile for " + key + ": mbs must be >= 1");
  // Entries of one (device type, tp) are contiguous in the map, ordered by mbs.
  const auto first = entries_.lower_bound(ProfileKey{device_type, tp, 0});
  const auto last = entries_.lower_bound(ProfileKey{device_type, tp + 1, 0});
  if (first == last) {
    throw InputError("profile", "", "",
                     "no profile for " + key + ": nothing profiled for device type " + device_type +
                         " at tp " + std::to_string(tp));
  }
  const auto hit = entries_.find(ProfileKey{device_type, tp, mbs});
  if (hit != entries_.end()) return {hit->second, ProfileQuality::Exact};

  const auto above = entries_.lower_bound(ProfileKey{device_type, tp, mbs});
  if (above == first) {
    // Below the smallest profiled size, small-batch efficiency falls off in ways a line through
    // larger sizes does not capture (kernel launch and fixed costs dominate): refuse.
    throw InputError("profile", "", "",
                     "no profile for " + key + ": below the smallest profiled micro-batch size " +
                         std::to_string(first->first.mbs) + " (profile it)");
  }
  if (above == last) {
    // Above the largest size the device is saturated: time and bytes grow in proportion.
    const ProfileEntry& top = std::prev(last)->second;
    const double scale = static_cast<double>(mbs) / static_cast<double>(top.key.mbs);
    return {blend_entry(top, scale, top, 0.0, mbs), ProfileQuality::Extrapolated};
  }
  const ProfileEntry& lo = std::prev(above)->second;
  const ProfileEntry& hi = above->second;
  const double w =
      static_cast<double>(mbs - lo.key.mbs) / static_cast<double>(hi.key.mbs - lo.key.mbs);
  return {blend_entry(lo, 1.0 - w, hi, w, mbs), ProfileQuality::Interpolated};
}

}  // namespace eth
