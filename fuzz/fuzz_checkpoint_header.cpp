// Checkpoint files (train/checkpoint.h): the input is the whole file; the header (length,
// JSON, metadata, tensor table) is read and checked against the file's length.
#include <cstddef>
#include <cstdint>
#include <string>

#include "train/checkpoint.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const std::string path = temp_file("step_00000001.safetensors", bytes(data, size));
    (void)read_checkpoint_meta(path);
  });
  return 0;
}
