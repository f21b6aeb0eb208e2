// The tensor-parallel group of a stage replica over a Communicator: what StageCompute calls for
// its all-reduces (train/tp_group.h). Counts the collectives, bytes and wall time it spends, so
// the trainer and bench/tp_bench can report tp communication per step beside the predictor's.
#pragma once

#include <chrono>
#include <cstdint>

#include "comm/communicator.h"
#include "train/tp_group.h"

namespace eth {

// Per-rank tp communication since the last reset().
struct TpCommStats {
  std::int64_t collectives = 0;
  double bytes = 0;    // bytes this rank fed into the group's all-reduces
  double seconds = 0;  // wall time inside them (waiting for the slowest member included)
};

class CommTpGroup final : public TpGroup {
 public:
  explicit CommTpGroup(Communicator comm) : comm_(std::move(comm)) {}

  const Communicator& comm() const { return comm_; }
  int size() const override { return comm_.size(); }
  void allreduce_sum(std::span<float> d) override {
    timed(d, [&] { comm_.allreduce_sum(d); });
  }
  void allreduce_sum(std::span<double> d) override {
    timed(d, [&] { comm_.allreduce_sum(d); });
  }
  void allreduce_max(std::span<float> d) override {
    timed(d, [&] { comm_.allreduce_max(d); });
  }
  void allreduce_max(std::span<double> d) override {
    timed(d, [&] { comm_.allreduce_max(d); });
  }

  const TpCommStats& stats() const { return stats_; }
  void reset() { stats_ = TpCommStats{}; }

 private:
  template <class T, class Op>
  void timed(std::span<T> data, Op op) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats_.bytes += static_cast<double>(data.size_bytes());
    ++stats_.collectives;
  }

  Communicator comm_;
  TpCommStats stats_;
};

}  // namespace eth
