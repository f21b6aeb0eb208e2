// Scaling a measured profile to emulated device types. See emulated.h.
#include "profile/emulated.h"

#include <sstream>
#include <vector>

namespace eth {

ProfileDb emulated_profile(const ProfileDb& db, const ClusterSpec& cluster,
                           const std::string& base_type) {
  ProfileDb out(db.model());
  for (const auto& [name, type] : cluster.device_types) {
    bool own = false;
    for (const auto& [key, e] : db.entries()) own = own || key.device_type == name;
    // Only an emulated type runs the base type's kernels; a real one without entries of its own
    // stays missing, so lookups name it instead of silently pricing it as a CPU core.
    if (!own && type.emulated_slowdown == 1.0) continue;
    const std::string& source = own ? name : base_type;
    for (const auto& [key, e] : db.entries()) {
      if (key.device_type != source) continue;
      ProfileEntry copy = e;
      copy.key.device_type = name;
      const double f = type.emulated_slowdown;
      for (UnitProfile& u : copy.units) {
        u.forward_ms *= f;
        u.backward_ms *= f;
        for (double& r : u.recompute_ms) r *= f;
      }
      copy.optimizer_ms *= f;
      if (f != 1.0 || source != name) {
        std::ostringstream why;
        why << e.source << ", emulated x" << f;
        copy.source = why.str();
      }
      out.add(std::move(copy));
    }
  }
  return out;
}

}  // namespace eth
