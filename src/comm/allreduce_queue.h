// In-place sum all-reduces over any communicators, queued in order and posted piece by piece
// with a bounded number of bytes in flight on each communicator (CommOptions::window_bytes).
// What it bounds: every posted non-blocking MPI all-reduce allocates a temporary the size of
// its piece until it completes (Open MPI's libnbc), so posting a whole gradient at once held
// about one more gradient of memory; with windows a process holds at most
//   communicators * max(window_bytes, chunk_bytes)
// bytes of such temporaries, `communicators` being the distinct communicators it queued on,
// whatever the collectives' total size.
//
// Why one window per communicator, not one for the process: a shared window posts a rank's
// collectives one group after another, so the partners of its later groups idle while it
// works through the first (block-wise aggregation, whose groups each hold megabytes, lost to
// tensor-wise, whose per-tensor collectives interleave the groups; docs/comm.md "Window").
// And it is deadlock-free in any order: a communicator's window frees only as that
// communicator's own pieces complete, which needs nothing but its members posting them in
// their common order (MPI's rule), so no wait can chain across communicators.
//
// How to use (each rank, each communicator's collectives in that communicator's order):
//   AllreduceQueue q(world.options().window_bytes);
//   std::size_t a = q.push(group_a, span_a);   // nothing posted yet
//   q.push(group_b, span_b);
//   q.progress();                              // posts what fits, tests what is in flight
//   ... compute, calling q.progress() now and then ...
//   q.wait(a);                                 // until collective a is complete
//   q.wait_all();  q.clear();                  // the step's end; the queue is reusable
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "comm/communicator.h"

namespace eth {

class AllreduceQueue {
 public:
  // window_bytes: the most bytes of pieces in flight at once on one communicator; a piece
  // larger than the window is posted alone. Must be >= 1.
  explicit AllreduceQueue(std::size_t window_bytes);

  // Queues the in-place sum of `data` over `comm`, cut into pieces of at most
  // comm.options().chunk_bytes. `data` must stay alive and untouched until the collective is
  // complete. Returns the collective's index (0, 1, ... since the last clear()).
  std::size_t push(const Communicator& comm, std::span<float> data);
  // Tests the pieces in flight and posts queued ones while their communicator's window has
  // room, each communicator's in queue order. Never blocks; true when every piece is complete.
  bool progress();
  // Blocks until collective `index` is complete, posting later pieces as room frees. Throws
  // CommTimeout once no piece anywhere has completed for its communicator's timeout (the
  // error comes after at most one more timeout, from a blocking wait that names the peers).
  void wait(std::size_t index);
  void wait_all();
  bool done(std::size_t index) const;
  // Forgets every collective; all must be complete. Communicators seen stay known.
  void clear();

  std::size_t window_bytes() const { return window_bytes_; }
  // The most bytes that were in flight at once since construction, over all communicators
  // (what the MPI temporaries peaked at), and the communicators queued on.
  std::size_t peak_bytes_in_flight() const { return peak_bytes_; }
  std::size_t communicators() const { return lanes_.size(); }

 private:
  struct Piece {
    std::size_t collective = 0;
    std::size_t lane = 0;
    std::span<float> data;
    Request request;
  };
  // One communicator's pieces: posted in order, at most window_bytes_ of them in flight.
  struct Lane {
    Communicator comm;
    std::deque<std::size_t> waiting;    // pieces (indices into pieces_) not posted, in order
    std::deque<std::size_t> in_flight;  // posted, not known complete, oldest first
    std::size_t bytes_in_flight = 0;
  };
  void post_what_fits(Lane& lane);
  void retire(std::size_t piece);  // bookkeeping of a completed piece

  std::size_t window_bytes_;
  std::vector<Piece> pieces_;        // every piece since clear(), in push order
  std::vector<Lane> lanes_;
  std::vector<std::size_t> pending_;  // per collective: pieces not yet complete
  std::vector<std::size_t> lane_of_;  // per collective: its lane
  std::size_t bytes_in_flight_ = 0;   // over all lanes
  std::size_t completed_ = 0;         // pieces retired, ever (to see progress)
  std::size_t peak_bytes_ = 0;
};

}  // namespace eth
