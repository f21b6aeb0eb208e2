// Cluster files (cluster/cluster_spec.h), then the per-device index and links of what loads.
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
    const Json j = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "cluster");
    const ClusterSpec c = parse_cluster(JsonCursor(j, JsonOrigin{"cluster", "fuzz.json", ""}));
    (void)cluster_to_json(c).dump();
    const ClusterIndex index(c);
    (void)index.link_bytes_per_s(0, index.num_devices() - 1);
  });
  return 0;
}
