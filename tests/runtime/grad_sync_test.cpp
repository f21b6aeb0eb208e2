// Gradient aggregation: sums checked by hand on threads for dp and tp plans (lcm(tp) > tp
// included), in place (nothing copied) with the placed layout (grad_layout_test.cpp checks the
// layout itself) and packed with the unit-major one.
#include "runtime/grad_sync.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "grad_test_plans.h"
#include "runtime/placement.h"

namespace eth::grad_sync_test {
namespace {

using test::dp_plan;
using test::expect_no_errors;
using test::for_each_grad;
using test::kModes;
using test::lcm6_plan;
using test::stage_of;
using test::tp_plan;
using test::unit_major;

// Each rank's gradient element with canonical id e is (rank + 1) * f(e); after aggregation it
// must be f(e) times the sum of (rank + 1) over the element's holders, worked out here from the
// plan: per pipeline and dp replica, the tp rank whose rows hold it (replicated: tp rank 0, then
// broadcast to the group).
void check_sums(const Plan& plan, bool placed, const CommOptions& options = {}) {
  const auto places = place_ranks(plan);
  const ParamLayout full(plan.model, 0, plan.model.num_units() - 1);
  auto f = [](std::int64_t id) { return static_cast<float>(id % 7 + 1); };
  // holders[id]: sum of (rank + 1) over the ranks holding element id (replicated: tp rank 0).
  std::vector<float> holders(static_cast<std::size_t>(full.numel()), 0.0f);
  for (std::size_t r = 0; r < places.size(); ++r) {
    const ParamLayout l = unit_major(plan, places[r]);
    for_each_grad(full, l, [&](std::int64_t, std::int64_t id) {
      const bool replicated = [&] {
        for (const UnitSlot& u : full.units()) {
          for (const TensorSlot& t : u.tensors) {
            if (id >= t.offset && id < t.offset + t.desc.numel()) {
              return t.desc.split == TpSplit::Replicated;
            }
          }
        }
        return false;
      }();
      if (!replicated || places[r].tp_rank == 0) {
        holders[static_cast<std::size_t>(id)] += static_cast<float>(r + 1);
      }
    });
  }
  for (AggregationMode mode : kModes) {
    SCOPED_TRACE(std::string(aggregation_mode_name(mode)) + (placed ? " placed" : " unit-major"));
    LocalWorld world(static_cast<int>(plan.num_devices()), options);
    auto errors = run_on_threads(world, [&](Communicator comm) {
      const RankPlace& me = places[static_cast<std::size_t>(comm.rank())];
      const ParamLayout layout = placed ? plan_layout(plan, me.device, mode) : unit_major(plan, me);
      std::vector<float> g(static_cast<std::size_t>(layout.grad_numel()), 0.0f);
      for_each_grad(full, layout, [&](std::int64_t at, std::int64_t id) {
        g[static_cast<std::size_t>(at)] = static_cast<float>(comm.rank() + 1) * f(id);
      });
      const StagePlan& st = stage_of(plan, me);
      const int color = st.tp > 1 ? static_cast<int>(stage_device(st, me.dp_rank, 0)) : -1;
      const Communicator tp = comm.split(color, static_cast<int>(me.tp_rank));
      GradSync sync(plan, mode, comm, layout, tp);
      // In place with the placed layout (device-wise zeroes its padding: the model less what
      // the rank feeds, its replicated tensors only on tp rank 0); packing copies with the
      // unit-major one.
      if (placed && mode == AggregationMode::Device) {
        std::int64_t held = 0;
        for (const UnitSlot& u : layout.units()) {
          for (const TensorSlot& t : u.tensors) {
            if (t.desc.split == TpSplit::Sharded || me.tp_rank == 0) held += t.desc.numel();
          }
        }
        EXPECT_EQ(sync.bytes_copied(), 4.0 * static_cast<double>(full.numel() - held));
      } else if (placed) {
        EXPECT_EQ(sync.bytes_copied(), 0.0);
      } else if (sync.collectives() > 0 && mode != AggregationMode::Tensor) {
        EXPECT_GT(sync.bytes_copied(), 0.0);
      }
      // As a backward would: units from the last down, posting what is ready after each.
      for (std::int64_t u = layout.last_unit(); u >= layout.first_unit(); --u) {
        sync.start_ready(g.data(), u);
      }
      sync.start(g.data());
      sync.finish(g.data());
      for_each_grad(full, layout, [&](std::int64_t at, std::int64_t id) {
        ASSERT_EQ(g[static_cast<std::size_t>(at)], holders[static_cast<std::size_t>(id)] * f(id))
            << "rank " << comm.rank() << " element " << id;
      });
      // The window's bound (docs/comm.md): communicators x max(window, chunk) in flight.
      EXPECT_LE(static_cast<double>(sync.peak_bytes_in_flight()),
                static_cast<double>(sync.communicators()) *
                    static_cast<double>(std::max(options.window_bytes, options.chunk_bytes)));
    });
    expect_no_errors(errors);
  }
}

TEST(GradSync, SumsEveryHolderExactlyOnceInPlace) {
  check_sums(dp_plan(), true);
  check_sums(tp_plan(), true);
  check_sums(lcm6_plan(), true);
}

TEST(GradSync, ASmallWindowOfSmallPiecesGivesTheSameSums) {
  // 64-byte pieces, at most two in flight per communicator: every collective of these plans
  // runs through the window many times over (the default window holds them whole).
  CommOptions o;
  o.chunk_bytes = 64;
  o.window_bytes = 128;
  check_sums(tp_plan(), true, o);
  check_sums(lcm6_plan(), true, o);
}

TEST(GradSync, OtherLayoutsArePackedAndGiveTheSameSums) {
  check_sums(dp_plan(), false);
  check_sums(tp_plan(), false);
}

}  // namespace
}  // namespace eth::grad_sync_test
