// collective_probe: what Open MPI holds per gradient-collective piece in flight, the figure the
// predictor's collective buffers (PredictOptions::collective_window_bytes, docs/training.md,
// "Memory") rest on. Each rank of an mpirun job started as `eth launch` starts its ranks (same
// flags and environment, launch/mpirun.h) posts one Communicator::iallreduce_sum over a 32 MiB
// buffer, which the communicator cuts into 512 KiB pieces posted at once, as GradSync does; it
// reads the heap in use (glibc mallinfo2) before and right after posting, and its resident set
// before and after completion. Runs 2 and 4 ranks; prints the heap per posted piece over the
// piece size and the resident growth. Not a timing: the load does not matter.
//
// Usage: collective_probe [--pieces N]. One command; prints the CPU and the load.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "comm/communicator.h"
#include "comm/mpi/mpi_comm.h"
#include "launch/mpirun.h"
#include "core/json_cursor.h"
#include "train/measure_profile.h"

namespace {

using namespace eth;

double heap_in_use() {
  const struct mallinfo2 m = ::mallinfo2();
  return static_cast<double>(m.uordblks) + static_cast<double>(m.hblkhd);
}

// One rank: prints (rank 0) a JSON line of every rank's figures.
int worker(int pieces) {
  MpiSession mpi;
  Communicator world = mpi.world();
  const std::size_t piece = world.options().chunk_bytes;
  std::vector<float> grads(piece / sizeof(float) * static_cast<std::size_t>(pieces), 1.0f);
  world.barrier();
  const double heap0 = heap_in_use(), rss0 = process_resident_bytes();
  Request r = world.iallreduce_sum(std::span<float>(grads));
  const double heap1 = heap_in_use();
  r.wait();
  const double rss1 = process_resident_bytes();
  const std::vector<double> mine{(heap1 - heap0) / static_cast<double>(pieces),
                                 rss1 - rss0};
  const std::vector<double> all = world.gather(std::span<const double>(mine));
  if (world.rank() == 0) {
    Json ranks = Json::array();
    for (std::size_t i = 0; i + 1 < all.size(); i += 2) {
      ranks.push_back(Json{{"heap_per_piece_bytes", all[i]}, {"rss_growth_bytes", all[i + 1]}});
    }
    std::printf("%s\n", Json{{"piece_bytes", piece}, {"pieces", pieces}, {"ranks", ranks}}
                            .dump()
                            .c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int pieces = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--worker" && i + 1 < argc) return worker(std::atoi(argv[i + 1]));
    if (a == "--pieces" && i + 1 < argc) {
      pieces = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: collective_probe [--pieces N]\n");
      return 1;
    }
  }
  std::printf("Open MPI's temporaries per posted all-reduce piece (one iallreduce_sum of %d "
              "pieces, in place, as eth launch runs ranks)\n%s\n",
              pieces, bench::machine_line(bench::machine_info()).c_str());
  std::printf("%5s %4s %10s %22s %20s\n", "ranks", "rank", "piece KiB", "heap per piece/piece",
              "RSS growth MB");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int n : {2, 4}) {
    MpirunOptions o;
    o.num_ranks = n;
    o.as_root = running_as_root();
    std::string cmd;
    for (const auto& a : mpirun_argv(o, {self, "--worker", std::to_string(pieces)})) {
      cmd += (cmd.empty() ? "" : " ") + a;
    }
    std::string out;
    const auto at = bench::run_capture(cmd, &out) == 0 ? out.find('{') : std::string::npos;
    if (at == std::string::npos) {
      std::printf("%5d  (mpirun failed)\n", n);
      continue;
    }
    const Json j = Json::parse(out.substr(at, out.find('\n', at) - at));
    const double piece = j["piece_bytes"].get<double>();
    int rank = 0;
    for (const Json& r : j["ranks"]) {
      std::printf("%5d %4d %10.0f %22.4f %20.1f\n", n, rank++, piece / 1024,
                  r["heap_per_piece_bytes"].get<double>() / piece,
                  r["rss_growth_bytes"].get<double>() / 1e6);
    }
  }
  return 0;
}
