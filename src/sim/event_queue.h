// The discrete-event queue: typed events ordered by (integer nanoseconds, insertion sequence),
// so events at the same time pop first-in first-out (ASTRA-sim's EventList property, without
// its list scan) and every run of the same input yields the same order. No callbacks: the
// caller pops a value and dispatches on its type.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "core/error.h"

namespace eth {

// Simulated time: nanoseconds since the iteration started. Integer, so ties are exact and
// results identical across compilers; durations are converted from milliseconds once.
using TimeNs = std::int64_t;

template <typename Payload>
class EventQueue {
 public:
  struct Entry {
    TimeNs time = 0;
    std::uint64_t seq = 0;
    Payload payload;
  };

  void push(TimeNs time, Payload p) {
    ETH_CHECK(time >= now_, "event scheduled in the past");
    heap_.push(Entry{time, next_seq_++, std::move(p)});
  }
  bool empty() const { return heap_.empty(); }
  // Pops the earliest event and advances now() to its time.
  Entry pop() {
    Entry e = heap_.top();
    heap_.pop();
    now_ = e.time;
    ++popped_;
    return e;
  }
  TimeNs now() const { return now_; }
  std::uint64_t popped() const { return popped_; }

 private:
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> heap_;
  TimeNs now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t popped_ = 0;
};

}  // namespace eth
