// Recording, gathering and formatting a run's trace. See trace_recorder.h.
#include "runtime/trace_recorder.h"

#include <time.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/placement.h"

namespace eth {

namespace {

// Tags of the clock ping-pong and of the event transfer: above the pipeline's (2 mb, 2 mb + 1)
// and the checkpoint's (20000 + 3 unit + k), within the user range.
constexpr int kPingTag = Communicator::kMaxTag - 1;
constexpr int kEventsTag = Communicator::kMaxTag;
constexpr std::size_t kFields = 8;  // int64 fields of one serialized event

bool is_compute(TraceKind k) {
  return k == TraceKind::Forward || k == TraceKind::Backward || k == TraceKind::Optimizer ||
         k == TraceKind::Recompute;
}

}  // namespace

std::string_view trace_kind_name(TraceKind k) {
  switch (k) {
    case TraceKind::Step:
      return "step";
    case TraceKind::Forward:
      return "forward";
    case TraceKind::Backward:
      return "backward";
    case TraceKind::Recompute:
      return "recompute";
    case TraceKind::SendActivation:
      return "send_activation";
    case TraceKind::SendGradient:
      return "send_gradient";
    case TraceKind::RecvActivation:
      return "recv_activation";
    case TraceKind::RecvGradient:
      return "recv_gradient";
    case TraceKind::SendWait:
      return "send_wait";
    case TraceKind::CollectivePost:
      return "collective_post";
    case TraceKind::CollectiveWait:
      return "collective_wait";
    case TraceKind::Collective:
      return "collective";
    case TraceKind::Sync:
      return "sync";
    case TraceKind::Optimizer:
      return "optimizer";
    case TraceKind::Stretch:
      return "stretch";
  }
  return "?";
}

TraceRecorder::TraceRecorder(std::vector<std::int64_t> steps) { choose_steps(std::move(steps)); }

void TraceRecorder::choose_steps(std::vector<std::int64_t> steps) {
  steps_ = std::move(steps);
  std::sort(steps_.begin(), steps_.end());
  steps_.erase(std::unique(steps_.begin(), steps_.end()), steps_.end());
}

std::int64_t TraceRecorder::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t TraceRecorder::thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void TraceRecorder::begin_step(std::int64_t step) {
  step_ = step;
  on_ = std::binary_search(steps_.begin(), steps_.end(), step);
  step_start_ns_ = now_ns();
  last_collective_end_ns_ = 0;
  posted_ns_.clear();
}

void TraceRecorder::end_step() {
  if (on_) {
    TraceEvent e;
    e.kind = TraceKind::Step;
    e.start_ns = step_start_ns_;
    e.end_ns = now_ns();
    add(e);
  }
  on_ = false;
}

void TraceRecorder::add(TraceEvent e) {
  if (!on_) return;
  e.step = step_;
  switch (e.kind) {
    case TraceKind::CollectivePost:
      posted_ns_[e.index] = e.end_ns;
      return;
    case TraceKind::CollectiveWait: {
      const auto it = posted_ns_.find(e.index);
      ETH_CHECK(it != posted_ns_.end(), "trace: a collective waited for but never posted");
      e.kind = TraceKind::Collective;
      e.start_ns = std::max(it->second, last_collective_end_ns_);
      last_collective_end_ns_ = e.end_ns;
      break;
    }
    default:
      break;
  }
  events_.push_back(e);
}

void TraceScope::start(TraceKind kind, std::int64_t microbatch, std::int64_t index) {
  e_.kind = kind;
  e_.microbatch = microbatch;
  e_.index = index;
  if (is_compute(kind)) e_.cpu_ns = TraceRecorder::thread_cpu_ns();
  e_.start_ns = TraceRecorder::now_ns();
}

void TraceScope::finish() {
  e_.end_ns = TraceRecorder::now_ns();
  if (e_.cpu_ns >= 0) e_.cpu_ns = TraceRecorder::thread_cpu_ns() - e_.cpu_ns;
  rec_->add(e_);
}

std::function<void(std::int64_t, bool)> recompute_hook(TraceRecorder* rec) {
  if (rec == nullptr) return {};
  // StageCompute copies its config, so the hook owns its start time.
  auto e = std::make_shared<TraceEvent>();
  return [rec, e](std::int64_t unit, bool done) {
    if (!rec->on()) return;
    if (!done) {
      e->kind = TraceKind::Recompute;
      e->index = unit;
      e->cpu_ns = TraceRecorder::thread_cpu_ns();
      e->start_ns = TraceRecorder::now_ns();
      return;
    }
    TraceEvent out = *e;
    out.end_ns = TraceRecorder::now_ns();
    out.cpu_ns = TraceRecorder::thread_cpu_ns() - e->cpu_ns;
    rec->add(out);
  };
}

namespace {

// Rank r's clock offset to rank 0 (rank 0's time minus r's) and its error bound, by ping-pong:
// r stamps t1 and sends, rank 0 answers its own time t0, r stamps t3 on arrival; rank 0's clock
// read t0 somewhere in [t1, t3], so offset = t0 - (t1 + t3) / 2 within +-(t3 - t1) / 2. The
// round trip with the smallest t3 - t1 bounds it best (a round trip that was descheduled is
// simply long, not wrong).
std::pair<std::int64_t, std::int64_t> ping_pong(const Communicator& world, int peer, bool lead,
                                                int rounds) {
  std::int64_t best_offset = 0, best_rtt = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < rounds; ++i) {
    std::int64_t msg[1] = {0};
    if (lead) {
      world.recv(std::span<std::int64_t>(msg), peer, kPingTag);
      msg[0] = TraceRecorder::now_ns();
      world.send(std::span<std::int64_t>(msg), peer, kPingTag);
    } else {
      const std::int64_t t1 = TraceRecorder::now_ns();
      world.send(std::span<std::int64_t>(msg), peer, kPingTag);
      world.recv(std::span<std::int64_t>(msg), peer, kPingTag);
      const std::int64_t t3 = TraceRecorder::now_ns();
      if (t3 - t1 < best_rtt) {
        best_rtt = t3 - t1;
        best_offset = msg[0] - (t1 + t3) / 2;
      }
    }
  }
  return {best_offset, lead ? 0 : (best_rtt + 1) / 2};
}

}  // namespace

std::vector<RankTrace> gather_trace(const TraceRecorder& rec, const Communicator& world,
                                    int rounds) {
  const int me = world.rank(), n = world.size();
  std::int64_t offset = 0, error = 0;
  // Rank 0 plays every other rank in turn; the others wait for their turn in recv.
  if (me == 0) {
    for (int r = 1; r < n; ++r) ping_pong(world, r, true, rounds);
  } else {
    std::tie(offset, error) = ping_pong(world, 0, false, rounds);
  }
  std::vector<std::int64_t> flat;
  flat.reserve(rec.events().size() * kFields);
  for (const TraceEvent& e : rec.events()) {
    flat.insert(flat.end(), {static_cast<std::int64_t>(e.kind), e.step, e.start_ns + offset,
                             e.end_ns + offset, e.microbatch, e.index, e.cpu_ns, e.late_ns});
  }
  const std::vector<std::int64_t> mine{static_cast<std::int64_t>(flat.size()), offset, error};
  const std::vector<std::int64_t> heads = world.gather(std::span<const std::int64_t>(mine));
  if (me != 0) {
    if (!flat.empty()) world.send(std::span<const std::int64_t>(flat), 0, kEventsTag);
    return {};
  }
  std::vector<RankTrace> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankTrace& t = out[static_cast<std::size_t>(r)];
    t.rank = r;
    const auto h = static_cast<std::size_t>(3 * r);
    t.clock_offset_ns = heads[h + 1];
    t.clock_error_ns = heads[h + 2];
    std::vector<std::int64_t> buf;
    if (r == 0) {
      buf = flat;
    } else {
      buf.resize(static_cast<std::size_t>(heads[h]));
      if (!buf.empty()) world.recv(std::span<std::int64_t>(buf), r, kEventsTag);
    }
    for (std::size_t i = 0; i + kFields <= buf.size(); i += kFields) {
      ETH_CHECK(buf[i] >= 0 && buf[i] < kNumTraceKinds, "trace: bad event kind from a rank");
      t.events.push_back(TraceEvent{static_cast<TraceKind>(buf[i]), buf[i + 1], buf[i + 2],
                                    buf[i + 3], buf[i + 4], buf[i + 5], buf[i + 6], buf[i + 7]});
    }
  }
  return out;
}

namespace {

int lane_of(TraceKind k) {
  switch (k) {
    case TraceKind::SendActivation:
    case TraceKind::SendGradient:
      return 1;
    case TraceKind::RecvActivation:
    case TraceKind::RecvGradient:
    case TraceKind::SendWait:
      return 2;
    case TraceKind::Collective:
      return 3;
    case TraceKind::Stretch:
      return 4;
    case TraceKind::Recompute:
      return 5;
    case TraceKind::Step:
      return 6;
    default:
      return 0;
  }
}

constexpr const char* kLaneNames[] = {"compute",           "send",    "blocked on a neighbour",
                                      "gradient collectives", "emulation stretch", "recompute",
                                      "step"};
constexpr int kLanes = 7;

std::string event_name(const TraceEvent& e) {
  const std::string mb = std::to_string(e.microbatch);
  const std::string nb = std::to_string(e.index);
  switch (e.kind) {
    case TraceKind::Step:
      return "step " + std::to_string(e.step);
    case TraceKind::Forward:
      return "F" + mb;
    case TraceKind::Backward:
      return "B" + mb;
    case TraceKind::Recompute:
      return "recompute unit " + nb;
    case TraceKind::SendActivation:
      return "SA" + mb + " to stage " + nb;
    case TraceKind::SendGradient:
      return "SG" + mb + " to stage " + nb;
    case TraceKind::RecvActivation:
      return "wait RA" + mb + " from stage " + nb;
    case TraceKind::RecvGradient:
      return "wait RG" + mb + " from stage " + nb;
    case TraceKind::SendWait:
      return "wait until neighbours took the sends";
    case TraceKind::Collective:
      return "RD" + nb;
    case TraceKind::Sync:
      return "sync";
    case TraceKind::Optimizer:
      return "OPT";
    case TraceKind::Stretch:
      return "stretch";
    default:
      return std::string(trace_kind_name(e.kind));
  }
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

Json measured_trace_json(const std::vector<RankTrace>& ranks, const TraceInfo& info) {
  const std::vector<RankPlace> places = place_ranks(info.plan);
  ETH_CHECK(places.size() == ranks.size(), "trace: one RankTrace per rank of the plan");
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  for (const RankTrace& r : ranks) {
    for (const TraceEvent& e : r.events) origin = std::min(origin, e.start_ns);
  }
  if (origin == std::numeric_limits<std::int64_t>::max()) origin = 0;
  Json events = Json::array();
  Json rank_info = Json::array();
  for (const RankTrace& r : ranks) {
    const RankPlace& p = places[static_cast<std::size_t>(r.rank)];
    const StagePlan& st = info.plan.pipelines[static_cast<std::size_t>(p.pipeline)]
                              .stages[static_cast<std::size_t>(p.stage)];
    const auto f = info.slowdown.find(st.device_type);
    const double slowdown = f == info.slowdown.end() ? 1.0 : f->second;
    std::string name = "rank " + std::to_string(r.rank) + ": device " + std::to_string(p.device) +
                       ", pipeline " + std::to_string(p.pipeline) + " stage " +
                       std::to_string(p.stage) + ", " + st.device_type;
    if (slowdown != 1.0) name += " (EMULATED x" + Json(slowdown).dump() + ")";
    events.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", r.rank},
                          {"args", {{"name", name}}}});
    events.push_back(Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r.rank},
                          {"args", {{"sort_index", r.rank}}}});
    for (int lane = 0; lane < kLanes; ++lane) {
      events.push_back(Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", lane},
                            {"args", {{"name", kLaneNames[lane]}}}});
    }
    rank_info.push_back(Json{{"rank", r.rank},
                             {"device", p.device},
                             {"pipeline", p.pipeline},
                             {"stage", p.stage},
                             {"dp_rank", p.dp_rank},
                             {"device_type", st.device_type},
                             {"emulated_slowdown", slowdown},
                             {"clock_offset_us", us(r.clock_offset_ns)},
                             {"clock_error_us", us(r.clock_error_ns)}});
    for (const TraceEvent& e : r.events) {
      Json args{{"step", e.step}};
      if (e.microbatch >= 0) args["microbatch"] = e.microbatch;
      if (e.kind == TraceKind::Collective) args["collective"] = e.index;
      if (e.kind == TraceKind::Recompute) args["unit"] = e.index;
      if (lane_of(e.kind) == 1 || lane_of(e.kind) == 2) {
        if (e.index >= 0) args["neighbour_stage"] = e.index;
      }
      if (e.kind == TraceKind::Forward || e.kind == TraceKind::Backward) {
        args["units"] = std::to_string(st.first_unit) + "-" + std::to_string(st.last_unit);
      }
      if (e.cpu_ns >= 0) args["cpu_ms"] = static_cast<double>(e.cpu_ns) / 1e6;
      if (e.kind == TraceKind::Stretch) args["late_us"] = us(e.late_ns);
      events.push_back(Json{{"name", event_name(e)},
                            {"cat", trace_kind_name(e.kind)},
                            {"ph", "X"},
                            {"pid", r.rank},
                            {"tid", lane_of(e.kind)},
                            {"ts", us(e.start_ns - origin)},
                            {"dur", us(e.end_ns - e.start_ns)},
                            {"args", args}});
    }
  }
  Json other{{"format", "eth-measured-trace"},
             {"version", 1},
             {"plan", plan_to_json(info.plan)},
             {"aggregation", info.aggregation},
             {"emulated_slowdown", info.slowdown},
             {"precision", std::string(precision_name(info.precision))},
             {"steps", info.steps},
             {"clock", "ping-pong against rank 0, shortest of 16 round trips per rank"},
             {"ranks", rank_info}};
  return Json{{"displayTimeUnit", "ms"}, {"otherData", other}, {"traceEvents", events}};
}

std::vector<std::int64_t> parse_trace_steps(const std::string& text, std::int64_t first,
                                            std::int64_t end, const std::string& flag,
                                            std::int64_t default_count) {
  std::vector<std::int64_t> out;
  if (text.empty()) {
    // The first step pays for first-touch page faults and set-up: start after it.
    const std::int64_t from = end - first > 1 ? first + 1 : first;
    for (std::int64_t s = from; s < std::min(end, from + default_count); ++s) out.push_back(s);
    return out;
  }
  auto bad = [&](const std::string& part) {
    return InputError("cli", flag, "",
                      "expected steps as N, A-B or a comma list of those (e.g. 2-4,8), got \"" +
                          part + "\" in \"" + text + "\"");
  };
  auto number = [&](std::string_view s, const std::string& part) {
    std::int64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v < 0) throw bad(part);
    return v;
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string part = text.substr(pos, comma - pos);
    const std::size_t dash = part.find('-');
    const std::int64_t a = number(std::string_view(part).substr(0, dash), part);
    const std::int64_t b =
        dash == std::string::npos ? a : number(std::string_view(part).substr(dash + 1), part);
    if (b < a) throw bad(part);
    for (std::int64_t s = a; s <= b; ++s) out.push_back(s);
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace eth
