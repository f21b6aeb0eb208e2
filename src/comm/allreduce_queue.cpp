// The windowed all-reduce queue. See allreduce_queue.h.
#include "comm/allreduce_queue.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"

namespace eth {

AllreduceQueue::AllreduceQueue(std::size_t window_bytes) : window_bytes_(window_bytes) {
  ETH_CHECK(window_bytes_ >= 1, "an all-reduce window needs at least one byte");
}

std::size_t AllreduceQueue::push(const Communicator& comm, std::span<float> data) {
  const std::size_t index = pending_.size();
  std::size_t lane = 0;
  while (lane < lanes_.size() && !lanes_[lane].comm.same_as(comm)) ++lane;
  if (lane == lanes_.size()) lanes_.push_back(Lane{comm, {}, {}, 0});
  const std::size_t per_piece = std::max<std::size_t>(1, comm.options().chunk_bytes / sizeof(float));
  std::size_t pieces = 0;
  for (std::size_t begin = 0; begin < data.size(); begin += per_piece) {
    lanes_[lane].waiting.push_back(pieces_.size());
    pieces_.push_back(
        Piece{index, lane, data.subspan(begin, std::min(per_piece, data.size() - begin)), {}});
    ++pieces;
  }
  pending_.push_back(pieces);
  lane_of_.push_back(lane);
  return index;
}

void AllreduceQueue::post_what_fits(Lane& lane) {
  while (!lane.waiting.empty()) {
    Piece& p = pieces_[lane.waiting.front()];
    const std::size_t bytes = p.data.size_bytes();
    if (!lane.in_flight.empty() && lane.bytes_in_flight + bytes > window_bytes_) return;
    // One piece: iallreduce_sum cuts nothing below chunk_bytes, so this is one collective.
    p.request = lane.comm.iallreduce_sum(p.data);
    lane.in_flight.push_back(lane.waiting.front());
    lane.waiting.pop_front();
    lane.bytes_in_flight += bytes;
    bytes_in_flight_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, bytes_in_flight_);
  }
}

void AllreduceQueue::retire(std::size_t piece) {
  Piece& p = pieces_[piece];
  p.request = Request();
  lanes_[p.lane].bytes_in_flight -= p.data.size_bytes();
  bytes_in_flight_ -= p.data.size_bytes();
  --pending_[p.collective];
  ++completed_;
}

bool AllreduceQueue::progress() {
  bool complete = true;
  for (Lane& lane : lanes_) {
    post_what_fits(lane);
    // Only each communicator's oldest piece is tested (its pieces finish in order): on MPI
    // every test runs Open MPI's whole progress engine over every posted piece, so testing all
    // of them cost a sweep quadratic in the pieces in flight.
    bool freed = false;
    while (!lane.in_flight.empty() && pieces_[lane.in_flight.front()].request.test()) {
      retire(lane.in_flight.front());
      lane.in_flight.pop_front();
      freed = true;
    }
    if (freed) post_what_fits(lane);
    complete = complete && lane.waiting.empty() && lane.in_flight.empty();
  }
  return complete;
}

bool AllreduceQueue::done(std::size_t index) const {
  ETH_CHECK(index < pending_.size(), "AllreduceQueue: no collective " + std::to_string(index));
  return pending_[index] == 0;
}

void AllreduceQueue::wait(std::size_t index) {
  // Never blocks on one piece for long: a rank stuck in one communicator's piece would stop
  // refilling its other windows, and peers waiting on those could wait on it in a cycle. So it
  // waits in short slices on the collective's oldest piece in flight (its communicator posts
  // in order, so that one finishes first there) and refills every window between slices.
  using std::chrono::microseconds;
  using Clock = std::chrono::steady_clock;
  constexpr microseconds kSlice{200};
  Clock::time_point last_completion = Clock::now();
  while (!done(index)) {
    const std::size_t before = completed_;
    progress();
    if (done(index)) return;
    Lane& lane = lanes_[lane_of_[index]];
    ETH_CHECK(!lane.in_flight.empty(),
              "AllreduceQueue: a collective pending with nothing in flight");
    const std::size_t piece = lane.in_flight.front();
    const auto waited = std::chrono::duration_cast<microseconds>(Clock::now() - last_completion);
    if (pieces_[piece].request.wait_for(kSlice, waited)) {
      lane.in_flight.pop_front();
      retire(piece);
    }
    if (completed_ != before) {
      last_completion = Clock::now();
    } else if (Clock::now() - last_completion > lane.comm.options().timeout) {
      // Nothing anywhere completed for a whole timeout: the blocking wait names the ranks it
      // waits for (CommTimeout), after at most one more timeout.
      pieces_[piece].request.wait();
    }
  }
}

void AllreduceQueue::wait_all() {
  for (std::size_t i = 0; i < pending_.size(); ++i) wait(i);
  ETH_CHECK(progress(), "AllreduceQueue: pieces left after wait_all");
}

void AllreduceQueue::clear() {
  for (const Lane& lane : lanes_) {
    ETH_CHECK(lane.waiting.empty() && lane.in_flight.empty(),
              "AllreduceQueue::clear with collectives still pending");
  }
  pieces_.clear();
  pending_.clear();
  lane_of_.clear();
}

}  // namespace eth
