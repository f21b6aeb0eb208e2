// The lowering passes: paired send/receive insertion and the gradient tail of each program.
#include "schedule/lower.h"

#include <string>

#include "core/error.h"

namespace eth {

bool has_p2p(const Schedule& s) {
  for (const auto& p : s.programs) {
    for (const auto& a : p.actions) {
      if (a.kind >= ActionKind::SendActivation && a.kind <= ActionKind::RecvGradient) return true;
    }
  }
  return false;
}

void insert_p2p(Schedule& s) {
  ETH_CHECK(!has_p2p(s), "insert_p2p: the schedule already has send/receive actions");
  const std::int64_t last = s.num_stages - 1;
  for (auto& p : s.programs) {
    std::vector<Action> out;
    out.reserve(p.actions.size() * 2);
    const std::int64_t st = p.stage;
    for (const auto& a : p.actions) {
      if (a.kind == ActionKind::Forward) {
        if (st > 0) out.push_back({ActionKind::RecvActivation, st, a.microbatch, -1});
        out.push_back(a);
        if (st < last) out.push_back({ActionKind::SendActivation, st, a.microbatch, -1});
      } else if (a.kind == ActionKind::Backward) {
        if (st < last) out.push_back({ActionKind::RecvGradient, st, a.microbatch, -1});
        out.push_back(a);
        if (st > 0) out.push_back({ActionKind::SendGradient, st, a.microbatch, -1});
      } else {
        out.push_back(a);
      }
    }
    p.actions = std::move(out);
  }
}

void append_reductions(Schedule& s,
                       const std::vector<std::vector<std::int64_t>>& blocks_per_stage) {
  ETH_CHECK(static_cast<std::int64_t>(blocks_per_stage.size()) == s.num_stages,
            "append_reductions: one block list per stage");
  for (auto& p : s.programs) {
    for (const auto& a : p.actions) {
      ETH_CHECK(a.kind != ActionKind::OptimizerStep && a.kind != ActionKind::ReduceGradients,
                "append_reductions: stage " + std::to_string(p.stage) + " already has a tail");
    }
    std::int64_t prev = -1;
    for (std::int64_t b : blocks_per_stage[static_cast<std::size_t>(p.stage)]) {
      ETH_CHECK(b > prev, "append_reductions: blocks must be ascending (the global order)");
      prev = b;
      p.actions.push_back({ActionKind::ReduceGradients, p.stage, -1, b});
    }
    p.actions.push_back({ActionKind::OptimizerStep, p.stage, -1, -1});
  }
}

}  // namespace eth
