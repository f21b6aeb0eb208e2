// Names and the text forms of the schedule IR: the per-stage line form (round-trips) and the
// step x stage grid used in deadlock reports.
#include "schedule/schedule.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "core/error.h"

namespace eth {

namespace {

struct KindNames {
  ActionKind kind;
  std::string_view token;
  std::string_view name;
};

// Longest tokens first so "RD" is not read as "R" + "D".
constexpr KindNames kKindNames[kNumActionKinds] = {
    {ActionKind::OptimizerStep, "OPT", "optimizer_step"},
    {ActionKind::SendActivation, "SA", "send_activation"},
    {ActionKind::RecvActivation, "RA", "recv_activation"},
    {ActionKind::SendGradient, "SG", "send_gradient"},
    {ActionKind::RecvGradient, "RG", "recv_gradient"},
    {ActionKind::ReduceGradients, "RD", "reduce_gradients"},
    {ActionKind::Forward, "F", "forward"},
    {ActionKind::Backward, "B", "backward"},
};

const KindNames& names_of(ActionKind k) {
  for (const auto& n : kKindNames) {
    if (n.kind == k) return n;
  }
  ETH_CHECK(false, "unknown ActionKind");
  return kKindNames[0];
}

std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::int64_t parse_index(std::string_view digits, const std::string& where,
                         const std::string& token) {
  std::int64_t v = -1;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || v < 0) {
    throw InputError("schedule", "", where,
                     "token \"" + token +
                         "\": expected a kind (F B SA RA SG RG RD OPT) followed "
                         "by a non-negative index");
  }
  return v;
}

Action parse_token(const std::string& token, std::int64_t stage, const std::string& where) {
  if (token == "OPT") return Action{ActionKind::OptimizerStep, stage, -1, -1};
  for (const auto& n : kKindNames) {
    if (n.kind == ActionKind::OptimizerStep) continue;
    if (token.size() > n.token.size() && std::string_view(token).starts_with(n.token)) {
      const std::int64_t v =
          parse_index(std::string_view(token).substr(n.token.size()), where, token);
      if (n.kind == ActionKind::ReduceGradients) return Action{n.kind, stage, -1, v};
      return Action{n.kind, stage, v, -1};
    }
  }
  parse_index("", where, token);  // throws with the grammar
  return {};
}

}  // namespace

std::string_view action_kind_token(ActionKind k) { return names_of(k).token; }
std::string_view action_kind_name(ActionKind k) { return names_of(k).name; }

bool is_compute(ActionKind k) {
  return k == ActionKind::Forward || k == ActionKind::Backward || k == ActionKind::OptimizerStep;
}

std::string_view schedule_kind_name(ScheduleKind k) {
  return k == ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

std::optional<ScheduleKind> parse_schedule_kind(std::string_view name) {
  if (name == "1f1b") return ScheduleKind::OneFOneB;
  if (name == "gpipe") return ScheduleKind::GPipe;
  return std::nullopt;
}

std::string action_token(const Action& a) {
  std::string t(action_kind_token(a.kind));
  if (a.kind == ActionKind::OptimizerStep) return t;
  return t + std::to_string(a.kind == ActionKind::ReduceGradients ? a.block : a.microbatch);
}

std::string format_schedule(const Schedule& s) {
  std::string out;
  for (const auto& p : s.programs) {
    out += "s" + std::to_string(p.stage) + ":";
    for (const auto& a : p.actions) out += " " + action_token(a);
    out += "\n";
  }
  return out;
}

Schedule parse_schedule_text(std::string_view text, ScheduleKind kind) {
  Schedule s;
  s.kind = kind;
  std::int64_t max_mb = -1;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    auto tokens = split_ws(line);
    if (tokens.empty()) continue;
    const std::string where = "line " + std::to_string(line_no);
    const std::string expected_label = "s" + std::to_string(s.programs.size()) + ":";
    if (tokens[0] != expected_label) {
      throw InputError(
          "schedule", "", where,
          "expected the line to start with \"" + expected_label + "\", got \"" + tokens[0] + "\"");
    }
    RankProgram prog;
    prog.stage = static_cast<std::int64_t>(s.programs.size());
    for (std::size_t i = 1; i < tokens.size(); ++i) {
      Action a = parse_token(tokens[i], prog.stage, where);
      max_mb = std::max(max_mb, a.microbatch);
      prog.actions.push_back(a);
    }
    s.programs.push_back(std::move(prog));
  }
  s.num_stages = static_cast<std::int64_t>(s.programs.size());
  s.num_microbatches = max_mb + 1;
  return s;
}

std::string format_grid(const Schedule& s, const std::vector<std::int64_t>& marker) {
  std::size_t rows = 0;
  for (const auto& p : s.programs) rows = std::max(rows, p.actions.size());
  // Cells: token, plus '*' where the marker points.
  std::vector<std::vector<std::string>> cells(rows, std::vector<std::string>(s.programs.size()));
  std::size_t width = 4;
  for (std::size_t c = 0; c < s.programs.size(); ++c) {
    const auto& acts = s.programs[c].actions;
    for (std::size_t r = 0; r < acts.size(); ++r) {
      std::string t = action_token(acts[r]);
      if (c < marker.size() && marker[c] == static_cast<std::int64_t>(r)) t += "*";
      width = std::max(width, t.size() + 1);
      cells[r][c] = std::move(t);
    }
  }
  auto pad = [width](const std::string& t) { return t + std::string(width - t.size(), ' '); };
  std::ostringstream os;
  auto line = [&os](std::string l) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    os << l << "\n";
  };
  std::string head = pad("step");
  for (std::size_t c = 0; c < s.programs.size(); ++c) head += pad("s" + std::to_string(c));
  line(head);
  for (std::size_t r = 0; r < rows; ++r) {
    std::string l = pad(std::to_string(r));
    for (std::size_t c = 0; c < s.programs.size(); ++c) l += pad(cells[r][c]);
    line(l);
  }
  bool any = false;
  for (std::size_t c = 0; c < marker.size() && c < s.programs.size(); ++c) {
    if (marker[c] >= 0 && marker[c] < static_cast<std::int64_t>(s.programs[c].actions.size())) {
      any = true;
    }
  }
  if (any) os << "(* = the action each stuck stage waits on)\n";
  return os.str();
}

}  // namespace eth
