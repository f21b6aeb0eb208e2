// The simulator's engine: one Group per (pipeline, stage) whose devices run the stage program in
// lockstep, one comm queue per device for the gradient collectives, and an event loop over
// typed events. The rules each handler follows are stated in simulator.h and docs/simulator.md.
#include "sim/simulator.h"

#include "cost/sharding_memory.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <variant>

#include "core/error.h"
#include "schedule/plan_schedules.h"

namespace eth {

TimeNs ms_to_ns(double ms) {
  ETH_CHECK(std::isfinite(ms) && ms >= 0 && ms < 9e12, "durations must be finite and >= 0");
  return static_cast<TimeNs>(std::llround(ms * 1e6));
}

std::vector<SimCollective> make_collectives(const Plan& plan, const ClusterSpec& cluster,
                                            AggregationMode mode, double latency_ms,
                                            double bytes_per_element) {
  std::vector<SimCollective> out;
  const ClusterIndex index(cluster);
  for (const GradBlock& b : aggregation_collectives(plan, mode)) {
    if (b.holders.size() < 2) continue;
    SimCollective c;
    c.holders = b.holders;
    c.ready_unit = b.lowest_unit();
    c.bytes = static_cast<double>(b.elements) * bytes_per_element;
    // A sharded plan's block-wise collective is a reduce-scatter (gradient_ring_share).
    c.duration_ms = ring_allreduce_ms(index, b.holders, gradient_ring_share(plan, mode) * c.bytes,
                                      latency_ms);
    for (std::int64_t h : b.holders) {
      const std::int64_t node = index.node_of(h);
      if (index.type_of(h).node_shared_bandwidth_gbps &&
          (c.shared_nodes.empty() || c.shared_nodes.back() != node)) {
        c.shared_nodes.push_back(node);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<SimCollective> make_weight_gathers(const Plan& plan, const ClusterSpec& cluster,
                                               Precision precision, double latency_ms) {
  std::vector<SimCollective> out;
  const ClusterIndex index(cluster);
  for (const BlockShards& b : plan.optimizer_shards) {
    if (b.holders.size() < 2) continue;
    SimCollective c;
    c.holders = b.holders;
    for (std::int64_t e : b.elements) c.bytes += static_cast<double>(e);
    c.bytes *= precision_bytes(precision).weights;
    c.duration_ms = shard_gather_block_ms(b, index, precision, latency_ms);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Schedule> build_schedules(const Plan& plan, ScheduleKind kind,
                                      const std::vector<SimCollective>& collectives) {
  // The runtime executes the programs of the same lowering (schedule/plan_schedules.h).
  CollectiveHolders holders;
  holders.reserve(collectives.size());
  for (const SimCollective& c : collectives) holders.push_back(c.holders);
  return lower_plan_schedules(plan, kind, holders);
}

namespace {

struct ComputeDone {
  std::size_t group;
};
struct TransferDone {
  std::size_t to_group;
  bool gradient;
  std::int64_t mb;
};
struct HolderReady {
  std::size_t slot;
  std::size_t pos;
};
struct CollectiveDone {
  std::size_t collective;
};
using Event = std::variant<ComputeDone, TransferDone, HolderReady, CollectiveDone>;

// The devices of one stage of one pipeline: they run the same program in lockstep.
struct Group {
  std::size_t pipeline = 0, stage = 0;
  const StagePlan* plan = nullptr;
  const RankProgram* program = nullptr;
  const StageCost* full = nullptr;
  const StageCost* last = nullptr;
  std::int64_t k = 0;
  std::size_t num_stages = 0;
  TimeNs optimizer = 0;
  std::size_t pc = 0;
  bool computing = false;
  Action running;                                       // the compute action in progress
  std::size_t last_backward = 0;                        // program index of the last Backward
  TimeNs out_free = 0, in_free = 0;                     // the stage's outgoing and incoming links
  std::vector<std::uint8_t> act_arrived, grad_arrived;  // per micro-batch
  std::vector<std::size_t> slots;                       // device slots
  double memory_now = 0;
  std::int64_t in_flight = 0;
  TimeNs compute_ns = 0, fb_ns = 0, backward_end = 0;
  TimeNs stepped = 0;  // end of the optimizer step
  StageSimResult result;

  const StageCost& cost(std::int64_t mb) const { return mb == k - 1 ? *last : *full; }
};

// One device's gradient collectives, in program (= global) order.
struct Slot {
  std::int64_t device = 0;
  std::size_t group = 0;
  std::vector<std::size_t> queue;   // collective indices
  std::vector<std::uint8_t> ready;  // per queue position
  std::size_t pos = 0;
  bool in_collective = false;  // joined queue[pos] (waiting for the others or reducing)
  TimeNs reduce_ns = 0;
  bool done() const { return pos == queue.size(); }
};

class Engine {
 public:
  Engine(const Plan& plan, const std::vector<PipelineCosts>& costs,
         const std::vector<SimCollective>& collectives, const std::vector<Schedule>& schedules,
         const SimOptions& options);
  SimResult run();

 private:
  void advance(std::size_t g);
  void start_compute(std::size_t g, const Action& a, TimeNs duration);
  void finish_compute(std::size_t g);
  void start_transfer(std::size_t from, std::size_t to, bool gradient, std::int64_t mb);
  void arm_readiness(std::size_t g, TimeNs backward_start, TimeNs duration);
  void try_join(std::size_t slot);
  void finish_collective(std::size_t c);
  void run_weight_gathers();
  void set_memory(Group& G, double delta, std::int64_t in_flight_delta);
  void record(const Group& G, ActionKind kind, std::int64_t mb, std::int64_t block, TimeNs start,
              TimeNs end);
  std::string stuck_report() const;

  const Plan& plan_;
  const std::vector<SimCollective>& colls_;
  const std::vector<Schedule>& schedules_;
  SimOptions opt_;
  EventQueue<Event> q_;
  std::vector<Group> groups_;
  std::vector<std::size_t> pipeline_first_group_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> slot_of_device_;  // device id -> slot (SIZE_MAX: not in the plan)
  std::vector<std::size_t> joined_;          // per collective: holders waiting in it
  std::vector<TimeNs> coll_ns_;
  std::map<std::int64_t, TimeNs> node_free_;  // shared nodes: when their last collective ends
  std::size_t groups_backward_done_ = 0;
  TimeNs end_ = 0;
  Timeline timeline_;
};

Engine::Engine(const Plan& plan, const std::vector<PipelineCosts>& costs,
               const std::vector<SimCollective>& collectives,
               const std::vector<Schedule>& schedules, const SimOptions& options)
    : plan_(plan), colls_(collectives), schedules_(schedules), opt_(options) {
  ETH_CHECK(costs.size() == plan.pipelines.size() && schedules.size() == plan.pipelines.size(),
            "simulate: one PipelineCosts and one Schedule per pipeline");
  constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    const Schedule& sched = schedules[p];
    ETH_CHECK(
        sched.programs.size() == pipe.stages.size() && costs[p].full.size() == pipe.stages.size() &&
            costs[p].last.size() == pipe.stages.size(),
        "simulate: pipeline " + std::to_string(p) + " costs/schedule do not match its stages");
    pipeline_first_group_.push_back(groups_.size());
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      Group G;
      G.pipeline = p;
      G.stage = s;
      G.plan = &pipe.stages[s];
      G.program = &sched.programs[s];
      G.full = &costs[p].full[s];
      G.last = &costs[p].last[s];
      G.k = pipe.num_microbatches();
      G.num_stages = pipe.stages.size();
      if (s < costs[p].optimizer_ms.size()) G.optimizer = ms_to_ns(costs[p].optimizer_ms[s]);
      G.act_arrived.assign(static_cast<std::size_t>(G.k), 0);
      G.grad_arrived.assign(static_cast<std::size_t>(G.k), 0);
      for (std::size_t i = 0; i < G.program->actions.size(); ++i) {
        if (G.program->actions[i].kind == ActionKind::Backward) G.last_backward = i;
      }
      G.memory_now = costs[p].memory.empty() ? 0.0 : costs[p].memory[s].total();
      G.result.pipeline = static_cast<std::int64_t>(p);
      G.result.stage = static_cast<std::int64_t>(s);
      G.result.devices = G.plan->devices;
      G.result.device_type = G.plan->device_type;
      G.result.memory.push_back({0, G.memory_now});
      G.result.peak_memory_bytes = G.memory_now;
      for (std::int64_t d : G.plan->devices) {
        ETH_CHECK(d >= 0, "device ids are non-negative");
        if (static_cast<std::size_t>(d) >= slot_of_device_.size()) {
          slot_of_device_.resize(static_cast<std::size_t>(d) + 1, kNone);
        }
        ETH_CHECK(slot_of_device_[static_cast<std::size_t>(d)] == kNone,
                  "device " + std::to_string(d) + " appears twice in the plan");
        slot_of_device_[static_cast<std::size_t>(d)] = slots_.size();
        G.slots.push_back(slots_.size());
        slots_.push_back(Slot{d, groups_.size(), {}, {}, 0, false, 0});
      }
      groups_.push_back(std::move(G));
    }
  }
  for (const SimCollective& c : colls_) {
    ETH_CHECK(c.holders.size() >= 2 && std::is_sorted(c.holders.begin(), c.holders.end()),
              "a collective needs two or more holders in ascending order");
    for (std::int64_t h : c.holders) {
      ETH_CHECK(h >= 0 && static_cast<std::size_t>(h) < slot_of_device_.size() &&
                    slot_of_device_[static_cast<std::size_t>(h)] != kNone,
                "collective holder " + std::to_string(h) + " is not a device of the plan");
    }
  }
  // Comm queues: each device joins, in its program's order, the collectives it holds.
  for (const Group& G : groups_) {
    for (const Action& a : G.program->actions) {
      if (a.kind != ActionKind::ReduceGradients) continue;
      ETH_CHECK(a.block >= 0 && static_cast<std::size_t>(a.block) < colls_.size(),
                "ReduceGradients names a collective that does not exist");
      const auto& holders = colls_[static_cast<std::size_t>(a.block)].holders;
      for (std::size_t sl : G.slots) {
        if (std::binary_search(holders.begin(), holders.end(), slots_[sl].device)) {
          slots_[sl].queue.push_back(static_cast<std::size_t>(a.block));
          slots_[sl].ready.push_back(0);
        }
      }
    }
  }
  joined_.assign(colls_.size(), 0);
  for (const SimCollective& c : colls_) coll_ns_.push_back(ms_to_ns(c.duration_ms));
  if (opt_.record_timeline) {
    // Per device and micro-batch at most F, B and four transfer ends; then the tail.
    std::size_t n = 0;
    for (const Group& G : groups_) n += G.slots.size() * (6 * static_cast<std::size_t>(G.k) + 1);
    for (const Slot& S : slots_) n += S.queue.size();
    timeline_.entries.reserve(n);
  }
}

void Engine::record(const Group& G, ActionKind kind, std::int64_t mb, std::int64_t block,
                    TimeNs start, TimeNs end) {
  if (!opt_.record_timeline) return;
  for (std::size_t sl : G.slots) {
    timeline_.entries.push_back(
        TimelineEntry{slots_[sl].device, static_cast<std::int64_t>(G.pipeline),
                      static_cast<std::int64_t>(G.stage), kind, mb, block, start, end});
  }
}

void Engine::set_memory(Group& G, double delta, std::int64_t in_flight_delta) {
  G.memory_now += delta;
  G.in_flight += in_flight_delta;
  auto& mem = G.result.memory;
  if (mem.back().time == q_.now()) {
    mem.back().bytes = G.memory_now;
  } else {
    mem.push_back({q_.now(), G.memory_now});
  }
  G.result.peak_memory_bytes = std::max(G.result.peak_memory_bytes, G.memory_now);
  G.result.peak_in_flight = std::max(G.result.peak_in_flight, G.in_flight);
}

void Engine::start_compute(std::size_t g, const Action& a, TimeNs duration) {
  Group& G = groups_[g];
  const TimeNs now = q_.now();
  G.computing = true;
  G.running = a;
  G.compute_ns += duration;
  if (a.kind != ActionKind::OptimizerStep) G.fb_ns += duration;
  // Activations are held from the start of their forward to the end of their backward.
  if (a.kind == ActionKind::Forward) set_memory(G, G.cost(a.microbatch).activation_bytes, 1);
  if (a.kind == ActionKind::Backward && G.pc == G.last_backward && opt_.overlap) {
    arm_readiness(g, now, duration);
  }
  record(G, a.kind, a.microbatch, -1, now, now + duration);
  q_.push(now + duration, ComputeDone{g});
  end_ = std::max(end_, now + duration);
}

// The last backward of a stage runs its units last to first; unit u's gradients are final once
// units u..last are done. Each of the stage's devices becomes ready for each of its collectives
// at that point for the collective's ready unit (clamped to the stage's own units).
void Engine::arm_readiness(std::size_t g, TimeNs backward_start, TimeNs duration) {
  const Group& G = groups_[g];
  const StageCost& c = G.cost(G.running.microbatch);
  const std::int64_t first = G.plan->first_unit, last = G.plan->last_unit;
  for (std::size_t sl : G.slots) {
    const Slot& S = slots_[sl];
    for (std::size_t pos = 0; pos < S.queue.size(); ++pos) {
      const std::int64_t u = std::max(colls_[S.queue[pos]].ready_unit, first);
      double ms = 0;
      for (std::int64_t v = std::min(u, last + 1); v <= last; ++v) {
        ms += c.unit_backward_ms.at(static_cast<std::size_t>(v - first));
      }
      const TimeNs offset = u > last ? duration : std::min(ms_to_ns(ms), duration);
      q_.push(backward_start + offset, HolderReady{sl, pos});
    }
  }
}

void Engine::finish_compute(std::size_t g) {
  Group& G = groups_[g];
  G.computing = false;
  const Action a = G.running;
  if (a.kind == ActionKind::OptimizerStep) G.stepped = q_.now();
  if (a.kind == ActionKind::Backward) {
    set_memory(G, -G.cost(a.microbatch).activation_bytes, -1);
    if (G.pc - 1 == G.last_backward) {
      G.backward_end = q_.now();
      // Without overlap, collectives wait for every pipeline's backward to end.
      if (!opt_.overlap && ++groups_backward_done_ == groups_.size()) {
        for (std::size_t sl = 0; sl < slots_.size(); ++sl) {
          for (std::size_t pos = 0; pos < slots_[sl].queue.size(); ++pos) {
            q_.push(q_.now(), HolderReady{sl, pos});
          }
        }
      }
    }
  }
  advance(g);
}

void Engine::start_transfer(std::size_t from, std::size_t to, bool gradient, std::int64_t mb) {
  Group& F = groups_[from];
  Group& T = groups_[to];
  // The gradient travels the activation's link backwards: same bytes, the lower stage's send.
  const Group& lower = gradient ? T : F;
  const TimeNs duration = ms_to_ns(lower.cost(mb).send_ms);
  const TimeNs start = std::max({q_.now(), F.out_free, T.in_free});
  const TimeNs end = start + duration;
  F.out_free = end;
  T.in_free = end;
  record(F, gradient ? ActionKind::SendGradient : ActionKind::SendActivation, mb, -1, start, end);
  record(T, gradient ? ActionKind::RecvGradient : ActionKind::RecvActivation, mb, -1, start, end);
  q_.push(end, TransferDone{to, gradient, mb});
  end_ = std::max(end_, end);
}

// Runs group g's program from its pc until it blocks: on compute in progress, on a receive whose
// transfer has not arrived, or on the optimizer step while collectives are pending.
void Engine::advance(std::size_t g) {
  Group& G = groups_[g];
  const auto& acts = G.program->actions;
  while (!G.computing && G.pc < acts.size()) {
    const Action& a = acts[G.pc];
    const bool mb_ok = a.microbatch >= 0 && a.microbatch < G.k;
    switch (a.kind) {
      case ActionKind::Forward:
      case ActionKind::Backward: {
        ETH_CHECK(mb_ok, "compute action with a micro-batch outside the pipeline");
        const StageCost& c = G.cost(a.microbatch);
        start_compute(g, a, ms_to_ns(a.kind == ActionKind::Forward ? c.forward_ms : c.backward_ms));
        ++G.pc;
        return;
      }
      case ActionKind::OptimizerStep: {
        for (std::size_t sl : G.slots) {
          if (!slots_[sl].done()) return;  // finish_collective wakes us
        }
        start_compute(g, a, G.optimizer);
        ++G.pc;
        return;
      }
      case ActionKind::SendActivation:
      case ActionKind::SendGradient: {
        const bool grad = a.kind == ActionKind::SendGradient;
        ETH_CHECK(mb_ok, "send with a micro-batch outside the pipeline");
        ETH_CHECK(grad ? G.stage > 0 : G.stage + 1 < G.num_stages,
                  "send past the end of the pipeline");
        start_transfer(g, grad ? g - 1 : g + 1, grad, a.microbatch);
        ++G.pc;
        break;
      }
      case ActionKind::RecvActivation:
      case ActionKind::RecvGradient: {
        ETH_CHECK(mb_ok, "receive with a micro-batch outside the pipeline");
        const auto& arrived = a.kind == ActionKind::RecvGradient ? G.grad_arrived : G.act_arrived;
        if (!arrived[static_cast<std::size_t>(a.microbatch)]) return;  // TransferDone wakes us
        ++G.pc;
        break;
      }
      case ActionKind::ReduceGradients:
        ++G.pc;  // posted up front: see the comm queues built in the constructor
        break;
    }
  }
}

void Engine::try_join(std::size_t sl) {
  Slot& S = slots_[sl];
  if (S.in_collective || S.done() || !S.ready[S.pos]) return;
  S.in_collective = true;
  const std::size_t c = S.queue[S.pos];
  if (++joined_[c] < colls_[c].holders.size()) return;
  // Every holder is here: the collective runs on all of them, now or, on a node whose devices
  // share one memory system, once that node's previous collective has ended.
  TimeNs now = q_.now();
  for (std::int64_t node : colls_[c].shared_nodes) now = std::max(now, node_free_[node]);
  const TimeNs end = now + coll_ns_[c];
  for (std::int64_t node : colls_[c].shared_nodes) node_free_[node] = end;
  for (std::int64_t h : colls_[c].holders) {
    Slot& H = slots_[slot_of_device_[static_cast<std::size_t>(h)]];
    H.reduce_ns += coll_ns_[c];
    if (opt_.record_timeline) {
      const Group& G = groups_[H.group];
      timeline_.entries.push_back(TimelineEntry{
          H.device, static_cast<std::int64_t>(G.pipeline), static_cast<std::int64_t>(G.stage),
          ActionKind::ReduceGradients, -1, static_cast<std::int64_t>(c), now, end});
    }
  }
  q_.push(end, CollectiveDone{c});
  end_ = std::max(end_, end);
}

void Engine::finish_collective(std::size_t c) {
  joined_[c] = 0;
  for (std::int64_t h : colls_[c].holders) {
    const std::size_t sl = slot_of_device_[static_cast<std::size_t>(h)];
    Slot& S = slots_[sl];
    S.in_collective = false;
    ++S.pos;
    try_join(sl);
    if (S.done()) advance(S.group);  // it may be waiting at its optimizer step
  }
}

// After every step: each gather starts once its holders have stepped and ended their previous
// gathers (the plan's order), as the runtime's ring all-gathers run one after another.
void Engine::run_weight_gathers() {
  std::vector<TimeNs> free(slots_.size());
  for (std::size_t sl = 0; sl < slots_.size(); ++sl) free[sl] = groups_[slots_[sl].group].stepped;
  for (std::size_t i = 0; i < opt_.weight_gathers.size(); ++i) {
    const SimCollective& w = opt_.weight_gathers[i];
    TimeNs start = 0;
    for (std::int64_t h : w.holders) {
      ETH_CHECK(h >= 0 && static_cast<std::size_t>(h) < slot_of_device_.size() &&
                    slot_of_device_[static_cast<std::size_t>(h)] < slots_.size(),
                "weight gather holder " + std::to_string(h) + " is not a device of the plan");
      start = std::max(start, free[slot_of_device_[static_cast<std::size_t>(h)]]);
    }
    const TimeNs end = start + ms_to_ns(w.duration_ms);
    for (std::int64_t h : w.holders) {
      const std::size_t sl = slot_of_device_[static_cast<std::size_t>(h)];
      free[sl] = end;
      Slot& H = slots_[sl];
      H.reduce_ns += end - start;
      if (opt_.record_timeline) {
        const Group& G = groups_[H.group];
        timeline_.entries.push_back(
            TimelineEntry{H.device, static_cast<std::int64_t>(G.pipeline),
                          static_cast<std::int64_t>(G.stage), ActionKind::ReduceGradients, -1,
                          static_cast<std::int64_t>(colls_.size() + i), start, end});
      }
    }
    end_ = std::max(end_, end);
  }
}

std::string Engine::stuck_report() const {
  std::string out = "simulation deadlock: the event queue drained with unfinished programs\n";
  for (std::size_t p = 0; p < plan_.pipelines.size(); ++p) {
    std::vector<std::int64_t> marker;
    bool stuck = false;
    for (std::size_t s = 0; s < plan_.pipelines[p].stages.size(); ++s) {
      const Group& G = groups_[pipeline_first_group_[p] + s];
      const bool unfinished = G.pc < G.program->actions.size();
      marker.push_back(unfinished ? static_cast<std::int64_t>(G.pc) : -1);
      stuck = stuck || unfinished;
    }
    if (!stuck) continue;
    out += "pipeline " + std::to_string(p) + ":\n" + format_grid(schedules_[p], marker);
  }
  return out;
}

SimResult Engine::run() {
  for (std::size_t g = 0; g < groups_.size(); ++g) advance(g);
  while (!q_.empty()) {
    const auto e = q_.pop();
    std::visit(
        [this](const auto& ev) {
          using T = std::decay_t<decltype(ev)>;
          if constexpr (std::is_same_v<T, ComputeDone>) {
            finish_compute(ev.group);
          } else if constexpr (std::is_same_v<T, TransferDone>) {
            auto& arrived =
                ev.gradient ? groups_[ev.to_group].grad_arrived : groups_[ev.to_group].act_arrived;
            arrived[static_cast<std::size_t>(ev.mb)] = 1;
            advance(ev.to_group);
          } else if constexpr (std::is_same_v<T, HolderReady>) {
            slots_[ev.slot].ready[ev.pos] = 1;
            try_join(ev.slot);
          } else {
            finish_collective(ev.collective);
          }
        },
        e.payload);
  }
  for (const Group& G : groups_) {
    if (G.pc < G.program->actions.size() || G.computing) throw SimDeadlock(stuck_report());
  }
  for (const Slot& S : slots_) {
    if (!S.done()) throw SimDeadlock(stuck_report());
  }
  run_weight_gathers();

  SimResult r;
  r.iteration_ms = ns_to_ms(end_);
  r.events = q_.popped();
  r.pipeline_ms.assign(plan_.pipelines.size(), 0);
  for (const Group& G : groups_) {
    r.pipeline_ms[G.pipeline] = std::max(r.pipeline_ms[G.pipeline], ns_to_ms(G.backward_end));
  }
  for (const Group& G : groups_) {
    StageSimResult st = G.result;
    st.backward_end = G.backward_end;
    r.stages.push_back(std::move(st));
  }
  for (const Slot& S : slots_) {
    const Group& G = groups_[S.group];
    DeviceSimResult d;
    d.device = S.device;
    d.pipeline = static_cast<std::int64_t>(G.pipeline);
    d.stage = static_cast<std::int64_t>(G.stage);
    d.compute_ms = ns_to_ms(G.compute_ns);
    d.reduce_ms = ns_to_ms(S.reduce_ns);
    d.busy_fraction = end_ > 0 ? static_cast<double>(G.compute_ns) / static_cast<double>(end_) : 0;
    d.idle_fraction = 1.0 - d.busy_fraction;
    const double span = r.pipeline_ms[G.pipeline];
    d.bubble_fraction = span > 0 ? (span - ns_to_ms(G.fb_ns)) / span : 0;
    d.peak_memory_bytes = G.result.peak_memory_bytes;
    r.devices.push_back(d);
  }
  std::sort(r.devices.begin(), r.devices.end(),
            [](const DeviceSimResult& a, const DeviceSimResult& b) { return a.device < b.device; });
  r.timeline = std::move(timeline_);
  return r;
}

}  // namespace

SimResult simulate(const Plan& plan, const std::vector<PipelineCosts>& costs,
                   const std::vector<SimCollective>& collectives,
                   const std::vector<Schedule>& schedules, const SimOptions& options) {
  Engine e(plan, costs, collectives, schedules, options);
  return e.run();
}

SimResult simulate(const Plan& plan, const std::vector<PipelineCosts>& costs,
                   const std::vector<SimCollective>& collectives, const SimOptions& options) {
  const std::vector<Schedule> schedules = build_schedules(plan, options.schedule, collectives);
  return simulate(plan, costs, collectives, schedules, options);
}

}  // namespace eth
