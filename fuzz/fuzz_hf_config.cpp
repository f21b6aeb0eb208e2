// Hugging Face GPT-2 config.json (hf/gpt2_config.h): the input is the file; an accepted config
// is also written back for export and read again, which must accept it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/json_file.h"
#include "fuzz_util.h"
#include "hf/gpt2_config.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "config.json", "hf");
    const hf::Gpt2Config g = hf::parse_gpt2_config(j, "config.json");
    const Json out = hf::gpt2_config_json(g.model, g.tied, "float32", g.raw);
    if (hf::parse_gpt2_config(out, "export").model != g.model) std::abort();
  });
  return 0;
}
