// The trace writers: the Chrome trace is valid JSON whose "X" events are exactly the timeline
// (count, pids and lanes, microsecond times), and the SVG is one well-formed document with a
// row per device, both colours of compute, collectives, an axis and a legend.
#include "sim/trace.h"

#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"
#include "sim_fixture.h"

namespace eth {
namespace {

using test::make_plan;
using test::PipeSpec;

struct Small {
  Plan plan;
  SimResult result;
};

Small small_run() {
  Small s;
  s.plan = make_plan(test::sim_model(4),
                     {PipeSpec{1, 3, {{0, 2}, {3, 5, 2, 1, "RTX3090"}}}, PipeSpec{1, 2, {{0, 5}}}});
  auto costs = test::uniform_costs(s.plan, 1.0, 2.0, 0.5, 0.25, 100, 1000);
  std::vector<SimCollective> colls{SimCollective{{0, 3}, 0, 1.5, 0},
                                   SimCollective{{1, 3}, 3, 0.5, 0}};
  // Holders must be ascending; device 3 is pipeline 1's only device.
  s.result = simulate(s.plan, costs, colls, SimOptions{});
  return s;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(Trace, ChromeTraceHoldsEveryTimelineEntry) {
  const Small s = small_run();
  const Json j = Json::parse(chrome_trace_json(s.plan, s.result));
  std::size_t x = 0, counters = 0;
  std::set<std::int64_t> pids;
  const std::int64_t stride = 4;  // 1 + largest device id (3)
  for (const auto& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "C") ++counters;
    if (ph != "X") continue;
    const auto& t = s.result.timeline.entries[x];
    EXPECT_EQ(e.at("pid").get<std::int64_t>(), t.pipeline);
    EXPECT_EQ(e.at("tid").get<std::int64_t>() % stride, t.device);
    EXPECT_NEAR(e.at("ts").get<double>(), static_cast<double>(t.start) / 1e3, 1e-3);
    EXPECT_NEAR(e.at("dur").get<double>(), static_cast<double>(t.end - t.start) / 1e3, 1e-3);
    pids.insert(e.at("pid").get<std::int64_t>());
    ++x;
  }
  EXPECT_EQ(x, s.result.timeline.entries.size());
  EXPECT_EQ(pids, (std::set<std::int64_t>{0, 1}));
  std::size_t samples = 0;
  for (const auto& st : s.result.stages) samples += st.memory.size();
  EXPECT_EQ(counters, samples);
}

TEST(Trace, SvgHasRowsBarsAxisAndLegend) {
  const Small s = small_run();
  const std::string svg = timeline_svg(s.plan, s.result);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<svg"), 1u);
  // One label per device: "p<pipeline> s<stage> dev <id>".
  for (const char* label : {"p0 s0 dev 0", "p0 s1 dev 1", "p0 s1 dev 2", "p1 s0 dev 3"}) {
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  }
  // Every drawn entry (all but receives) is one <rect> with a <title>.
  std::size_t drawn = 0;
  for (const auto& e : s.result.timeline.entries) {
    if (e.kind != ActionKind::RecvActivation && e.kind != ActionKind::RecvGradient) ++drawn;
  }
  EXPECT_EQ(count(svg, "<title>"), drawn);
  for (const char* colour : {"#4e79a7", "#f28e2b", "#e15759", "#b07aa1"}) {
    EXPECT_GE(count(svg, colour), 2u) << colour;  // bars plus the legend swatch
  }
  EXPECT_NE(svg.find("time (ms)"), std::string::npos);
  EXPECT_NE(svg.find("gradient all-reduce"), std::string::npos);
}

}  // namespace
}  // namespace eth
