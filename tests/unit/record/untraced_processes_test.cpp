#include "record/events/untraced_processes.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

namespace allocscope {
namespace {

std::string exe_of(pid_t pid) {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

// A process first seen running a program that maps the library (here: a
// copy of this test, its "library" this test's own file) then execs one that
// does not (as `env -i PROGRAM` does): the program it runs now is judged
// apart, and named untraced after its two looks.
TEST(UntracedProcesses, AProgramExecedWithoutTheLibraryIsJudgedAfresh) {
  std::string self = exe_of(getpid());
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t child = fork();
  if (child == 0) {
    char byte;
    close(go[1]);
    if (read(go[0], &byte, 1) == 1) execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(1);
  }
  close(go[0]);
  UntracedProcesses u;
  u.look(getpid(), self, 1000);
  u.look(getpid(), self, 2000);
  EXPECT_EQ(u.count(), 0u) << "a copy of this program maps it";
  ASSERT_EQ(write(go[1], "x", 1), 1);
  for (int i = 0; i < 500 && exe_of(child) == self; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  u.look(getpid(), self, 3000);
  u.look(getpid(), self, 3100);  // the second look, 100 ms on
  EXPECT_EQ(u.count(), 1u);
  EXPECT_NE(u.summary().find("not recorded: sleep"), std::string::npos) << u.summary();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(go[1]);
}

}  // namespace
}  // namespace allocscope
