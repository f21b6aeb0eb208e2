// `eth convert`'s two directions for every family ETH converts: the family of a Hugging Face
// folder is config.json's model_type ("gpt2": hf/gpt2_convert.h, "llama": hf/llama_convert.h;
// any other refused by name), that of a checkpoint its model description.
#pragma once

#include <filesystem>
#include <string>

#include "hf/gpt2_convert.h"

namespace eth::hf {

ConvertReport convert_any_from_hf(const std::filesystem::path& dir,
                                  const std::filesystem::path& out, bool overwrite);
ConvertReport convert_any_to_hf(const std::filesystem::path& checkpoint,
                                const std::filesystem::path& dir, const std::string& dtype,
                                bool overwrite);

}  // namespace eth::hf
