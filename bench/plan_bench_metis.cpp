// plan_bench's "metis" section: eth and layer on Metis's own inputs (bench/data/metis-inputs)
// beside Metis's recorded figures (bench/data/metis-recorded.json).
#include "plan_bench.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "profile/metis_format.h"

namespace eth::bench {

namespace fs = std::filesystem;

Json run_metis(const Options& opt) {
  Json recorded;
  {
    const fs::path f = opt.data / "metis-recorded.json";
    std::ifstream in(f);
    if (!in) throw InputError("plan_bench", f.string(), "", "cannot open (see --data)");
    recorded = Json::parse(in);
  }
  Json rows = Json::array();
  for (const Json& m : recorded["runs"]) {
    if (opt.quick && !rows.empty()) break;
    const fs::path dir = opt.data / "metis-inputs" / m["inputs"].get<std::string>();
    const ModelSpec model = model_preset(m["model"].get<std::string>());
    const ClusterSpec c = read_metis_cluster(dir / "hostfile", dir / "clusterfile.json");
    const ProfileDb db = read_metis_profile_dir(dir / "profile", model, &c);
    const std::int64_t gbs = m["gbs"];
    rows.push_back(Json{
        {"inputs", m["inputs"]},
        {"model", m["model"]},
        {"cluster", m["cluster"]},
        {"devices", c.num_devices()},
        {"gbs", gbs},
        {"methods",
         Json{{"eth", method_json(timed_plan(PlanMethod::Eth, model, c, db, gbs, model.seq_len,
                                             {}))},
              {"layer", method_json(timed_plan(PlanMethod::Layer, model, c, db, gbs,
                                               model.seq_len, {}))}}},
        {"metis_search_s", m["search_s"]},
        {"metis_search_over_s", m["search_over_s"]},
        {"metis_candidates", m["candidates"]},
        {"metis_best_ms", m["best_ms"]},
        {"metis_source", recorded["source"]}});
  }
  return rows;
}

void print_metis(const Json& rows) {
  std::printf("== Metis's inputs (bench/data/metis-inputs): eth beside Metis's recorded figures\n");
  std::printf(
      "(Metis figures from bench/data/metis-recorded.json: its own cost estimate, and some of its "
      "picks do not fit one device's memory; eth's are the predictor's, every device fits; "
      "Metis search '-': stopped at its limit)\n");
  bench::print_rows(rows, {{"inputs", "inputs"},
                           {"gbs", "gbs"},
                           {"search s", "methods.eth.search_wall_s"},
                           {"cpu s", "methods.eth.search_cpu_s"},
                           {"cands", "methods.eth.candidates"},
                           {"metis s", "metis_search_s", "%.1f"},
                           {"eth ms", "methods.eth.iteration_ms", "%.1f"},
                           {"metis ms", "metis_best_ms", "%.1f"},
                           {"layer ms", "methods.layer.iteration_ms", "%.1f"},
                           {"ideal ms", "methods.eth.ideal_ms", "%.1f"}});
  std::printf("\n");
}

}  // namespace eth::bench
