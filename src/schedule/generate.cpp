// 1F1B and GPipe compute orders. Each generator checks its own bookkeeping before returning
// (one F and one B per micro-batch per stage), as STYLE.md section 9 asks.
#include "schedule/generate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"

namespace eth {

namespace {

void check_counts(const Schedule& s) {
  for (const auto& p : s.programs) {
    std::vector<int> f(static_cast<std::size_t>(s.num_microbatches), 0);
    std::vector<int> b(f.size(), 0);
    for (const auto& a : p.actions) {
      auto& v = a.kind == ActionKind::Forward ? f : b;
      ++v.at(static_cast<std::size_t>(a.microbatch));
    }
    for (std::size_t i = 0; i < f.size(); ++i) {
      ETH_CHECK(f[i] == 1 && b[i] == 1, "generator: stage " + std::to_string(p.stage) +
                                            " micro-batch " + std::to_string(i) +
                                            " lacks exactly one F and one B");
    }
  }
}

Schedule empty_schedule(ScheduleKind kind, std::int64_t num_stages, std::int64_t num_microbatches) {
  ETH_CHECK(num_stages >= 1 && num_microbatches >= 1, "schedule needs >= 1 stage and micro-batch");
  Schedule s;
  s.kind = kind;
  s.num_stages = num_stages;
  s.num_microbatches = num_microbatches;
  s.programs.resize(static_cast<std::size_t>(num_stages));
  for (std::int64_t st = 0; st < num_stages; ++st) {
    s.programs[static_cast<std::size_t>(st)].stage = st;
    s.programs[static_cast<std::size_t>(st)].actions.reserve(
        static_cast<std::size_t>(2 * num_microbatches));
  }
  return s;
}

}  // namespace

Schedule make_1f1b(std::int64_t num_stages, std::int64_t num_microbatches) {
  Schedule s = empty_schedule(ScheduleKind::OneFOneB, num_stages, num_microbatches);
  const std::int64_t k = num_microbatches;
  for (auto& p : s.programs) {
    const std::int64_t st = p.stage;
    const std::int64_t warmup = std::min(num_stages - st - 1, k);
    auto fwd = [&](std::int64_t mb) { p.actions.push_back({ActionKind::Forward, st, mb, -1}); };
    auto bwd = [&](std::int64_t mb) { p.actions.push_back({ActionKind::Backward, st, mb, -1}); };
    for (std::int64_t mb = 0; mb < warmup; ++mb) fwd(mb);
    for (std::int64_t i = 0; i < k - warmup; ++i) {
      fwd(warmup + i);
      bwd(i);
    }
    for (std::int64_t mb = k - warmup; mb < k; ++mb) bwd(mb);
  }
  check_counts(s);
  return s;
}

Schedule make_gpipe(std::int64_t num_stages, std::int64_t num_microbatches) {
  Schedule s = empty_schedule(ScheduleKind::GPipe, num_stages, num_microbatches);
  for (auto& p : s.programs) {
    for (std::int64_t mb = 0; mb < num_microbatches; ++mb) {
      p.actions.push_back({ActionKind::Forward, p.stage, mb, -1});
    }
    for (std::int64_t mb = 0; mb < num_microbatches; ++mb) {
      p.actions.push_back({ActionKind::Backward, p.stage, mb, -1});
    }
  }
  check_counts(s);
  return s;
}

Schedule make_schedule(ScheduleKind kind, std::int64_t num_stages, std::int64_t num_microbatches) {
  return kind == ScheduleKind::GPipe ? make_gpipe(num_stages, num_microbatches)
                                     : make_1f1b(num_stages, num_microbatches);
}

}  // namespace eth
