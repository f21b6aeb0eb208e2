// The bound applied while generating partitions (search/partition.cpp) as the search drives it:
// templates' bounds tighten between flushes and the generator learns which from the bound log
// (GenerateOptions::bound_log), redoing only those templates' samples. With synthetic options
// that tighten batch after batch, exact covers and idle covers alike: the partitions built
// plus those counted as pruned are the whole space, every one left out is above the threshold
// even on the final (tightest) options, every one built is within it on the options of its
// time (none built on samples the log made stale), and following the log prunes more than the
// bounds first seen would.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "search/partition.h"

namespace eth::search::generation_bound_test {
namespace {

ClusterSpec three_types() {
  const Json j = Json::parse(R"({"nodes": [
      {"device_type": "A", "devices": 8}, {"device_type": "B", "devices": 8},
      {"device_type": "C", "devices": 6}], "device_types": {
      "A": {"tflops": 100, "memory_gb": 40, "intra_node_bandwidth_gbps": 800},
      "B": {"tflops": 50, "memory_gb": 20, "intra_node_bandwidth_gbps": 800},
      "C": {"tflops": 30, "memory_gb": 10, "intra_node_bandwidth_gbps": 800}}})");
  return parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "test", ""}));
}

using Key = std::vector<std::pair<int, std::int64_t>>;
Key key_of(const Partition& p) {
  Key k;
  for (const auto& part : p.parts) k.emplace_back(part.tpl, part.count);
  std::sort(k.begin(), k.end());
  return k;
}

// Per template one option per micro-batch size 1, 2 and 4: a pipeline's time per sample falls
// with the devices it holds (type A twice as fast as B, three times C) and its fill grows with
// its stages. `tighten` multiplies the times of some templates (a lower bound rising as the
// search learns more) and logs them.
struct TighteningOptions {
  const TemplateSet& set;
  std::vector<std::vector<MicroBatchOption>> opts;
  std::vector<int> log;
  const std::vector<MicroBatchOption>& at(int tpl) {
    while (static_cast<int>(opts.size()) <= tpl) {
      const PipelineTemplate& t = set.at(static_cast<int>(opts.size()));
      double power = 0.5;
      for (int type = 0; type < 3; ++type) {
        power += static_cast<double>(t.devices_of(type)) / static_cast<double>(type + 1);
      }
      std::vector<MicroBatchOption> per_size;
      for (const std::int64_t mbs : {1, 2, 4}) {
        const double slot = 6.0 * static_cast<double>(mbs) / power;
        per_size.push_back(
            MicroBatchOption{mbs, slot * 1.5 + 0.7 * static_cast<double>(t.num_stages()), slot});
      }
      opts.push_back(std::move(per_size));
    }
    return opts[static_cast<std::size_t>(tpl)];
  }
  void tighten(int round) {
    for (std::size_t t = 0; t < opts.size(); ++t) {
      if (static_cast<int>(t % 3) != round % 3) continue;
      for (auto& o : opts[t]) {
        o.sum_ms *= 1.15;
        o.max_ms *= 1.15;
      }
      log.push_back(static_cast<int>(t));
    }
  }
};

double bound_of(TighteningOptions& o, const Partition& p, std::int64_t gbs) {
  std::vector<PipelineKind> kinds;
  for (const auto& part : p.parts) kinds.push_back(PipelineKind{o.at(part.tpl), part.count});
  return balanced_time_ms(kinds, gbs);
}

TEST(GenerationBound, FollowsTheLogOfTightenedTemplates) {
  auto types = cluster_types(three_types());
  for (auto& t : types) {
    for (std::int64_t tp : {1, 2, 4}) {
      if (tp <= t.max_node_devices) t.tps.push_back(tp);
    }
  }
  const std::int64_t gbs = 40;
  for (const bool idle : {false, true}) {
    TemplateSet set;
    GenerateOptions full;
    full.num_units = 10;
    full.max_pipelines = gbs;
    full.allow_idle = idle;
    std::vector<Partition> all;
    generate_partitions(types, full, set, all);
    ASSERT_GT(all.size(), 500u);
    // The threshold: a quantile of the bounds the search would first see.
    TighteningOptions first{set, {}, {}};
    std::vector<double> initial;
    for (const auto& p : all) initial.push_back(bound_of(first, p, gbs));
    std::sort(initial.begin(), initial.end());
    const double threshold = initial[initial.size() / 4];

    auto run = [&](bool tightening, std::int64_t& pruned, std::vector<Partition>& kept,
                   TighteningOptions& o) {
      GenerateOptions g = full;
      int flushes = 0;
      g.threshold = [threshold] { return threshold; };
      g.bound_options = [&o](int tpl) -> const std::vector<MicroBatchOption>& {
        return o.at(tpl);
      };
      g.bound_log = &o.log;
      g.gbs = gbs;
      g.pruned = &pruned;
      g.flush_at = 16;
      // A partition built passed the data balance's feasibility at the threshold on the
      // samples its templates take on the options of its time: those since the last flush.
      auto check_built = [&](const std::vector<Partition>& out) {
        for (const auto& p : out) {
          EXPECT_LE(bound_of(o, p, gbs), threshold * (1 + 1e-9))
              << "a partition was built on stale samples (idle " << idle << ")";
        }
        kept.insert(kept.end(), out.begin(), out.end());
      };
      g.flush = [&](std::vector<Partition>& out) {
        check_built(out);
        out.clear();
        if (tightening) o.tighten(++flushes);
      };
      std::vector<Partition> rest;
      generate_partitions(types, g, set, rest);
      check_built(rest);
      return flushes;
    };
    std::int64_t pruned = 0, pruned_static = 0;
    std::vector<Partition> kept, kept_static;
    TighteningOptions tightened{set, {}, {}}, fixed{set, {}, {}};
    EXPECT_GT(run(true, pruned, kept, tightened), 3) << "idle " << idle;
    run(false, pruned_static, kept_static, fixed);
    EXPECT_EQ(static_cast<std::int64_t>(kept_static.size()) + pruned_static,
              static_cast<std::int64_t>(all.size())) << "static, idle " << idle;
    EXPECT_EQ(static_cast<std::int64_t>(kept.size()) + pruned,
              static_cast<std::int64_t>(all.size()));
    EXPECT_GT(pruned, pruned_static) << "the tightened templates must prune more (idle " << idle
                                     << ")";
    std::multiset<Key> kept_keys;
    for (const auto& p : kept) kept_keys.insert(key_of(p));
    for (const auto& p : all) {
      const auto it = kept_keys.find(key_of(p));
      if (it != kept_keys.end()) {
        kept_keys.erase(it);
      } else {
        // Bounds only rose, so one above the threshold when it was left out is above it now.
        EXPECT_GT(bound_of(tightened, p, gbs), threshold)
            << "a partition within the threshold was left out (idle " << idle << ")";
      }
    }
    EXPECT_TRUE(kept_keys.empty()) << "a partition was built that the full space lacks";
  }
}

}  // namespace
}  // namespace eth::search::generation_bound_test
