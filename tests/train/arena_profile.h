// A profile entry built as `eth profile --measure` builds one (each unit's activation bytes per
// operator class off the runtime's own buffers), without timing anything: from the arena the
// runtime plans for one-unit stages, which needs no tp group, so tp > 1 works too. For tests
// that compare the predictor's memory with what the runtime allocates. Test-only.
#pragma once

#include <cstdint>

#include "model/arithmetic.h"
#include "profile/profile.h"
#include "train/precision_stage.h"

namespace eth::test {

// Every buffer of this model is a multiple of the arena's 64-byte alignment at tp 1 (N = B * 16
// rows of 4-byte statistics, C = 32, V = 64, T * T = 256), so planned arenas have no padding.
inline ModelSpec aligned_model() { return ModelSpec{"aligned", 4, 32, 4, 16, 64, 128}; }

inline StageComputeConfig unit_range(const ModelSpec& m, std::int64_t first, std::int64_t last,
                                     std::int64_t mbs, std::int64_t slots, RecomputeSet rc,
                                     float dropout, std::int64_t tp) {
  StageComputeConfig c;
  c.first_unit = first;
  c.last_unit = last;
  c.max_micro_batch = mbs;
  c.seq_len = m.seq_len;
  c.num_slots = slots;
  c.recompute = rc;
  c.dropout = dropout;
  c.tp = tp;
  return c;
}

// Unit u's activation bytes per operator class, read off the runtime's sizing of a one-unit
// stage: one more slot adds what a slot holds, held(rc); class k holds held({}) - held({k}).
// At tp 1 this is what StageCompute::activation_bytes reports (tests/train/
// arena_model_test.cpp checks it), the figure `eth profile --measure` writes.
inline ActivationBytes unit_activation(Precision p, const ModelSpec& m, std::int64_t u,
                                       std::int64_t mbs, float dropout, std::int64_t tp) {
  auto held = [&](RecomputeSet rc) {
    const auto two =
        PrecisionStage::planned_arena_bytes(p, m, unit_range(m, u, u, mbs, 2, rc, dropout, tp));
    const auto one =
        PrecisionStage::planned_arena_bytes(p, m, unit_range(m, u, u, mbs, 1, rc, dropout, tp));
    return static_cast<double>(two - one);
  };
  ActivationBytes a;
  const double all = held({});
  double classes = 0;
  for (int k = 0; k + 1 < kNumRecomputeOps; ++k) {
    RecomputeSet rc;
    rc.add(static_cast<RecomputeOp>(k));
    a.op[static_cast<std::size_t>(k)] = all - held(rc);
    classes += a.op[static_cast<std::size_t>(k)];
  }
  a.other = all - classes;
  RecomputeSet unit;
  unit.add(RecomputeOp::Unit);
  a.unit_input = held(unit);
  return a;
}

// Device type "cpu"; times are placeholders (1 and 2 ms a unit): memory does not read them.
inline ProfileEntry arena_profile_entry(Precision p, const ModelSpec& m, std::int64_t mbs,
                                        float dropout, std::int64_t tp) {
  ProfileEntry e;
  e.key = {"cpu", tp, mbs};
  e.seq_len = m.seq_len;
  e.source = "measured";
  e.precision = p;
  for (std::int64_t u = 0; u < m.num_units(); ++u) {
    UnitProfile up;
    up.forward_ms = 1;
    up.backward_ms = 2;
    up.params = unit_params(m, u, tp);
    up.activation = unit_activation(p, m, u, mbs, dropout, tp);
    e.units.push_back(up);
  }
  return e;
}

}  // namespace eth::test
