// The "device_types" object of a cluster file: the input is that object, placed in a cluster
// whose one node uses its first type.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json types = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "cluster");
    Json doc = Json::object();
    std::string first = "A100";
    if (types.is_object() && !types.empty()) first = types.begin().key();
    doc["nodes"] = Json::array({Json{{"device_type", first}, {"devices", 2}}});
    doc["device_types"] = types;
    const ClusterSpec c = parse_cluster(JsonCursor(doc, JsonOrigin{"cluster", "fuzz.json", ""}));
    (void)ClusterIndex(c).link_bytes_per_s(0, 1);
  });
  return 0;
}
