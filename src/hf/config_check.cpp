// The family checks of a Hugging Face config.json. See config_check.h.
#include "hf/config_check.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace eth::hf {

void check_hf_family(const JsonCursor& c, const std::string& model_type,
                     const std::string& architecture, const std::string& type_hint) {
  if (c.find("quantization_config")) {
    c.at("quantization_config")
        .fail_detail("a quantized model: ETH converts unquantized F32, BF16 or F16 weights");
  }
  const JsonCursor mt = c.at("model_type");
  if (mt.as_string() != model_type) {
    mt.fail_detail("unsupported model_type \"" + message_text(mt.as_string(), 64) + "\": " +
                   type_hint);
  }
  if (auto arch = c.find("architectures"); arch && !arch->value().is_null()) {
    if (!arch->is_array() || arch->size() != 1) arch->fail("[\"" + architecture + "\"]");
    const std::string a = (*arch)[0].as_string();
    if (a != architecture) {
      (*arch)[0].fail_detail("unsupported architecture \"" + message_text(a, 64) +
                             "\": ETH converts " + architecture);
    }
  }
}

}  // namespace eth::hf
