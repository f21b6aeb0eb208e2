// Hostfiles: Metis's hostfile and clusterfile (profile/metis_format.h, read_metis_cluster; the
// input is the hostfile, a NUL byte, then the clusterfile, no NUL: an empty clusterfile), and
// the same hostfile text as eth launch --hostfile reads it (launch/mpirun.h, parse_hostfile).
#include <cstddef>
#include <cstdint>
#include <string>

#include "launch/mpirun.h"
#include "profile/metis_format.h"
#include "fuzz_util.h"

using namespace eth;
using namespace eth::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  expect_input_errors_only([&] {
    const std::string_view in = bytes(data, size);
    const auto cut = in.find('\0');
    const std::string host = temp_file("hostfile", in.substr(0, cut));
    const std::string cluster =
        temp_file("clusterfile.json", cut == std::string_view::npos ? "" : in.substr(cut + 1));
    expect_input_errors_only([&] { (void)parse_hostfile(std::string(in.substr(0, cut)), host); });
    (void)read_metis_cluster(host, cluster, {{"V100", 125.0}});
  });
  return 0;
}
