// Plan files (plan/plan.h): parse, write back, and validate against the plan's own cluster or
// cpu-2; validation must never read out of range whatever the plan holds.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "plan/plan.h"
#include "plan/validate.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "plan");
    const Plan p = parse_plan(JsonCursor(j, JsonOrigin{"plan", "fuzz.json", ""}));
    (void)plan_to_json(p).dump();
    static const ClusterSpec cpu2 = load_cluster("cpu-2");
    (void)validate_plan(p, p.cluster ? *p.cluster : cpu2);
  });
  return 0;
}
