// One file of an ETH profile directory (profile/profile_io.h), for the tiny model.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_spec.h"
#include "profile/profile_io.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "profile");
    static const ModelSpec tiny = model_preset("tiny");
    const ProfileEntry e =
        parse_profile_entry(JsonCursor(j, JsonOrigin{"profile", "fuzz.json", ""}), tiny);
    (void)profile_entry_to_json(tiny, e).dump();
  });
  return 0;
}
