// The closed-form predictor: stage costs combined into pipeline times (the 1F1B approximation
// with the partial last micro-batch priced at its own size), memory peaks, gradient
// synchronization (ring model, in-order list schedule) and the ideal bound. No simulation here.
#include "cost/predictor.h"

#include "cost/sharding_memory.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/arithmetic.h"

namespace eth {

namespace {


double max_of(const std::vector<StageCost>& v, double (*f)(const StageCost&)) {
  double m = 0;
  for (const auto& c : v) m = std::max(m, f(c));
  return m;
}

double fb(const StageCost& c) { return c.forward_ms + c.backward_ms; }
double fwd(const StageCost& c) { return c.forward_ms; }
double bwd(const StageCost& c) { return c.backward_ms; }

// Where every device of the plan sits.
struct Seat {
  std::size_t pipeline = 0, stage = 0;
  std::int64_t dp_rank = 0, tp_rank = 0;
  bool used = false;
};

std::vector<Seat> seats_of(const Plan& plan, const ClusterIndex& cluster) {
  const std::int64_t n = cluster.num_devices();
  std::vector<Seat> seats(static_cast<std::size_t>(n));
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      for (std::int64_t d = 0; d < stages[s].dp; ++d) {
        for (std::int64_t t = 0; t < stages[s].tp; ++t) {
          const std::int64_t id = stage_device(stages[s], d, t);
          ETH_CHECK(id >= 0 && id < n, "plan device outside the cluster");
          seats[static_cast<std::size_t>(id)] = Seat{p, s, d, t, true};
        }
      }
    }
  }
  return seats;
}

// When the last backward of pipeline p has passed unit `u` of stage s (pipeline start = 0).
// The last micro-batch's backward leaves stage 0 at T_p; it left stage s earlier by the
// backward work and gradient sends of stages 0..s-1; inside stage s, units run last to first,
// so unit u is done once units first..u-1 alone remain.
double backward_passed_ms(const PipelineCosts& pc, const StagePlan& st, std::size_t s,
                          std::int64_t u, double t_p) {
  double t = t_p;
  for (std::size_t j = 0; j < s; ++j) t -= pc.last[j].backward_ms + pc.last[j].send_ms;
  const auto& ub = pc.last[s].unit_backward_ms;
  for (std::int64_t v = st.first_unit; v < u; ++v) {
    t -= ub[static_cast<std::size_t>(v - st.first_unit)];
  }
  return t;
}

// In-order list schedule: every device issues the collectives in the one global order, one at
// a time; a collective starts once `ready(block, holder)` on every holder and every holder is
// done with its previous one. Disjoint groups therefore run in parallel, except on a node whose
// devices share one memory system (DeviceType::node_shared_bandwidth_gbps), which moves one
// collective's bytes at a time. Each holder has two queues, as the runtime's window lets it:
// posting pieces (collective_time's issue_ms, from when its previous pieces are posted) and
// moving their bytes (transfer_ms, not before the collective's first piece is posted nor its
// previous transfer done); a collective ends when both are done. With no piece latency that is
// one queue: start + transfer_ms.
template <typename Ready>
SyncPrediction schedule_sync(const Plan& plan, const ClusterIndex& cluster, AggregationMode mode,
                             const PredictOptions& opt, double element_bytes, Ready ready) {
  SyncPrediction sp;
  sp.mode = mode;
  const std::vector<GradBlock> blocks = aggregation_collectives(plan, mode);
  sp.stats = aggregation_stats(blocks, element_bytes);
  // Sharded block-wise: each collective is a reduce-scatter, half an all-reduce's ring bytes.
  const double ring_share = gradient_ring_share(plan, mode);
  // Per device id (flat: a map costs a tree walk per holder, which on 100,000 devices is most
  // of a prediction).
  const auto n = static_cast<std::size_t>(cluster.num_devices());
  std::vector<double> free_at(n, 0.0), posted_at(n, 0.0), busy(n, 0.0);
  // Nodes whose devices share one memory system (node_shared_bandwidth_gbps) move one
  // collective's bytes at a time: two groups of CPU ranks on one host share its cores.
  std::map<std::int64_t, double> node_free_at;
  std::vector<std::int64_t> shared_nodes;
  for (const GradBlock& b : blocks) {
    if (b.holders.size() < 2) continue;
    shared_nodes.clear();
    if (cluster.any_node_shared()) {
      for (std::int64_t h : b.holders) {
        const std::int64_t node = cluster.node_of(h);
        if (cluster.type_of(h).node_shared_bandwidth_gbps &&
            (shared_nodes.empty() || shared_nodes.back() != node)) {
          shared_nodes.push_back(node);
        }
      }
    }
    const CollectiveTime t = collective_time(
        cluster, b.holders, ring_share * static_cast<double>(b.elements) * element_bytes, opt);
    const std::int64_t lowest = b.lowest_unit();
    double post = 0, start = 0;
    for (std::int64_t h : b.holders) {
      const auto i = static_cast<std::size_t>(h);
      post = std::max({post, ready(lowest, h), posted_at[i]});
      start = std::max(start, free_at[i]);
    }
    start = std::max(start, post);
    for (std::int64_t node : shared_nodes) start = std::max(start, node_free_at[node]);
    const double end = std::max(start + t.transfer_ms, post + t.issue_ms);
    for (std::int64_t h : b.holders) {
      const auto i = static_cast<std::size_t>(h);
      free_at[i] = start + t.transfer_ms;
      posted_at[i] = post + t.issue_ms;
      busy[i] += t.alone_ms();
    }
    for (std::int64_t node : shared_nodes) node_free_at[node] = start + t.transfer_ms;
    sp.end_ms = std::max(sp.end_ms, end);
  }
  for (const double ms : busy) sp.busy_ms = std::max(sp.busy_ms, ms);
  return sp;
}

// backward_passed_ms of every unit of every stage (the stage's own units, as the sync schedule
// asks for them), each computed by the same subtractions in the same order: the schedule asks
// once per holder of every collective, hundreds of thousands of times at 10,000 devices.
class BackwardPassed {
 public:
  BackwardPassed() = default;
  BackwardPassed(const Plan& plan, const std::vector<PipelineCosts>& costs,
                 const std::vector<double>& t_p) {
    base_.resize(plan.pipelines.size());
    for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
      const auto& stages = plan.pipelines[p].stages;
      const PipelineCosts& pc = costs[p];
      double t = t_p[p];
      for (std::size_t s = 0; s < stages.size(); ++s) {
        base_[p].push_back(ms_.size());
        double u_t = t;
        const auto& ub = pc.last[s].unit_backward_ms;
        for (std::int64_t u = stages[s].first_unit; u <= stages[s].last_unit; ++u) {
          ms_.push_back(u_t);
          if (u < stages[s].last_unit) u_t -= ub[static_cast<std::size_t>(u - stages[s].first_unit)];
        }
        t -= pc.last[s].backward_ms + pc.last[s].send_ms;
      }
    }
  }
  // Unit u of stage s of pipeline p, first_unit <= u <= last_unit.
  double at(std::size_t p, std::size_t s, std::int64_t offset) const {
    return ms_[base_[p][s] + static_cast<std::size_t>(offset)];
  }

 private:
  std::vector<std::vector<std::size_t>> base_;  // per pipeline, per stage: index of first_unit
  std::vector<double> ms_;
};

SyncPrediction predict_sync(const Plan& plan, const ClusterIndex& cluster,
                            const std::vector<PipelineCosts>& costs,
                            const std::vector<double>& t_p, double pipeline_ms,
                            const std::vector<Seat>& seats, AggregationMode mode,
                            const PredictOptions& opt, double element_bytes) {
  const BackwardPassed passed = opt.overlap ? BackwardPassed(plan, costs, t_p) : BackwardPassed();
  SyncPrediction sp = schedule_sync(
      plan, cluster, mode, opt, element_bytes, [&](std::int64_t block_lowest, std::int64_t h) {
        if (!opt.overlap) return pipeline_ms;
        const Seat& seat = seats[static_cast<std::size_t>(h)];
        const StagePlan& st = plan.pipelines[seat.pipeline].stages[seat.stage];
        const std::int64_t lowest = std::max(block_lowest, st.first_unit);
        if (lowest > st.last_unit) {
          return backward_passed_ms(costs[seat.pipeline], st, seat.stage, lowest,
                                    t_p[seat.pipeline]);
        }
        return passed.at(seat.pipeline, seat.stage, lowest - st.first_unit);
      });
  sp.exposed_ms = std::max(0.0, sp.end_ms - pipeline_ms);
  return sp;
}

// The runtime's arena holds `in_flight` slots, each sized for a full micro-batch share (the
// last micro-batch, partial or not, reuses a slot), mapped and pre-faulted at start-up.
double held_activations(const PipelineCosts& pc, std::size_t s, std::int64_t in_flight) {
  return static_cast<double>(in_flight) * pc.full[s].activation_bytes;
}

StagePrediction predict_stage(const Plan& plan, const ClusterSpec& cluster,
                              const PipelinePlan& pipe, const PipelineCosts& pc, std::size_t s) {
  const StagePlan& st = pipe.stages[s];
  const std::int64_t k = pipe.num_microbatches();
  const std::int64_t num_stages = static_cast<std::int64_t>(pipe.stages.size());
  StagePrediction sp;
  sp.device_type = st.device_type;
  sp.first_unit = st.first_unit;
  sp.last_unit = st.last_unit;
  sp.tp = st.tp;
  sp.dp = st.dp;
  sp.devices = st.devices;
  sp.forward_ms = pc.full[s].forward_ms;
  sp.backward_ms = pc.full[s].backward_ms;
  sp.send_ms = pc.full[s].send_ms;
  sp.last_forward_ms = pc.last[s].forward_ms;
  sp.last_backward_ms = pc.last[s].backward_ms;
  sp.last_send_ms = pc.last[s].send_ms;
  sp.in_flight = stage_in_flight(plan.schedule, static_cast<std::int64_t>(s), num_stages, k);
  const StageStaticMemory& m = pc.memory[s];
  sp.memory.weights = m.weight_bytes;
  sp.memory.gradients = m.gradient_bytes;
  sp.memory.optimizer_state = m.optimizer_bytes;
  sp.memory.workspace = m.workspace_bytes;
  sp.memory.baseline = m.baseline_bytes;
  sp.memory.activations = held_activations(pc, s, sp.in_flight);
  sp.memory.messages = m.message_bytes;
  sp.memory.collective_buffers = m.collective_bytes;
  sp.capacity_bytes = cluster.type(st.device_type).memory_bytes();
  sp.fits = sp.memory.total() <= sp.capacity_bytes;
  sp.optimizer_ms = pc.optimizer_ms[s];
  return sp;
}

double effective_flops(const ProfileDb& profile, const std::string& type, std::int64_t seq) {
  const ModelSpec& m = profile.model();
  ETH_CHECK(m.layers >= 1, "the ideal bound needs at least one transformer block");
  double best = 0;
  for (const auto& [key, e] : profile.entries()) {
    if (key.device_type != type) continue;
    const UnitProfile& block = e.units[1];
    const double ms = block.forward_ms + block.backward_ms;
    if (ms <= 0) continue;
    const std::int64_t s = e.seq_len > 0 ? e.seq_len : seq;
    // Model FLOPs of one block (forward + 2x backward) per tp rank, over its measured time.
    const double flops = 3.0 * unit_forward_flops(m, 1, key.mbs, s) / static_cast<double>(key.tp);
    best = std::max(best, flops / (ms * 1e-3));
  }
  if (best <= 0) {
    throw InputError("profile", "", "",
                     "no transformer-block timing for device type " + type +
                         " (needed by the ideal bound)");
  }
  return best;
}

Json sync_to_json(const SyncPrediction& s) {
  return Json{{"mode", std::string(aggregation_mode_name(s.mode))},
              {"collectives", s.stats.collectives},
              {"communicators", s.stats.communicators},
              {"bytes_total", s.stats.bytes_total},
              {"bytes_per_device_max", s.stats.bytes_per_device_max},
              {"busy_ms", s.busy_ms},
              {"end_ms", s.end_ms},
              {"exposed_ms", s.exposed_ms}};
}

}  // namespace

Json memory_to_json(const MemoryBreakdown& m) {
  return Json{{"weights_bytes", m.weights},
              {"gradients_bytes", m.gradients},
              {"optimizer_state_bytes", m.optimizer_state},
              {"activations_bytes", m.activations},
              {"workspace_bytes", m.workspace},
              {"message_buffers_bytes", m.messages},
              {"collective_buffers_bytes", m.collective_buffers},
              {"comm_buffers_bytes", m.comm_buffers()},
              {"baseline_bytes", m.baseline},
              {"total_bytes", m.total()}};
}

SyncPrediction predict_aggregation(const Plan& plan, const ClusterSpec& cluster,
                                   AggregationMode mode, const PredictOptions& options) {
  // Gradients are fp32 in every runtime precision; the option picks the bytes all the same.
  const double element_bytes =
      precision_bytes(options.precision.value_or(Precision::Fp32)).gradient_element;
  SyncPrediction sp = schedule_sync(plan, ClusterIndex(cluster), mode, options, element_bytes,
                                    [](std::int64_t, std::int64_t) { return 0.0; });
  sp.exposed_ms = sp.end_ms;
  return sp;
}

double ring_allreduce_ms(const ClusterSpec& cluster, const std::vector<std::int64_t>& holders,
                         double bytes, double latency_ms) {
  if (holders.size() < 2) return 0.0;
  return ring_allreduce_ms(ClusterIndex(cluster), holders, bytes, latency_ms);
}

double ring_allreduce_ms(const ClusterIndex& cluster, const std::vector<std::int64_t>& holders,
                         double bytes, double latency_ms) {
  const std::size_t n = holders.size();
  if (n < 2) return 0.0;
  // Each holder's node looked up once (a collective at 10,000 devices has hundreds).
  const std::int64_t first_node = cluster.node_of(holders[0]);
  double bw = cluster.node_link_bytes_per_s(cluster.node_of(holders[n - 1]), first_node);
  std::int64_t from = first_node;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const std::int64_t to = cluster.node_of(holders[i + 1]);
    bw = std::min(bw, cluster.node_link_bytes_per_s(from, to));
    from = to;
  }
  const double nn = static_cast<double>(n);
  const double per_holder = 2.0 * (nn - 1.0) / nn * bytes;
  double s = per_holder / bw;
  // A node whose devices share one memory system moves every holder's share there itself.
  for (std::size_t i = 0; i < n && cluster.any_node_shared();) {
    const std::int64_t node = cluster.node_of(holders[i]);
    std::size_t j = i;
    while (j < n && cluster.node_of(holders[j]) == node) ++j;  // ids of a node are consecutive
    if (const auto& shared = cluster.type_of(holders[i]).node_shared_bandwidth_gbps) {
      s = std::max(s, static_cast<double>(j - i) * per_holder / (*shared * 1e9 / 8.0));
    }
    i = j;
  }
  return s * 1e3 + latency_ms;
}

CollectiveTime collective_time(const ClusterIndex& cluster,
                               const std::vector<std::int64_t>& holders, double bytes,
                               const PredictOptions& options) {
  CollectiveTime t;
  if (holders.size() < 2) return t;
  const double chunk = options.collective_chunk_bytes;
  const double latency = options.collective_piece_latency_ms;
  ETH_CHECK(chunk > 0 && latency >= 0, "pieces need a positive size and a latency >= 0");
  t.transfer_ms = ring_allreduce_ms(cluster, holders, bytes, options.collective_latency_ms);
  // An infinite chunk (kUnboundedCollectiveWindow) leaves the collective whole.
  t.pieces = std::isfinite(chunk) ? std::max(1.0, std::ceil(bytes / chunk)) : 1.0;
  t.issue_ms = t.pieces * latency;
  return t;
}

namespace {

// The round trip of one micro-batch from stage s on: its forward through stages s..S-1 and its
// backward back to s, with the transfers between them (R_s; R_0 is the fill term).
double round_trip_ms(const std::vector<StageCost>& c, std::size_t s) {
  double r = 0;
  for (std::size_t t = s; t < c.size(); ++t) {
    r += c[t].forward_ms + c[t].backward_ms + (t + 1 < c.size() ? 2.0 * c[t].send_ms : 0.0);
  }
  return r;
}

// 1F1B's in-flight limit with the transfers counted (the closed form below leaves the steady
// state's transfers out). Stage s keeps n = S - s micro-batches in flight, so its forward of
// micro-batch j + n waits for the backward of j, a round trip R_s after j's forward; and 1F1B
// runs the forward of j + n - 1 before the backward of j, so the forward of j + n also comes
// F_s + B_s after the forward of j + n - 1. Chaining both from micro-batch 0 (a round trips,
// then b single steps, a n + b = k - 1) to the last one, whose round trip ends the pipeline:
//   T >= R_0 + (a - 1) R_s + b (F_s + B_s),  a = floor((k - 1) / n), b = (k - 1) mod n
// (R_0, the fill, holds micro-batch 0's trip to stage s and back; the last round trip at the
// last micro-batch's size). The simulator's timeline obeys it. It binds over slow links: a
// two-stage pipeline between hosts whose transfers are a tenth of a stage's F + B is 5-8% above
// the closed form, the simulator's time. With free transfers it stays at or below the closed form.
double transfer_chain_ms(const PipelineCosts& c, std::int64_t k) {
  const double fill = round_trip_ms(c.full, 0);
  const std::size_t S = c.full.size();
  double chain = 0;
  for (std::size_t s = 0; s < S; ++s) {
    const auto n = static_cast<std::int64_t>(S - s);
    const std::int64_t a = (k - 1) / n, b = (k - 1) % n;
    if (a < 1) continue;
    chain = std::max(chain, fill + static_cast<double>(a - 1) * round_trip_ms(c.full, s) +
                                round_trip_ms(c.last, s) +
                                static_cast<double>(b) * fb(c.full[s]));
  }
  return chain;
}

}  // namespace

// 1F1B, k >= 2: the first micro-batch (always full) fills and drains the pipeline, forward
// activations and backward gradients both crossing every boundary (C_s = 2 x send); each later
// micro-batch i adds one slot of the bottleneck at its own size:
//   T = sum_s (F_s + B_s + 2 send_s) + (k - 2) max_s (F_s + B_s) + max_s (F'_s + B'_s)
// where primes are the last micro-batch. With a full last micro-batch this is DESIGN.md's
// sum_s (F + B + C) + (k - 1) max_s (F + B). k = 1: T = sum_s (F'_s + B'_s + 2 send'_s).
// For uniform stages and free communication the exact 1F1B makespan is
// max((S + k - 2)(f + b) + b', (S - 1) f + (k - 1)(f + b) + f' + b' + (S - 1) b'), so this
// over-estimates by at most f' (one forward of the last micro-batch). Transfers in the steady
// state are not in this form (the usual approximation); for 1F1B the time is the larger of it
// and transfer_chain_ms, the round trips 1F1B's in-flight limit forces, transfers included.
// GPipe: the same reasoning applied to the all-forward and the all-backward phases (transfers
// of the steady state left out).
double pipeline_time_ms(const PipelineCosts& c, std::int64_t k, const std::string& schedule) {
  ETH_CHECK(k >= 1 && !c.full.empty(), "a pipeline needs stages and micro-batches");
  if (schedule != "1f1b" && schedule != "gpipe") {
    throw InputError("plan", "", "schedule",
                     "unknown schedule \"" + schedule + "\"; expected one of: 1f1b, gpipe");
  }
  const std::vector<StageCost>& first = k == 1 ? c.last : c.full;
  double fill = 0;
  for (const auto& s : first) fill += s.forward_ms + s.backward_ms + 2.0 * s.send_ms;
  if (k == 1) return fill;
  const double rest = static_cast<double>(k - 2);
  if (schedule == "gpipe") {
    return fill + rest * (max_of(c.full, fwd) + max_of(c.full, bwd)) + max_of(c.last, fwd) +
           max_of(c.last, bwd);
  }
  return std::max(fill + rest * max_of(c.full, fb) + max_of(c.last, fb),
                  transfer_chain_ms(c, k));
}

namespace {

double ideal_ms(const Plan& plan, const ClusterIndex& index, const ProfileDb& profile) {
  // Keyed by the cluster's one DeviceType object per name: a pointer compare per device.
  std::vector<std::pair<const DeviceType*, double>> per_type;
  double aggregate = 0;
  for (std::int64_t id : plan.device_ids()) {
    const DeviceType* type = &index.type_of(id);
    auto it = std::find_if(per_type.begin(), per_type.end(),
                           [&](const auto& entry) { return entry.first == type; });
    if (it == per_type.end()) {
      per_type.emplace_back(type, effective_flops(profile, index.type_name_of(id), plan.seq_len));
      it = per_type.end() - 1;
    }
    aggregate += it->second;
  }
  ETH_CHECK(aggregate > 0, "a plan without devices has no ideal bound");
  return 3.0 * model_forward_flops(plan.model, plan.gbs, plan.seq_len) / aggregate * 1e3;
}

}  // namespace

double ideal_iteration_ms(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile) {
  return ideal_ms(plan, ClusterIndex(cluster), profile);
}

Prediction predict(const Plan& plan, const ClusterSpec& cluster, const ProfileDb& profile,
                   const PredictOptions& options) {
  Prediction out;
  out.precision = plan_precision(plan, profile, options.precision);
  out.activation_element_bytes = precision_bytes(out.precision).activation;
  out.gradient_element_bytes = precision_bytes(out.precision).gradient_element;
  const std::vector<PipelineCosts> costs =
      compute_stage_costs(plan, cluster, profile, options.p2p_latency_ms, out.precision,
                          options.aggregation, options.collective_window_bytes);
  std::vector<double> t_p;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const PipelinePlan& pipe = plan.pipelines[p];
    PipelinePrediction pp;
    pp.micro_batch_size = pipe.micro_batch_size;
    pp.local_batch = pipe.local_batch;
    pp.num_microbatches = pipe.num_microbatches();
    pp.last_microbatch_size = pipe.last_microbatch_size();
    pp.time_ms = pipeline_time_ms(costs[p], pp.num_microbatches, plan.schedule);
    double worst = -1;
    for (std::size_t s = 0; s < pipe.stages.size(); ++s) {
      pp.stages.push_back(predict_stage(plan, cluster, pipe, costs[p], s));
      if (fb(costs[p].full[s]) > worst) {
        worst = fb(costs[p].full[s]);
        pp.bottleneck_stage = static_cast<std::int64_t>(s);
      }
      out.optimizer_ms = std::max(out.optimizer_ms, costs[p].optimizer_ms[s]);
    }
    t_p.push_back(pp.time_ms);
    out.pipeline_ms = std::max(out.pipeline_ms, pp.time_ms);
    out.pipelines.push_back(std::move(pp));
  }

  const ClusterIndex index(cluster);
  const std::vector<Seat> seats = seats_of(plan, index);
  out.devices.reserve(static_cast<std::size_t>(
      std::count_if(seats.begin(), seats.end(), [](const Seat& seat) { return seat.used; })));
  for (std::size_t id = 0; id < seats.size(); ++id) {
    const Seat& seat = seats[id];
    if (!seat.used) continue;
    const StagePrediction& sp = out.pipelines[seat.pipeline].stages[seat.stage];
    DevicePrediction d;
    d.device = static_cast<std::int64_t>(id);
    d.pipeline = static_cast<std::int64_t>(seat.pipeline);
    d.stage = static_cast<std::int64_t>(seat.stage);
    d.dp_rank = seat.dp_rank;
    d.tp_rank = seat.tp_rank;
    d.peak_bytes = sp.memory.total();
    d.optimizer_state_bytes = sp.memory.optimizer_state;
    d.collective_buffer_bytes = sp.memory.collective_buffers;
    if (plan.optimizer_sharding != OptimizerSharding::None) {
      // Each holder keeps its shards of the state; block-wise, the ring's buffer replaces the
      // all-reduce temporaries.
      d.optimizer_state_bytes = sharded_optimizer_bytes(plan, d.device, out.precision);
      d.shard_buffer_bytes = shard_buffer_bytes(plan, d.device, options.aggregation);
      if (options.aggregation == AggregationMode::Block) d.collective_buffer_bytes = 0;
      d.peak_bytes = device_memory(out, sp.memory, d).total();
    }
    d.capacity_bytes = index.type_of(d.device).memory_bytes();
    d.fits = d.peak_bytes <= d.capacity_bytes;
    if (!d.fits) out.oversubscribed.push_back(d.device);
    out.devices.push_back(d);
  }
  out.fits = out.oversubscribed.empty();
  if (plan.optimizer_sharding != OptimizerSharding::None) {
    // A stage fits when each of its devices does (their shards differ).
    for (PipelinePrediction& pp : out.pipelines) {
      for (StagePrediction& sp : pp.stages) sp.fits = true;
    }
    for (const DevicePrediction& d : out.devices) {
      StagePrediction& sp = out.pipelines[static_cast<std::size_t>(d.pipeline)]
                                .stages[static_cast<std::size_t>(d.stage)];
      sp.fits = sp.fits && d.fits;
    }
  }

  for (auto mode : {AggregationMode::Block, AggregationMode::Tensor, AggregationMode::Device}) {
    if (!options.all_modes && mode != options.aggregation) continue;
    out.sync_all_modes.push_back(
        predict_sync(plan, index, costs, t_p, out.pipeline_ms, seats, mode, options,
                     out.gradient_element_bytes));
    if (mode == options.aggregation) out.sync = out.sync_all_modes.back();
  }

  if (plan.optimizer_sharding != OptimizerSharding::None) {
    out.shard_gather_ms = shard_gather_ms(plan, index, out.precision, options);
  }
  out.iteration_ms = out.pipeline_ms + out.sync.exposed_ms + out.optimizer_ms + out.shard_gather_ms;
  const double tokens = static_cast<double>(plan.gbs) * static_cast<double>(plan.seq_len);
  out.tokens_per_s = tokens / (out.iteration_ms * 1e-3);
  out.model_flops = 3.0 * model_forward_flops(plan.model, plan.gbs, plan.seq_len);
  double peak = 0;
  for (const NodeSpec& node : cluster.nodes) {
    peak += static_cast<double>(node.devices) * cluster.type(node.device_type).peak_flops();
  }
  out.mfu = out.model_flops / (out.iteration_ms * 1e-3) / peak;
  out.ideal_iteration_ms = ideal_ms(plan, index, profile);
  return out;
}

Json prediction_to_json(const Prediction& p) {
  Json j;
  j["precision"] = std::string(precision_name(p.precision));
  j["activation_element_bytes"] = p.activation_element_bytes;
  j["gradient_element_bytes"] = p.gradient_element_bytes;
  j["iteration_ms"] = p.iteration_ms;
  j["shard_gather_ms"] = p.shard_gather_ms;
  j["ideal_iteration_ms"] = p.ideal_iteration_ms;
  j["pipeline_ms"] = p.pipeline_ms;
  j["sync_exposed_ms"] = p.sync.exposed_ms;
  j["optimizer_ms"] = p.optimizer_ms;
  j["tokens_per_s"] = p.tokens_per_s;
  j["model_flops"] = p.model_flops;
  j["mfu"] = p.mfu;
  j["fits"] = p.fits;
  j["oversubscribed_devices"] = p.oversubscribed;
  j["sync"] = sync_to_json(p.sync);
  j["sync_all_modes"] = Json::array();
  for (const auto& s : p.sync_all_modes) j["sync_all_modes"].push_back(sync_to_json(s));
  j["pipelines"] = Json::array();
  for (const auto& pp : p.pipelines) {
    Json jp{{"micro_batch_size", pp.micro_batch_size},
            {"local_batch", pp.local_batch},
            {"num_microbatches", pp.num_microbatches},
            {"last_microbatch_size", pp.last_microbatch_size},
            {"time_ms", pp.time_ms},
            {"bottleneck_stage", pp.bottleneck_stage}};
    jp["stages"] = Json::array();
    for (const auto& s : pp.stages) {
      jp["stages"].push_back(Json{{"device_type", s.device_type},
                                  {"units", {s.first_unit, s.last_unit}},
                                  {"tp", s.tp},
                                  {"dp", s.dp},
                                  {"devices", s.devices},
                                  {"forward_ms", s.forward_ms},
                                  {"backward_ms", s.backward_ms},
                                  {"send_ms", s.send_ms},
                                  {"last_forward_ms", s.last_forward_ms},
                                  {"last_backward_ms", s.last_backward_ms},
                                  {"last_send_ms", s.last_send_ms},
                                  {"in_flight", s.in_flight},
                                  {"memory", memory_to_json(s.memory)},
                                  {"capacity_bytes", s.capacity_bytes},
                                  {"fits", s.fits},
                                  {"optimizer_ms", s.optimizer_ms}});
    }
    j["pipelines"].push_back(std::move(jp));
  }
  j["devices"] = Json::array();
  for (const auto& d : p.devices) {
    j["devices"].push_back(Json{{"device", d.device},
                                {"pipeline", d.pipeline},
                                {"stage", d.stage},
                                {"dp_rank", d.dp_rank},
                                {"tp_rank", d.tp_rank},
                                {"peak_bytes", d.peak_bytes},
                                {"optimizer_state_bytes", d.optimizer_state_bytes},
                                {"shard_buffer_bytes", d.shard_buffer_bytes},
                                {"collective_buffer_bytes", d.collective_buffer_bytes},
                                {"capacity_bytes", d.capacity_bytes},
                                {"fits", d.fits}});
  }
  return j;
}

}  // namespace eth
