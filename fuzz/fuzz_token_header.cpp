// Token files (data/token_file.h): the input is the whole file (header and tokens).
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/token_file.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const std::string path = temp_file("tokens.bin", bytes(data, size));
    const TokenFile f = TokenFile::open(path);
    std::uint64_t sum = f.max_token();
    for (const std::uint32_t t : f.tokens()) sum += t;  // every token is inside the mapping
    (void)sum;
  });
  return 0;
}
