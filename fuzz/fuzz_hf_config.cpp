// Hugging Face config.json (hf/gpt2_config.h, hf/llama_config.h): the input is the file, read by
// the reader its model_type picks as `eth convert` does (anything not "llama" by GPT-2's, which
// refuses it); an accepted config is also written back for export and read again, which must
// accept it and give the same model.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "fuzz_util.h"
#include "hf/gpt2_config.h"
#include "hf/llama_config.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const Json j = parse_json_text(std::string(bytes(data, size)), "config.json", "hf");
    if (j.is_object() && j.contains("model_type") && j["model_type"] == "llama") {
      const hf::LlamaConfig g = hf::parse_llama_config(j, "config.json");
      if (hf::parse_llama_config(hf::llama_config_json(g.model, "float32", g.raw), "export")
              .model != g.model ||
          hf::parse_llama_config(hf::llama_config_json(g.model, "bfloat16", Json()), "fresh")
                  .model != g.model) {
        std::abort();
      }
      return;
    }
    const hf::Gpt2Config g = hf::parse_gpt2_config(j, "config.json");
    const Json out = hf::gpt2_config_json(g.model, g.tied, "float32", g.raw);
    if (hf::parse_gpt2_config(out, "export").model != g.model) std::abort();
  });
  return 0;
}
