// Checks of a measured trace (eth train --trace) that do not trust the writer: the Chrome trace
// format's required fields, slices that never overlap within a thread, each forward before its
// backward, and every gradient collective on exactly the devices that hold its units, derived
// here from the plan file by a loop of its own. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"

namespace eth::test {

// The holder groups of block-wise aggregation, from the plan JSON alone: for each unit, the set
// of devices whose stage holds it (every pipeline, every dp replica); each distinct set of two
// or more devices is one collective.
inline std::multiset<std::set<std::int64_t>> holder_groups(const Json& plan) {
  std::map<std::int64_t, std::set<std::int64_t>> holders;  // unit -> devices
  for (const Json& pipe : plan.at("pipelines")) {
    for (const Json& st : pipe.at("stages")) {
      const std::int64_t a = st.at("units")[0], b = st.at("units")[1];
      for (std::int64_t u = a; u <= b; ++u) {
        for (const Json& d : st.at("devices")) holders[u].insert(d.get<std::int64_t>());
      }
    }
  }
  std::set<std::set<std::int64_t>> distinct;
  for (const auto& [u, h] : holders) {
    if (h.size() >= 2) distinct.insert(h);
  }
  return {distinct.begin(), distinct.end()};
}

struct TraceSummary {
  std::size_t slices = 0;
  std::set<std::int64_t> steps;
  std::map<std::string, std::size_t> by_category;
};

// Every check of the file's events; `plan` is the plan JSON the run used (ranks are its devices
// in ascending id order; the test plans number devices 0..n-1, so rank = device). Void (gtest's
// ASSERTs return): the summary goes to `*out`.
inline void check_trace(const Json& doc, const Json& plan, std::size_t ranks, TraceSummary* out) {
  TraceSummary& sum = *out;
  EXPECT_EQ(doc.at("otherData").at("format"), "eth-measured-trace");
  const Json& events = doc.at("traceEvents");
  EXPECT_TRUE(events.is_array());
  // (pid, tid) -> [start, end) of each "X" slice, in microseconds.
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> lanes;
  // (pid, step, micro-batch) -> end of its forward, start of its backward.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, double> fwd_end, bwd_start;
  // step -> collective -> pids.
  std::map<std::int64_t, std::map<std::int64_t, std::set<std::int64_t>>> colls;
  std::set<std::int64_t> named_pids;
  for (const Json& e : events) {
    // Required by the Trace Event Format for every event: name, ph, pid.
    ASSERT_TRUE(e.contains("name") && e.at("name").is_string()) << e.dump();
    ASSERT_TRUE(e.contains("ph") && e.at("ph").is_string()) << e.dump();
    ASSERT_TRUE(e.contains("pid") && e.at("pid").is_number_integer()) << e.dump();
    const std::string ph = e.at("ph");
    const std::int64_t pid = e.at("pid");
    EXPECT_GE(pid, 0);
    EXPECT_LT(pid, static_cast<std::int64_t>(ranks));
    if (ph == "M") {
      ASSERT_TRUE(e.contains("args") && e.at("args").is_object()) << e.dump();
      if (e.at("name") == "process_name") named_pids.insert(pid);
      if (e.at("name") == "thread_name") {
        EXPECT_TRUE(e.contains("tid")) << e.dump();
      }
      continue;
    }
    ASSERT_EQ(ph, "X") << e.dump();  // the writer emits only metadata and complete slices
    for (const char* k : {"tid", "ts", "dur", "cat"}) ASSERT_TRUE(e.contains(k)) << k << e.dump();
    ASSERT_TRUE(e.at("tid").is_number_integer());
    const double ts = e.at("ts"), dur = e.at("dur");
    EXPECT_GE(ts, 0.0);
    EXPECT_GE(dur, 0.0);
    const std::int64_t tid = e.at("tid");
    lanes[{pid, tid}].push_back({ts, ts + dur});
    ++sum.slices;
    const std::string cat = e.at("cat");
    ++sum.by_category[cat];
    const Json& args = e.at("args");
    const std::int64_t step = args.at("step");
    sum.steps.insert(step);
    if (cat == "forward") fwd_end[{pid, step, args.at("microbatch")}] = ts + dur;
    if (cat == "backward") bwd_start[{pid, step, args.at("microbatch")}] = ts;
    if (cat == "collective") colls[step][args.at("collective")].insert(pid);
  }
  EXPECT_EQ(named_pids.size(), ranks) << "one named process per rank";
  // Within one thread no two slices overlap (times are microseconds with ns resolution).
  for (auto& [lane, v] : lanes) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) {
      EXPECT_GE(v[i].first, v[i - 1].second - 1e-3)
          << "pid " << lane.first << " tid " << lane.second << ": slice at " << v[i].first
          << " us starts before the previous one ends at " << v[i - 1].second;
    }
  }
  // Every backward has its forward, which ended before it began.
  EXPECT_EQ(fwd_end.size(), bwd_start.size());
  for (const auto& [key, start] : bwd_start) {
    const auto f = fwd_end.find(key);
    ASSERT_NE(f, fwd_end.end()) << "backward of micro-batch " << std::get<2>(key) << " on rank "
                                << std::get<0>(key) << " without a forward";
    EXPECT_LE(f->second, start + 1e-3);
  }
  // Each step: the collectives' rank sets are exactly the plan's holder groups.
  const auto want = holder_groups(plan);
  for (const std::int64_t step : sum.steps) {
    std::multiset<std::set<std::int64_t>> got;
    for (const auto& [c, pids] : colls[step]) got.insert(pids);
    EXPECT_EQ(got, want) << "step " << step;
  }
}

}  // namespace eth::test
