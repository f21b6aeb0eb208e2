// A tiny model, a two-type cluster, a hand-made profile and the asymmetric two-pipeline plan the
// cost tests work out by hand. Every number here is chosen to keep the arithmetic readable.
#pragma once

#include "cluster/cluster_spec.h"
#include "model/arithmetic.h"
#include "plan/plan.h"
#include "profile/profile.h"

namespace eth::test {

// 4 layers, C = 8, F = 32, T = 4, V = 16. Parameters (DESIGN.md unit layout, model/arithmetic.h):
//   embedding: wte 16*8 + wpe 4*8                                   = 160
//   block:     ln1 8+8, qkv 24*8+24, proj 8*8+8, ln2 8+8, fc 32*8+32, fcproj 32*8+8 = 872
//   head:      lnf 8+8, lm_head 16*8                                 = 144
//   total:     160 + 4*872 + 144                                     = 3792
inline ModelSpec tiny_model() {
  return ModelSpec{"tiny", 4, 8, 2, 4, 16, 32};
}
inline constexpr double kEmbParams = 160, kBlockParams = 872, kHeadParams = 144;
inline constexpr double kTotalParams = 3792;

// "fast": 2 devices in node 0; "slow": 3 devices in node 1. Bandwidths chosen so the 16-bit
// activation message of one sample (T * C * 2 = 64 bytes) takes a round number of ms:
//   fast intra 0.001024 Gbit/s = 128000 B/s; slow intra 0.000512 Gbit/s = 64000 B/s;
//   inter-node 0.008 Gbit/s = 1e6 B/s.
inline ClusterSpec tiny_cluster() {
  ClusterSpec c;
  c.name = "tiny";
  c.nodes = {{"fast", 2}, {"slow", 3}};
  c.inter_node_bandwidth_gbps = 0.008;
  c.device_types["fast"] = DeviceType{"fast", 100, 1e-4, 0.001024, std::nullopt, 1.0};
  c.device_types["slow"] = DeviceType{"slow", 50, 1e-4, 0.000512, std::nullopt, 1.0};
  c.custom_types = {"fast", "slow"};
  return c;
}

// Per-unit times for one micro-batch on "fast" at mbs 2 (and on "slow" at mbs 1): forward
// embedding 0.1, block 1.0, head 0.5 ms; backward twice forward. "fast" at mbs 1 and "slow" at
// mbs 2 are half and twice that. Recomputing mlp_act costs 0.3 ms per block at the base size.
// Activation bytes at the base size: blocks hold other = 1000 + mlp_act 500 (unit_input 100),
// embedding and head other = 200. The fast whole-model optimizer step is 3.792 ms (1 us per
// parameter); slow has none (0: the 16 B/param fallback applies).
inline ProfileEntry tiny_entry(const ModelSpec& m, const std::string& type, std::int64_t mbs,
                               double scale) {
  ProfileEntry e;
  e.key = {type, 1, mbs};
  e.seq_len = 4;
  e.source = "measured";
  e.optimizer_ms = type == "fast" ? 3.792 : 0.0;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    UnitProfile up;
    const UnitKind kind = unit_kind(m, u);
    const double f = kind == UnitKind::Embedding ? 0.1 : kind == UnitKind::Head ? 0.5 : 1.0;
    up.forward_ms = f * scale;
    up.backward_ms = 2 * f * scale;
    up.params = unit_params(m, u, 1);
    if (kind == UnitKind::Block) {
      up.activation.other = 1000 * scale;
      up.activation.op[static_cast<std::size_t>(RecomputeOp::MlpAct)] = 500 * scale;
      up.activation.unit_input = 100 * scale;
      up.recompute_ms[static_cast<std::size_t>(RecomputeOp::MlpAct)] = 0.3 * scale;
    } else {
      up.activation.other = 200 * scale;
      up.activation.unit_input = 100 * scale;
    }
    e.units.push_back(up);
  }
  return e;
}

inline ProfileDb tiny_profile() {
  ModelSpec m = tiny_model();
  ProfileDb db(m);
  db.add(tiny_entry(m, "fast", 1, 0.5));
  db.add(tiny_entry(m, "fast", 2, 1.0));
  db.add(tiny_entry(m, "slow", 1, 1.0));
  db.add(tiny_entry(m, "slow", 2, 2.0));
  return db;
}

inline StagePlan stage(const std::string& type, std::vector<std::int64_t> devices,
                       std::int64_t first, std::int64_t last, std::int64_t tp = 1,
                       std::int64_t dp = 1) {
  StagePlan s;
  s.device_type = type;
  s.devices = std::move(devices);
  s.tp = tp;
  s.dp = dp;
  s.first_unit = first;
  s.last_unit = last;
  return s;
}

// Pipeline A: fast devices 0, 1; 2 stages cut after unit 2; m = 2, B = 5 (k = 3, last = 1).
// Pipeline B: slow devices 2, 3, 4; 3 stages cut after units 1 and 3; m = 1, B = 3 (k = 3);
// its middle stage recomputes mlp_act. GBS = 8, T = 4.
inline Plan asymmetric_plan() {
  Plan p;
  p.model = tiny_model();
  p.gbs = 8;
  p.seq_len = 4;
  PipelinePlan a;
  a.micro_batch_size = 2;
  a.local_batch = 5;
  a.stages = {stage("fast", {0}, 0, 2), stage("fast", {1}, 3, 5)};
  PipelinePlan b;
  b.micro_batch_size = 1;
  b.local_batch = 3;
  b.stages = {stage("slow", {2}, 0, 1), stage("slow", {3}, 2, 3), stage("slow", {4}, 4, 5)};
  b.stages[1].recompute.add(RecomputeOp::MlpAct);
  p.pipelines = {a, b};
  return p;
}

}  // namespace eth::test
