// What this machine can give a command (cli/resources.h): the memory figure lies between nothing
// and the physical memory (sysconf, read here), the cores between one and the online CPUs, and
// a need past what is available is refused naming the flag, the need and the advice.
#include "cli/resources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "test_util.h"

namespace eth::resources_test {
namespace {

TEST(Resources, FiguresAreWithinWhatTheMachineHas) {
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const double available = cli::available_memory_bytes();
  EXPECT_GT(available, 0.0);
  EXPECT_LE(available, physical);
  const int cores = cli::available_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, ::sysconf(_SC_NPROCESSORS_CONF));
}

TEST(Resources, ANeedPastWhatIsAvailableNamesTheFlag) {
  EXPECT_EQ(test::error_of([] { cli::check_memory(1.0, "w", "--batch", "a"); }), "(no error)");
  const std::string e = test::error_of(
      [] { cli::check_memory(4e18, "the arena", "--batch", "use a smaller --batch"); });
  EXPECT_NE(e.find("--batch"), std::string::npos) << e;
  EXPECT_NE(e.find("needs 4000000.0 TB (the arena)"), std::string::npos) << e;
  EXPECT_NE(e.find("use a smaller --batch"), std::string::npos) << e;
}

}  // namespace
}  // namespace eth::resources_test
