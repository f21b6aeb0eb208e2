// The schedule validator: per-stage structure, p2p pairing, in-flight limits, then a timeless
// dry run (each stage executes at most one action per step, and only once its inputs were
// produced in an earlier step) that also yields the step order for the F/B ordering rules.
#include "schedule/validate.h"

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"
#include "schedule/lower.h"

namespace eth {

namespace {

using Idx = std::int64_t;

std::string at(const Action& a) {
  return "stage " + std::to_string(a.stage) + " " + action_token(a);
}

// Positions of F and B per (stage, mb) in program order, -1 if absent.
struct Positions {
  std::vector<std::vector<Idx>> f, b;
};

void check_structure(const Schedule& s, std::vector<std::string>& out, Positions& pos) {
  const Idx k = s.num_microbatches;
  const auto ku = static_cast<std::size_t>(std::max<Idx>(k, 0));
  pos.f.assign(s.programs.size(), std::vector<Idx>(ku, -1));
  pos.b = pos.f;
  for (std::size_t si = 0; si < s.programs.size(); ++si) {
    const auto& p = s.programs[si];
    if (p.stage != static_cast<Idx>(si)) {
      out.push_back("program " + std::to_string(si) + " names stage " + std::to_string(p.stage));
    }
    for (std::size_t i = 0; i < p.actions.size(); ++i) {
      const Action& a = p.actions[i];
      if (a.stage != static_cast<Idx>(si)) {
        out.push_back("program " + std::to_string(si) + " holds " + at(a));
      }
      if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
        if (a.microbatch < 0 || a.microbatch >= k) {
          out.push_back(at(a) + ": micro-batch outside [0, " + std::to_string(k) + ")");
          continue;
        }
        auto& slot =
            (a.kind == ActionKind::Forward ? pos.f
                                           : pos.b)[si][static_cast<std::size_t>(a.microbatch)];
        if (slot >= 0) out.push_back(at(a) + ": appears more than once");
        slot = static_cast<Idx>(i);
      }
    }
    for (std::size_t mb = 0; mb < ku; ++mb) {
      const std::string name = "stage " + std::to_string(si) + " micro-batch " + std::to_string(mb);
      if (pos.f[si][mb] < 0) out.push_back(name + ": no Forward");
      if (pos.b[si][mb] < 0) out.push_back(name + ": no Backward");
      if (pos.f[si][mb] >= 0 && pos.b[si][mb] >= 0 && pos.b[si][mb] < pos.f[si][mb]) {
        out.push_back(name + ": Backward before Forward");
      }
    }
  }
}

void check_p2p(const Schedule& s, const Positions& pos, std::vector<std::string>& out) {
  const Idx last = s.num_stages - 1;
  // (kind, stage, mb) -> program position; duplicates reported.
  std::map<std::tuple<ActionKind, Idx, Idx>, Idx> where;
  for (const auto& p : s.programs) {
    for (std::size_t i = 0; i < p.actions.size(); ++i) {
      const Action& a = p.actions[i];
      if (a.kind < ActionKind::SendActivation || a.kind > ActionKind::RecvGradient) continue;
      auto [it, fresh] =
          where.emplace(std::tuple{a.kind, a.stage, a.microbatch}, static_cast<Idx>(i));
      if (!fresh) out.push_back(at(a) + ": appears more than once");
    }
  }
  auto find = [&](ActionKind k, Idx st, Idx mb) -> Idx {
    auto it = where.find({k, st, mb});
    return it == where.end() ? -1 : it->second;
  };
  for (Idx st = 0; st <= last && st < static_cast<Idx>(pos.f.size()); ++st) {
    for (Idx mb = 0; mb < s.num_microbatches; ++mb) {
      const Idx f = pos.f[static_cast<std::size_t>(st)][static_cast<std::size_t>(mb)];
      const Idx b = pos.b[static_cast<std::size_t>(st)][static_cast<std::size_t>(mb)];
      const std::string name = "stage " + std::to_string(st) + " micro-batch " + std::to_string(mb);
      auto need = [&](ActionKind k, bool wanted, bool before, Idx anchor, const char* what) {
        const Idx p = find(k, st, mb);
        if (!wanted) {
          if (p >= 0) out.push_back(name + ": unexpected " + what);
          return;
        }
        if (p < 0) {
          out.push_back(name + ": no " + std::string(what));
        } else if (anchor >= 0 && (before ? p > anchor : p < anchor)) {
          out.push_back(name + ": " + what + (before ? " after" : " before") + " its compute");
        }
      };
      need(ActionKind::RecvActivation, st > 0, true, f, "RecvActivation");
      need(ActionKind::SendActivation, st < last, false, f, "SendActivation");
      need(ActionKind::RecvGradient, st < last, true, b, "RecvGradient");
      need(ActionKind::SendGradient, st > 0, false, b, "SendGradient");
    }
  }
  // Every send has exactly one receive on the neighbour (and no receive lacks its send).
  for (const auto& [key, p] : where) {
    const auto [k, st, mb] = key;
    (void)p;
    if (k == ActionKind::SendActivation && find(ActionKind::RecvActivation, st + 1, mb) < 0) {
      out.push_back("stage " + std::to_string(st) + " SA" + std::to_string(mb) +
                    ": no matching RecvActivation on stage " + std::to_string(st + 1));
    }
    if (k == ActionKind::SendGradient && find(ActionKind::RecvGradient, st - 1, mb) < 0) {
      out.push_back("stage " + std::to_string(st) + " SG" + std::to_string(mb) +
                    ": no matching RecvGradient on stage " + std::to_string(st - 1));
    }
    if (k == ActionKind::RecvActivation && find(ActionKind::SendActivation, st - 1, mb) < 0) {
      out.push_back("stage " + std::to_string(st) + " RA" + std::to_string(mb) +
                    ": no matching SendActivation on stage " + std::to_string(st - 1));
    }
    if (k == ActionKind::RecvGradient && find(ActionKind::SendGradient, st + 1, mb) < 0) {
      out.push_back("stage " + std::to_string(st) + " RG" + std::to_string(mb) +
                    ": no matching SendGradient on stage " + std::to_string(st + 1));
    }
  }
}

void check_tail_and_inflight(const Schedule& s, std::vector<std::string>& out) {
  for (const auto& p : s.programs) {
    Idx in_flight = 0, peak = 0, last_b = -1, prev_block = -1;
    for (std::size_t i = 0; i < p.actions.size(); ++i) {
      const Action& a = p.actions[i];
      if (a.kind == ActionKind::Forward) peak = std::max(peak, ++in_flight);
      if (a.kind == ActionKind::Backward) {
        --in_flight;
        last_b = static_cast<Idx>(i);
      }
      if (a.kind == ActionKind::ReduceGradients) {
        if (a.block <= prev_block) out.push_back(at(a) + ": blocks must ascend (global order)");
        prev_block = a.block;
      }
      if (a.kind == ActionKind::OptimizerStep && i + 1 != p.actions.size()) {
        out.push_back(at(a) + ": OptimizerStep must be the last action");
      }
    }
    for (std::size_t i = 0; i < p.actions.size(); ++i) {
      if (p.actions[i].kind == ActionKind::OptimizerStep && static_cast<Idx>(i) < last_b) {
        out.push_back(at(p.actions[i]) + ": OptimizerStep before the last Backward");
      }
      // A reduction placed earlier would post gradients the later backwards still add to; the
      // executor may post it sooner (during the last Backward, once its units are final), never
      // later than its place.
      if (p.actions[i].kind == ActionKind::ReduceGradients && static_cast<Idx>(i) < last_b) {
        out.push_back(at(p.actions[i]) + ": ReduceGradients before the last Backward");
      }
    }
    const Idx limit = s.num_stages - p.stage;
    if (s.kind == ScheduleKind::OneFOneB && peak > limit) {
      out.push_back(
          "stage " + std::to_string(p.stage) + ": " + std::to_string(peak) +
          " micro-batches in flight; 1F1B allows at most S - s = " + std::to_string(limit));
    }
  }
}

// Timeless dry run. Returns the step at which each (stage, action index) ran.
std::vector<std::vector<Idx>> dry_run(const Schedule& s, std::vector<std::string>& out) {
  const bool lowered = has_p2p(s);
  const auto S = s.programs.size();
  const auto ku = static_cast<std::size_t>(std::max<Idx>(s.num_microbatches, 0));
  std::vector<std::vector<Idx>> step_of(S);
  for (std::size_t i = 0; i < S; ++i) step_of[i].assign(s.programs[i].actions.size(), -1);
  // Step at which F / B / SA / SG of (stage, mb) ran; -1 = not yet.
  auto grid = [&] { return std::vector<std::vector<Idx>>(S, std::vector<Idx>(ku, -1)); };
  auto f_done = grid(), b_done = grid(), sa_done = grid(), sg_done = grid();
  auto ran_before = [&](const std::vector<std::vector<Idx>>& g, Idx st, Idx mb, Idx step) {
    if (st < 0 || st >= static_cast<Idx>(S) || mb < 0 || mb >= static_cast<Idx>(ku)) return false;
    const Idx v = g[static_cast<std::size_t>(st)][static_cast<std::size_t>(mb)];
    return v >= 0 && v < step;
  };
  std::vector<Idx> pc(S, 0);
  const Idx last = static_cast<Idx>(S) - 1;
  for (Idx step = 0;; ++step) {
    bool progressed = false, finished = true;
    for (std::size_t si = 0; si < S; ++si) {
      const auto& acts = s.programs[si].actions;
      if (pc[si] >= static_cast<Idx>(acts.size())) continue;
      finished = false;
      const Action& a = acts[static_cast<std::size_t>(pc[si])];
      const Idx st = static_cast<Idx>(si), mb = a.microbatch;
      bool ready = true;
      switch (a.kind) {
        case ActionKind::Forward:
          ready = lowered || st == 0 || ran_before(f_done, st - 1, mb, step);
          break;
        case ActionKind::Backward:
          ready = lowered || st == last || ran_before(b_done, st + 1, mb, step);
          break;
        case ActionKind::RecvActivation:
          ready = ran_before(sa_done, st - 1, mb, step);
          break;
        case ActionKind::RecvGradient:
          ready = ran_before(sg_done, st + 1, mb, step);
          break;
        default:
          break;
      }
      if (!ready) continue;
      const bool in_range = mb >= 0 && mb < static_cast<Idx>(ku);
      auto mark = [&](std::vector<std::vector<Idx>>& g) {
        if (in_range) g[si][static_cast<std::size_t>(mb)] = step;
      };
      if (a.kind == ActionKind::Forward) mark(f_done);
      if (a.kind == ActionKind::Backward) mark(b_done);
      if (a.kind == ActionKind::SendActivation) mark(sa_done);
      if (a.kind == ActionKind::SendGradient) mark(sg_done);
      step_of[si][static_cast<std::size_t>(pc[si])] = step;
      ++pc[si];
      progressed = true;
    }
    if (finished) break;
    if (!progressed) {
      out.push_back("deadlock: no stage can proceed; schedule grid:\n" + format_grid(s, pc));
      break;
    }
  }
  return step_of;
}

void check_order(const Schedule& s, const Positions& pos,
                 const std::vector<std::vector<Idx>>& step_of, std::vector<std::string>& out) {
  auto step = [&](const std::vector<std::vector<Idx>>& g, std::size_t st, std::size_t mb) -> Idx {
    const Idx i = g[st][mb];
    return i < 0 ? -1 : step_of[st][static_cast<std::size_t>(i)];
  };
  for (std::size_t st = 0; st + 1 < s.programs.size(); ++st) {
    for (std::size_t mb = 0; mb < pos.f[st].size(); ++mb) {
      const Idx f0 = step(pos.f, st, mb), f1 = step(pos.f, st + 1, mb);
      const Idx b0 = step(pos.b, st, mb), b1 = step(pos.b, st + 1, mb);
      const std::string m = std::to_string(mb);
      if (f0 >= 0 && f1 >= 0 && !(f0 < f1)) {
        out.push_back("F" + m + " on stage " + std::to_string(st + 1) + " does not follow F" + m +
                      " on stage " + std::to_string(st));
      }
      if (b0 >= 0 && b1 >= 0 && !(b1 < b0)) {
        out.push_back("B" + m + " on stage " + std::to_string(st) + " does not follow B" + m +
                      " on stage " + std::to_string(st + 1));
      }
    }
  }
}

}  // namespace

std::vector<std::string> validate_schedule(const Schedule& s) {
  std::vector<std::string> out;
  if (s.num_stages < 1 || s.num_microbatches < 1 ||
      static_cast<Idx>(s.programs.size()) != s.num_stages) {
    out.push_back("schedule: needs >= 1 stage, >= 1 micro-batch and one program per stage (" +
                  std::to_string(s.num_stages) + " stages, " + std::to_string(s.programs.size()) +
                  " programs, " + std::to_string(s.num_microbatches) + " micro-batches)");
    return out;
  }
  Positions pos;
  check_structure(s, out, pos);
  if (has_p2p(s)) check_p2p(s, pos, out);
  check_tail_and_inflight(s, out);
  if (!out.empty()) return out;  // the dry run assumes a well-formed schedule
  const auto step_of = dry_run(s, out);
  if (out.empty()) check_order(s, pos, step_of, out);
  return out;
}

void check_schedule(const Schedule& s, const std::string& source) {
  auto problems = validate_schedule(s);
  if (problems.empty()) return;
  std::vector<InputError> errs;
  for (auto& p : problems) errs.emplace_back("schedule", source, "", p);
  if (errs.size() == 1) throw errs.front();
  throw InputErrors(errs);
}

}  // namespace eth
