// Model files (model/model_spec.h), then the parameter count every loaded model must allow.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/arithmetic.h"
#include "model/model_spec.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "fuzz.json", "model");
    const ModelSpec m = parse_model(JsonCursor(j, JsonOrigin{"model", "fuzz.json", ""}));
    (void)total_params(m);
    (void)model_to_json(m).dump();
  });
  return 0;
}
