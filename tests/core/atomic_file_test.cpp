// AtomicFile and AppendFile: targets that are not regular files are refused and left as they
// were (a FIFO, /dev/full: replacing /dev/full with a regular file is why these checks exist), a
// missing folder is an error and is not created, a write error (a full disk, simulated by a file
// size limit) is an InputError naming the file, and the old file survives it whole.
#include "core/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "core/error.h"
#include "test_util.h"

namespace eth {
namespace {

namespace fs = std::filesystem;
using test::error_of;

int files_in(const fs::path& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::scratch("atomic_file",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(AtomicFileTest, ReplacesWholeAndLeavesNoTemporary) {
  write_file_atomic(dir_ / "out.json", "{\"x\": 1}\n");
  write_file_atomic(dir_ / "out.json", "{\"x\": 2}\n");
  EXPECT_EQ(test::slurp(dir_ / "out.json"), "{\"x\": 2}\n");
  EXPECT_EQ(files_in(dir_), 1);
}

TEST_F(AtomicFileTest, UncommittedWriteLeavesTheOldFile) {
  write_file_atomic(dir_ / "out.txt", "old");
  {
    AtomicFile f(dir_ / "out.txt", "test");
    f.write("new, never committed");
  }
  EXPECT_EQ(test::slurp(dir_ / "out.txt"), "old");
  EXPECT_EQ(files_in(dir_), 1);
}

TEST_F(AtomicFileTest, MissingFolderIsAnErrorAndNotCreated) {
  const fs::path target = dir_ / "no" / "such" / "out.json";
  EXPECT_EQ(error_of([&] { write_file_atomic(target, "x", "plan"); }),
            "[plan] " + target.string() + ": cannot write: the folder " +
                (dir_ / "no" / "such").string() + " does not exist");
  EXPECT_FALSE(fs::exists(dir_ / "no"));
}

TEST_F(AtomicFileTest, RefusesFifoAndFolderTargets) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { write_file_atomic(fifo, "x"); }),
            "[io] " + fifo.string() +
                ": exists and is a FIFO, not a regular file; refusing to replace it");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(error_of([&] { write_file_atomic(dir_, "x"); }),
            "[io] " + dir_.string() +
                ": exists and is a folder, not a regular file; refusing to replace it");
  EXPECT_EQ(error_of([&] { AppendFile(fifo, "log"); }),
            "[log] " + fifo.string() +
                ": exists and is a FIFO, not a regular file; refusing to replace it");
  EXPECT_EQ(files_in(dir_), 1);
}

// `eth plan --out /dev/full` once replaced the device with a regular file (as root).
TEST_F(AtomicFileTest, RefusesDeviceTargetsAndLeavesThemDevices) {
  struct stat before {};
  ASSERT_EQ(::stat("/dev/full", &before), 0);
  ASSERT_TRUE(S_ISCHR(before.st_mode));
  EXPECT_EQ(error_of([] { write_file_atomic("/dev/full", "x"); }),
            "[io] /dev/full: exists and is a character device, not a regular file; refusing to "
            "replace it");
  EXPECT_EQ(error_of([] { AppendFile("/dev/full", "log"); }),
            "[log] /dev/full: exists and is a character device, not a regular file; refusing to "
            "replace it");
  struct stat after {};
  ASSERT_EQ(::stat("/dev/full", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(after.st_rdev, before.st_rdev);
}

TEST_F(AtomicFileTest, SymbolicLinkStaysALink) {
  write_file_atomic(dir_ / "real.json", "old");
  fs::create_symlink(dir_ / "real.json", dir_ / "link.json");
  write_file_atomic(dir_ / "link.json", "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.json"));
  EXPECT_EQ(test::slurp(dir_ / "real.json"), "new");
  fs::create_symlink(dir_ / "nowhere", dir_ / "dangling");
  EXPECT_NE(error_of([&] { write_file_atomic(dir_ / "dangling", "x"); }).find("leads nowhere"),
            std::string::npos);
}

// A full disk, simulated by a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) in a child
// process: the write fails with EFBIG, the error names the file, the old file stays whole and
// no temporary is left. The child reports through its exit code.
TEST_F(AtomicFileTest, FullDiskIsAnErrorAndKeepsTheOldFile) {
  const fs::path target = dir_ / "plan.json";
  write_file_atomic(target, "old");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    const std::string msg = error_of([&] { write_file_atomic(target, std::string(5000, 'x')); });
    const bool named = msg.rfind("[io] " + target.string() + ": cannot write: ", 0) == 0 &&
                       msg.find("is the disk full?") != std::string::npos;
    std::string log_msg = error_of([&] {
      AppendFile log(dir_ / "run.log", "log");
      log.write_line(std::string(5000, 'y'));
    });
    const bool log_named = log_msg.rfind("[log] " + (dir_ / "run.log").string() + ": cannot write", 0) == 0;
    ::_exit(named && log_named ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(test::slurp(target), "old");
  int temporaries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    temporaries += e.path().filename().string().find(".tmp-") != std::string::npos;
  }
  EXPECT_EQ(temporaries, 0);
}

TEST_F(AtomicFileTest, OutputFolders) {
  prepare_output_dir(dir_ / "a" / "b", "profile");
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b"));
  write_file_atomic(dir_ / "file", "x");
  EXPECT_EQ(error_of([&] { prepare_output_dir(dir_ / "file", "profile"); }),
            "[profile] " + (dir_ / "file").string() + ": exists and is a regular file, expected a folder");
}

}  // namespace
}  // namespace eth
