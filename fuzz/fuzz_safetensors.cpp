// Hugging Face safetensors files (hf/safetensors.h): the input is the whole file, opened alone
// and as a model folder's model.safetensors; every tensor the checked header admits is then
// read and converted, so offsets that pass the checks must also be safe to read.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "hf/safetensors.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const std::string path = temp_file("model.safetensors", bytes(data, size));
    const hf::SafetensorsFile f(path);
    std::vector<float> buf;
    for (const hf::TensorInfo& t : f.tensors()) {
      buf.resize(static_cast<std::size_t>(t.numel()));
      f.read_f32(t, buf.data());
    }
    const hf::SafetensorsModel m(path.substr(0, path.rfind('/')));
    for (const std::string& n : m.names()) (void)m.find(n);
  });
  return 0;
}
