// plan_bench: the planner's figures. For every paper scenario (Table 2's six models on their
// 910B2/910B4 and A100/RTX3090 cluster presets) the search time and the predicted iteration time
// of eth, layer and uniform with speedups, eth's fraction of the ideal bound, and the max/min
// device latency of layer (real and unlimited memory) and eth (Fig. 3, 9, 10 breakdown); the
// search ablation (Fig. 13a), alpha sensitivity (Fig. 13b), 13B scalability in devices, global
// batch and sequence length (Fig. 11a-c), eth against its pure family (TypeSplit-HPP, Fig. 11d),
// memory with and without operator-level recompute (Fig. 12a), the 13B plans in Table 3's
// layout, and eth on Metis's own inputs beside Metis's recorded figures (bench/data/). Also
// clusters that are not Table 2's symmetric shapes (`uneven`), and the Llama presets
// (`llama`). Everything is predicted (analytic
// or Metis profiles) except the search times, which are measured on this machine.
// Usage: plan_bench [SECTION ...|all] [--quick] [--format text|json] [--data DIR]
// (sections: scenarios uneven ablation alpha scale metis pure memory table3 llama sharding).
// --quick: a few small cases per section (the evaluation's field test). Asserts nothing.
// Each section is a file of its own (bench/plan_bench_<section>.cpp, shared pieces in
// plan_bench.h); this file picks the sections and prints or dumps their rows.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_json.h"
#include "bench_util.h"
#include "core/error.h"
#include "plan_bench.h"
#include "plan_bench_sharding.h"

using namespace eth;
using namespace eth::bench;

int main(int argc, char** argv) {
  Options opt;
  opt.data = ETH_BENCH_DATA_DIR;
  bool json = false;
  std::vector<std::string> wanted;
  const std::string usage =
      "usage: plan_bench [scenarios|uneven|ablation|alpha|scale|metis|pure|memory|table3|llama|"
      "sharding|all ...]"
      " [--quick] [--format text|json] [--data DIR]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) {
      opt.data = argv[++i];
    } else if (a == "--format" && i + 1 < argc) {
      const std::string f = argv[++i];
      if (f != "json" && f != "text") {
        std::fprintf(stderr, "%s", usage.c_str());
        return 1;
      }
      json = f == "json";
    } else if (a == "--quick") {
      opt.quick = true;
    } else {
      wanted.push_back(a);
    }
  }
  if (wanted.empty()) wanted.push_back("all");
  struct Section {
    const char* name;
    std::function<Json(const Options&)> run;
    std::function<void(const Json&)> print;
  };
  const std::vector<Section> sections = {
      {"scenarios", run_scenarios, print_scenarios}, {"uneven", run_uneven, print_uneven},
      {"ablation", run_ablation, print_ablation},    {"alpha", run_alpha, print_alpha},
      {"scale", run_scale, print_scale},             {"metis", run_metis, print_metis},
      {"pure", run_pure, print_pure},                {"memory", run_memory, print_memory},
      {"table3", run_table3, print_table3},          {"llama", run_llama, print_llama},
      {"sharding", [](const Options& o) { return bench::run_sharding(o.quick); },
       bench::print_sharding}};
  for (const auto& w : wanted) {
    bool known = w == "all";
    for (const auto& s : sections) known = known || w == s.name;
    if (!known) {
      std::fprintf(stderr, "%s", usage.c_str());
      return 1;
    }
  }
  Json doc{{"bench", "plan_bench"}, {"quick", opt.quick}, {"machine", bench::machine_info()}};
  if (!json) std::printf("%s\n\n", bench::machine_line(doc["machine"]).c_str());
  try {
    for (const auto& s : sections) {
      bool run = false;
      for (const auto& w : wanted) run = run || w == "all" || w == s.name;
      if (!run) continue;
      doc[s.name] = s.run(opt);
      if (!json) {
        s.print(doc[s.name]);
        std::fflush(stdout);
      }
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "plan_bench: %s\n", e.what());
    return 2;
  }
  doc["machine_after"] = bench::machine_info();
  if (json) std::printf("%s\n", doc.dump(1).c_str());
  return 0;
}
