// What each rank of a plan allocates (DistributedTrainer::memory, on LocalWorld threads) against
// the predictor's memory of its stage: weights, gradients and optimizer state, the activation
// arena (slots + workspace) exactly; the activation-message buffers at most the predicted
// (the send pool grows with the sends pending at once, which the predictor bounds). A plan of two
// pipelines with a dp-2 stage and operator recompute beside a one-stage pipeline under full
// recompute, both precisions, dropout on. Peak RSS, collective temporaries and the process
// baseline need one process per rank: bench/memory_bench.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "comm/communicator.h"
#include "cost/predictor.h"
#include "runtime_test_util.h"
#include "train/arena_profile.h"

namespace eth {
namespace {

namespace fs = std::filesystem;

struct RankSeen {
  RankPlace place;
  RankMemory memory;
};

// The predictor's default collective window is what the runtime's communicator keeps in flight
// per holder group: the cost library mirrors the constant because it may not include comm.
TEST(MemoryModel, PredictedCollectiveWindowIsTheCommunicatorsDefault) {
  const CommOptions comm;
  EXPECT_EQ(kDefaultCollectiveWindowBytes,
            static_cast<double>(std::max(comm.window_bytes, comm.chunk_bytes)));
  EXPECT_EQ(PredictOptions{}.collective_window_bytes, kDefaultCollectiveWindowBytes);
  // The pieces the predictor prices a collective in are the communicator's.
  EXPECT_EQ(kDefaultCollectiveChunkBytes, static_cast<double>(comm.chunk_bytes));
  EXPECT_EQ(PredictOptions{}.collective_chunk_bytes, kDefaultCollectiveChunkBytes);
}

TEST(MemoryModel, EveryRanksBuffersAreThePredictorsStageMemory) {
  const ModelSpec m = test::aligned_model();  // units 0 embedding, 1-4 blocks, 5 head
  RecomputeSet attn_mlp, unit;
  attn_mlp.add(RecomputeOp::AttnSoftmax);
  attn_mlp.add(RecomputeOp::MlpAct);
  unit.add(RecomputeOp::Unit);
  const Plan plan =
      test::make_plan(m, m.seq_len,
                      {{2, 6, {{0, 1}, {2, 3, 2, attn_mlp}, {4, 5}}}, {1, 3, {{0, 5, 1, unit}}}});
  const fs::path dir = test::temp_dir("memory_model");
  const fs::path data = test::synthetic_file(dir, 4000, m.vocab);
  for (Precision p : {Precision::Fp32, Precision::Bf16}) {
    SCOPED_TRACE(std::string(precision_name(p)));
    TrainConfig c = test::train_config(m, data, plan.gbs, m.seq_len, 1);
    c.precision = p;
    DistTrainConfig dc;
    dc.train = c;
    dc.plan = plan;
    std::vector<RankSeen> seen;
    std::mutex mu;
    LocalWorld world(static_cast<int>(plan.num_devices()));
    auto errors = run_on_threads(world, [&](Communicator comm) {
      omp_set_num_threads(1);
      DistributedTrainer t(dc, comm);
      t.step();
      std::lock_guard lock(mu);
      seen.push_back({t.place(), t.memory()});
    });
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    // The profile `eth profile --measure` would write for this run (the dp-2 stage's share of 2
    // samples is 1): activation bytes off the runtime's buffers, with the run's dropout.
    ProfileDb profile(m);
    for (std::int64_t mbs : {1, 2}) {
      profile.add(test::arena_profile_entry(p, m, mbs, c.dropout, 1));
    }
    PredictOptions po;
    po.precision = p;
    const Prediction pred = predict(plan, test::cpu_cluster(plan.num_devices()), profile, po);
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(plan.num_devices()));
    for (const RankSeen& r : seen) {
      SCOPED_TRACE("pipeline " + std::to_string(r.place.pipeline) + " stage " +
                   std::to_string(r.place.stage) + " dp rank " + std::to_string(r.place.dp_rank));
      const MemoryBreakdown& want = pred.pipelines[static_cast<std::size_t>(r.place.pipeline)]
                                        .stages[static_cast<std::size_t>(r.place.stage)]
                                        .memory;
      EXPECT_DOUBLE_EQ(r.memory.weights, want.weights);
      EXPECT_DOUBLE_EQ(r.memory.gradients, want.gradients);
      EXPECT_DOUBLE_EQ(r.memory.optimizer_state, want.optimizer_state);
      EXPECT_DOUBLE_EQ(r.memory.activations, want.activations + want.workspace);
      EXPECT_LE(r.memory.buffers, want.messages);
    }
  }
}

}  // namespace
}  // namespace eth
