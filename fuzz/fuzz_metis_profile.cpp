// One Metis profile file (profile/metis_format.h): DeviceType.A100_tp1_bs1.json for the tiny
// model (6 layers in Metis's count).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/cluster_spec.h"
#include "model/model_spec.h"
#include "profile/metis_format.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "profile");
    static const ModelSpec tiny = model_preset("tiny");
    static const DeviceType a100 = *find_device_type_preset("A100");
    (void)parse_metis_profile(JsonCursor(j, JsonOrigin{"profile", "fuzz.json", ""}), tiny, a100,
                              ProfileKey{"A100", 1, 1});
  });
  return 0;
}
