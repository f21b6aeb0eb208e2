// The windowed all-reduce queue. See allreduce_queue.h.
#include "comm/allreduce_queue.h"

#include <algorithm>

#include "core/error.h"

namespace eth {

AllreduceQueue::AllreduceQueue(std::size_t window_bytes) : window_bytes_(window_bytes) {
  ETH_CHECK(window_bytes_ >= 1, "an all-reduce window needs at least one byte");
}

std::size_t AllreduceQueue::push(const Communicator& comm, std::span<float> data) {
  const std::size_t index = pending_.size();
  const std::size_t per_piece = std::max<std::size_t>(1, comm.options().chunk_bytes / sizeof(float));
  std::size_t pieces = 0;
  for (std::size_t begin = 0; begin < data.size(); begin += per_piece) {
    queued_.push_back(Piece{index, data.subspan(begin, std::min(per_piece, data.size() - begin)),
                            comm, Request()});
    ++pieces;
  }
  pending_.push_back(pieces);
  return index;
}

void AllreduceQueue::post_what_fits() {
  while (next_ < queued_.size()) {
    Piece& p = queued_[next_];
    const std::size_t bytes = p.data.size_bytes();
    if (!in_flight_.empty() && bytes_in_flight_ + bytes > window_bytes_) return;
    // One piece: iallreduce_sum cuts nothing below chunk_bytes, so this is one collective.
    p.request = p.comm.iallreduce_sum(p.data);
    in_flight_.push_back(next_++);
    bytes_in_flight_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, bytes_in_flight_);
  }
}

void AllreduceQueue::retire(std::size_t piece) {
  Piece& p = queued_[piece];
  p.request = Request();
  bytes_in_flight_ -= p.data.size_bytes();
  --pending_[p.collective];
}

void AllreduceQueue::wait_front() {
  const std::size_t piece = in_flight_.front();
  queued_[piece].request.wait();
  in_flight_.pop_front();
  retire(piece);
}

bool AllreduceQueue::progress() {
  post_what_fits();
  // Every piece in flight is tested (on MPI each test also progresses the others); finished
  // ones leave the window wherever they sit, so a slow group does not hold a fast one's room.
  std::deque<std::size_t> still;
  for (const std::size_t piece : in_flight_) {
    if (queued_[piece].request.test()) {
      retire(piece);
    } else {
      still.push_back(piece);
    }
  }
  if (still.size() != in_flight_.size()) {
    in_flight_.swap(still);
    post_what_fits();
  }
  return next_ == queued_.size() && in_flight_.empty();
}

bool AllreduceQueue::done(std::size_t index) const {
  ETH_CHECK(index < pending_.size(), "AllreduceQueue: no collective " + std::to_string(index));
  return pending_[index] == 0;
}

void AllreduceQueue::wait(std::size_t index) {
  while (!done(index)) {
    progress();
    if (done(index)) return;
    // Block on the oldest piece in flight: pieces are posted in order, so the collective's
    // remaining ones are in flight behind it or wait for its room.
    ETH_CHECK(!in_flight_.empty(), "AllreduceQueue: a collective pending with nothing in flight");
    wait_front();
  }
}

void AllreduceQueue::wait_all() {
  if (!pending_.empty()) wait(pending_.size() - 1);
  // Pieces complete out of order across communicators: wait for any earlier stragglers too.
  while (!in_flight_.empty()) wait_front();
  ETH_CHECK(progress(), "AllreduceQueue: pieces left after wait_all");
}

void AllreduceQueue::clear() {
  ETH_CHECK(next_ == queued_.size() && in_flight_.empty(),
            "AllreduceQueue::clear with collectives still pending");
  queued_.clear();
  pending_.clear();
  next_ = 0;
}

}  // namespace eth
