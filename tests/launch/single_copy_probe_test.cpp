// The cross-memory-attach probe (launch/single_copy_probe.h) cleans up after itself whatever it
// answers: no file descriptor and no child process outlive a call, and the answer does not
// change from call to call (eth launch asks once per launch).
#include "launch/single_copy_probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>

namespace eth::single_copy_probe_test {
namespace {

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

TEST(SingleCopyProbe, LeavesNoDescriptorOrChildAndAnswersAlike) {
  const std::size_t before = open_descriptors();
  const bool first = single_copy_available();
  EXPECT_EQ(single_copy_available(), first);
  EXPECT_EQ(open_descriptors(), before);
  // Every child was reaped: there is none left to wait for.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace eth::single_copy_probe_test
