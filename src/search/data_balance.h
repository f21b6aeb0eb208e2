// Inter-pipeline data balance: split the global batch between pipelines at sample granularity,
// and pick each pipeline's micro-batch size, so that the slowest pipeline is as fast as possible.
// Each pipeline's time is T(B) = sum + (ceil(B / m) - 1) x max per micro-batch size m (the 1F1B
// closed form of DESIGN.md section 3 with the last micro-batch priced as a full one). Pure.
#pragma once

#include <cstdint>
#include <vector>

namespace eth::search {

// A pipeline at one micro-batch size: sum_ms = sum_s (F_s + B_s + C_s) and max_ms =
// max_s (F_s + B_s) of one full micro-batch, or round_trip_slot_ms(sum_ms, S) when larger.
struct MicroBatchOption {
  std::int64_t mbs = 1;
  double sum_ms = 0;
  double max_ms = 0;
};

// The slot 1F1B's in-flight limit forces once transfers count: the first of S stages starts
// micro-batch j + S only when j has made its round trip (sum_ms: every stage's F + B and both
// transfers of every boundary), so max_ms is at least sum_ms / S (cost/predictor.cpp,
// transfer_chain_ms). Binds over slow links, where a transfer is a fair part of a stage's F + B.
inline double round_trip_slot_ms(double sum_ms, double stages) { return sum_ms / stages; }

// T(B) for B >= 1 samples.
double option_time_ms(const MicroBatchOption& o, std::int64_t batch);
// The largest B <= cap with T(B) <= target (0 when even one sample takes longer).
std::int64_t option_max_batch(const MicroBatchOption& o, double target_ms, std::int64_t cap);

// `count` identical pipelines, each free to use any of `options` (at least one).
struct PipelineKind {
  std::vector<MicroBatchOption> options;
  std::int64_t count = 1;
};

// The smallest achievable max_p T_p over every split with B_p >= 1 and sum B_p = gbs: exact
// (a binary search on the target time, then snapped to the breakpoint of the step functions
// where the split first becomes possible). +infinity when the pipelines outnumber the samples.
double balanced_time_ms(const std::vector<PipelineKind>& kinds, std::int64_t gbs);

// A cheap lower bound of balanced_time_ms for ordering and pruning against a threshold `cap`:
// never above it, and above `cap` whenever balanced_time_ms is (then only just above: a value
// past the threshold needs no more precision). Below the threshold within a relative `rel` of
// it (a binary search stopped early, on [the slowest first sample, cap] rather than on the
// whole batch's time), so it costs a few feasibility tests where balanced_time_ms costs tens.
double balanced_lower_ms(const std::vector<PipelineKind>& kinds, std::int64_t gbs, double cap,
                         double rel);

// A split achieving balanced_time_ms, per pipeline in kind order (kind 0's `count` pipelines
// first). Each pipeline first takes the most samples it can within the target, then surplus
// samples are removed one at a time from the pipeline with the largest (T_p, B_p) (lowest index
// on ties) so identical pipelines end within one sample of each other; each pipeline finally
// takes the micro-batch size that minimizes its own time (the first such option).
struct DataSplit {
  bool feasible = false;
  double time_ms = 0;               // max_p T_p
  std::vector<std::int64_t> batch;  // B_p
  std::vector<int> option;          // index into the pipeline's kind's options
  std::vector<double> pipeline_ms;  // T_p
};
DataSplit balance_data(const std::vector<PipelineKind>& kinds, std::int64_t gbs);

}  // namespace eth::search
