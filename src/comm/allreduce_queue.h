// In-place sum all-reduces over any communicators, queued in one order and posted piece by piece
// with a bounded number of bytes in flight (CommOptions::window_bytes). What it bounds: every
// posted non-blocking MPI all-reduce allocates a temporary the size of its piece until it
// completes (Open MPI's libnbc), so posting a whole gradient at once held about one more
// gradient of memory; a window holds at most
//   max(window_bytes, chunk_bytes)
// bytes of such temporaries per process, whatever the collectives' total size. Pieces are posted
// strictly in queue order, so ranks that queue their shared collectives in one global order
// (DESIGN.md section 5) cannot deadlock: the first piece not complete anywhere has been posted
// by all its members, who all keep driving progress until it completes.
//
// How to use (each rank, its collectives in the global order):
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
  // window_bytes: the most bytes of pieces in flight at once; a piece larger than the window
  // is posted alone. Must be >= 1.
  explicit AllreduceQueue(std::size_t window_bytes);

  // Queues the in-place sum of `data` over `comm`, cut into pieces of at most
  // comm.options().chunk_bytes. `data` must stay alive and untouched until the collective is
  // complete. Returns the collective's index (0, 1, ... since the last clear()).
  std::size_t push(const Communicator& comm, std::span<float> data);
  // Tests the pieces in flight and posts queued ones while they fit the window, in queue order.
  // Never blocks; returns true when every queued piece is complete.
  bool progress();
  // Blocks until collective `index` is complete (and posts later pieces as room frees); each
  // wait on a piece is bounded by its communicator's timeout (CommTimeout).
  void wait(std::size_t index);
  void wait_all();
  bool done(std::size_t index) const;
  // Forgets every collective; all must be complete.
  void clear();

  std::size_t window_bytes() const { return window_bytes_; }
  // The most bytes that were in flight at once since construction (for tests and benches).
  std::size_t peak_bytes_in_flight() const { return peak_bytes_; }

 private:
  struct Piece {
    std::size_t collective = 0;
    std::span<float> data;
    Communicator comm;
    Request request;
  };
  void post_what_fits();
  void retire(std::size_t piece);  // bookkeeping of a completed piece (index into queued_)
  void wait_front();               // blocks on the oldest piece in flight and retires it

  std::size_t window_bytes_;
  std::vector<Piece> queued_;         // every piece since clear(), in posting order
  std::size_t next_ = 0;              // first piece of queued_ not yet posted
  std::deque<std::size_t> in_flight_; // indices into queued_, oldest first
  std::size_t bytes_in_flight_ = 0;
  std::vector<std::size_t> pending_;  // per collective: pieces not yet complete
  std::size_t peak_bytes_ = 0;
};

}  // namespace eth
