// The probes' int3s taken out of one process (inject/breakpoints.h): where
// each site lies in a process's mappings, and the byte written back in a
// real child's private copy of a file, as the kernel's uprobes leave it.
#include "inject/breakpoints.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "host/process_memory.h"

namespace allocscope::inject {
namespace {

Mapping code(uint64_t start, uint64_t end, uint64_t offset, uint64_t inode) {
  Mapping m;
  m.start = start;
  m.end = end;
  m.offset = offset;
  m.dev_major = 8;
  m.dev_minor = 1;
  m.inode = inode;
  m.readable = m.executable = true;
  m.path = "/lib/libc.so.6";
  return m;
}

TEST(Breakpoints, SitesLieInTheExecutableMappingsOfTheirFile) {
  std::vector<Mapping> maps = {code(0x1000, 0x3000, 0x0, 7), code(0x7000, 0x9000, 0x4000, 7),
                               code(0x20000, 0x21000, 0x0, 9)};
  maps[2].dev_minor = 2;  // the same inode on another device: another file
  ProbedFile f{8, 1, 7, {{0x10, 0xf3}, {0x4100, 0x55}, {0x3500, 0x41}}};
  auto sites = site_addresses(maps, std::span(&f, 1));
  ASSERT_EQ(sites.size(), 2u);  // 0x3500 lies in no mapping of it
  EXPECT_EQ(sites[0], std::make_pair(uint64_t(0x1010), uint8_t(0xf3)));
  EXPECT_EQ(sites[1], std::make_pair(uint64_t(0x7100), uint8_t(0x55)));
  maps[1].executable = false;
  EXPECT_EQ(site_addresses(maps, std::span(&f, 1)).size(), 1u);
}

// A child maps a file private and executable, as a program maps its C
// library; an int3 is put at one site of its copy and a second site is left
// as it was. Only the int3 is written back, and the file is untouched.
TEST(Breakpoints, TheReplacedByteIsWrittenBackInTheProcessCopyOnly) {
  char path[] = "/tmp/allocscope-breakpoints-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string bytes(4096, '\x90');
  bytes[100] = '\x55';
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {
    void* at = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    if (at == MAP_FAILED) _exit(1);
    uint64_t addr = uint64_t(at);
    if (write(ready[1], &addr, sizeof addr) != sizeof addr) _exit(1);
    pause();
    _exit(0);
  }
  uint64_t base = 0;
  ASSERT_EQ(read(ready[0], &base, sizeof base), ssize_t(sizeof base));
  struct stat st {};
  ASSERT_EQ(fstat(fd, &st), 0);
  // The kernel's uprobe writes its int3 into the process's copy as this does.
  std::string mem = "/proc/" + std::to_string(child) + "/mem";
  {
    std::fstream out(mem, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(std::streamoff(base + 100));
    out.put('\xcc');
  }
  ProbedFile f{major(st.st_dev), minor(st.st_dev), st.st_ino, {{100, 0x55}, {200, 0x90}}};
  auto lifted = lift_breakpoints(child, std::span(&f, 1));
  ASSERT_TRUE(lifted) << lifted.error().message;
  EXPECT_EQ(*lifted, 1u);
  uint8_t now[2] = {};
  EXPECT_TRUE(read_process_memory(child, base + 100, std::span(now, 1)));
  EXPECT_TRUE(read_process_memory(child, base + 200, std::span(now + 1, 1)));
  EXPECT_EQ(now[0], 0x55);
  EXPECT_EQ(now[1], 0x90);
  EXPECT_EQ(*lift_breakpoints(child, std::span(&f, 1)), 0u) << "nothing left to write back";
  // A file the kernel names otherwise than /proc/PID/maps (an overlay's):
  // found through the kernel's name for the same mapping.
  {
    std::fstream out(mem, std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(std::streamoff(base + 100));
    out.put('\xcc');
  }
  ProbedFile below{0, 99, st.st_ino + 1, {{100, 0x55}}};
  EXPECT_EQ(*lift_breakpoints(child, std::span(&below, 1)), 0u) << "not a file /proc/PID/maps names";
  Mapping named = code(base, base + 4096, 0, st.st_ino + 1);
  named.dev_major = 0;
  named.dev_minor = 99;
  EXPECT_EQ(*lift_breakpoints(child, std::span(&below, 1), std::span(&named, 1)), 1u);
  uint8_t in_file = 0;
  EXPECT_EQ(pread(fd, &in_file, 1, 100), 1);
  EXPECT_EQ(in_file, 0x55);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(fd);
  unlink(path);
  close(ready[0]);
  close(ready[1]);
}

TEST(Breakpoints, AProcessGoneIsAnError) {
  ProbedFile f{8, 1, 7, {{0x10, 0xf3}}};
  EXPECT_FALSE(lift_breakpoints(999999999, std::span(&f, 1)));
}

}  // namespace
}  // namespace allocscope::inject
