// plan_bench's shared pieces (plan_bench.h).
#include "plan_bench.h"

#include <algorithm>

#include "bench_util.h"
#include "core/error.h"
#include "profile/analytic.h"

namespace eth::bench {

namespace {

// A device's busy time in the iteration: forward + backward of all its micro-batches.
double stage_busy_ms(const PipelinePrediction& p, const StagePrediction& st) {
  const auto k = static_cast<double>(p.num_microbatches);
  return (k - 1) * (st.forward_ms + st.backward_ms) + st.last_forward_ms + st.last_backward_ms;
}

}  // namespace

Timed timed_plan(PlanMethod m, const ModelSpec& model, const ClusterSpec& c, const ProfileDb& db,
                 std::int64_t gbs, std::int64_t seq, const PlannerOptions& o) {
  Timed t;
  const Stopwatch watch;
  try {
    t.result = plan_training(m, model, c, db, gbs, seq, o);
  } catch (const InputError& e) {
    t.error = e.what();
  }
  t.cpu_s = watch.cpu_s();
  t.wall_s = watch.wall_s();
  return t;
}

ProfileDb analytic_for(const ModelSpec& m, const ClusterSpec& c, std::int64_t seq) {
  std::vector<std::int64_t> tps;
  for (std::int64_t t : {1, 2, 4, 8}) {
    if (m.heads % t == 0 && m.ffn % t == 0) tps.push_back(t);
  }
  return analytic_profile_db(m, c, tps, {1, 2, 4, 8, 16}, seq);
}

Json method_json(const Timed& t) {
  Json j{{"fits", t.result.has_value()}, {"error", t.error},
         {"iteration_ms", nullptr},      {"pipeline_ms", nullptr},
         {"busy_ms", nullptr},           {"sync_exposed_ms", nullptr},
         {"optimizer_ms", nullptr},      {"ideal_ms", nullptr},
         {"latency_ratio", nullptr},     {"pipelines", nullptr},
         {"family", nullptr},            {"idle_devices", nullptr},
         {"search_wall_s", t.wall_s},    {"search_cpu_s", t.cpu_s},
         {"candidates", nullptr},        {"evaluated", nullptr}};
  if (!t.result) return j;
  const PlannerResult& r = *t.result;
  const Prediction& pr = r.prediction;
  double busy = 0, lo = 1e300, hi = 0, devices = 0;
  for (const auto& p : pr.pipelines) {
    for (const auto& st : p.stages) {
      const double b = stage_busy_ms(p, st);
      const auto n = static_cast<double>(st.tp * st.dp);
      busy += b * n;
      devices += n;
      lo = std::min(lo, b);
      hi = std::max(hi, b);
    }
  }
  j["iteration_ms"] = pr.iteration_ms;
  j["pipeline_ms"] = pr.pipeline_ms;
  j["busy_ms"] = busy / devices;
  j["sync_exposed_ms"] = pr.sync.exposed_ms;
  j["optimizer_ms"] = pr.optimizer_ms;
  j["ideal_ms"] = pr.ideal_iteration_ms;
  j["latency_ratio"] = hi / lo;
  j["pipelines"] = r.plan.pipelines.size();
  j["family"] = r.family;
  j["idle_devices"] = r.idle_devices;
  j["candidates"] = r.stats.generated;
  j["evaluated"] = r.stats.evaluated;
  return j;
}

double ms(const Timed& t) { return t.result ? t.result->prediction.iteration_ms : 0.0; }

std::vector<Scenario> paper_scenarios(const Options& o, const std::vector<std::string>& families) {
  std::vector<Scenario> out;
  std::vector<std::string> tags = {"350m", "1.3b", "2.6b", "6.7b", "13b", "70b"};
  if (o.quick) tags = {"350m"};
  for (const auto& family : families) {
    for (const auto& t : tags) {
      out.push_back({"gpt3-" + t, t + "-" + family, family, t == "13b" || t == "70b" ? 1024 : 512});
    }
  }
  return out;
}

}  // namespace eth::bench
