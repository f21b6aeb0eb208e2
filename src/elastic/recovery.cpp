// The checkpoint to resume and the plan for what is left (recovery.h).
#include "elastic/recovery.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "train/checkpoint.h"

namespace eth {

std::optional<ResumePoint> latest_whole_checkpoint(const std::filesystem::path& dir,
                                                   std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::pair<std::int64_t, std::filesystem::path>> files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // checkpoint_path's names only, ordered by the number: past 8 digits the zero padding no
    // longer sorts them.
    if (const std::optional<std::int64_t> step = checkpoint_step(it->path())) {
      files.emplace_back(*step, it->path());
    }
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a > b; });
  for (const auto& [step, f] : files) {
    try {
      return ResumePoint{f, read_checkpoint_meta(f).step};
    } catch (const InputError& e) {
      if (skipped != nullptr) skipped->push_back(f.string() + ": " + e.what());
    }
  }
  return std::nullopt;
}

Replan replan(const ReplanInputs& in, const std::set<std::int64_t>& lost) {
  ETH_CHECK(in.profile != nullptr, "replan: no profile");
  Replan r{surviving_cluster(in.full, lost), {}};
  r.result = plan_training(in.method, in.model, r.surviving.cluster, *in.profile, in.gbs,
                           in.seq_len, in.options);
  return r;
}

bool plan_uses_any(const Plan& plan, const std::set<std::int64_t>& devices) {
  for (std::int64_t d : plan.device_ids()) {
    if (devices.count(d) != 0) return true;
  }
  return false;
}

}  // namespace eth
