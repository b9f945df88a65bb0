// Reading files that other users may have put in place (perf maps in /tmp)
// and files a user names (report's input).
#include "host/files.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "temp_dir.h"

namespace allocscope {
namespace {

namespace fs = std::filesystem;

TEST(ReadFileOwnedBy, ReadsARegularFileOfItsOwner) {
  TempDir dir;
  fs::path map = dir.path / "perf-1.map";
  std::ofstream(map) << "1000 10 jitted\n";
  auto f = read_file_owned_by(map, geteuid(), 1 << 20);
  ASSERT_TRUE(f) << f.error();
  EXPECT_EQ(f->text, "1000 10 jitted\n");
  EXPECT_EQ(f->size, 15);
}

// A symlink to a file only root may read would put its lines into frame names.
TEST(ReadFileOwnedBy, RefusesSymlinksFifosOthersFilesAndHugeOnes) {
  TempDir dir;
  fs::path secret = dir.path / "secret", link = dir.path / "perf-2.map", fifo = dir.path / "perf-3.map",
           big = dir.path / "perf-4.map", other = dir.path / "perf-5.map";
  std::ofstream(secret) << "1000 10 secret\n";
  fs::create_symlink(secret, link);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(big) << std::string(4096, 'x');
  auto l = read_file_owned_by(link, geteuid(), 1 << 20);
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, ELOOP);
  auto f = read_file_owned_by(fifo, geteuid(), 1 << 20);  // at once: no writer is waited for
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, EINVAL);
  auto b = read_file_owned_by(big, geteuid(), 1024);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, EFBIG);
  if (geteuid() == 0) {  // CI runs as root: a map that another user wrote for someone else's process
    std::ofstream(other) << "1000 10 planted\n";
    ASSERT_EQ(chown(other.c_str(), 12345, 12345), 0);
    auto o = read_file_owned_by(other, 23456, 1 << 20);
    ASSERT_FALSE(o);
    EXPECT_EQ(o.error().code, EPERM);
    EXPECT_TRUE(read_file_owned_by(other, 12345, 1 << 20)) << "the process's own user";
  }
}

// A process in another root (a container, a chroot) writes its perf map
// under its own /tmp: read there, and a link on the way (its /tmp made a
// link to a path of the host's) resolves inside that root, never out of it.
TEST(ReadFileOwnedBy, InAProcessesRootLinksStayInsideIt) {
  TempDir dir;
  fs::path root = dir.path / "root", victim = dir.path / "victim";
  fs::create_directories(root / "tmp");
  fs::create_directories(victim);
  std::ofstream(root / "tmp" / "perf-7.map") << "1000 10 in_the_root\n";
  std::ofstream(victim / "perf-7.map") << "1000 10 the_hosts_file\n";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {  // chroot needs root, or a user namespace of its own
    if (geteuid() != 0 && unshare(CLONE_NEWUSER) != 0) _exit(2);
    if (chroot(root.c_str()) != 0 || chdir("/") != 0) _exit(3);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  bool chrooted = read(ready[0], &c, 1) == 1;
  close(ready[0]);
  auto finish = [child] {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  };
  if (!chrooted) {
    finish();
    GTEST_SKIP() << "no chroot here: neither root nor user namespaces";
  }
  auto inside = read_file_owned_by("/tmp/perf-7.map", geteuid(), 1 << 20, child);
  EXPECT_TRUE(inside && inside->text == "1000 10 in_the_root\n")
      << (inside ? inside->text : inside.error().message);
  fs::remove_all(root / "tmp");
  fs::create_directory_symlink(victim, root / "tmp");  // absolute: the host's path
  auto out = read_file_owned_by("/tmp/perf-7.map", geteuid(), 1 << 20, child);
  EXPECT_FALSE(out) << "read the host's file through the root's link: " << out->text;
  finish();
}

TEST(ReadFileOwnedBy, AFileOfTheSizeSeenBeforeIsNotReadAgain) {
  TempDir dir;
  fs::path map = dir.path / "perf-9.map";
  std::ofstream(map) << "1000 10 jitted\n";
  auto again = read_file_owned_by(map, geteuid(), 1 << 20, 0, 15);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, EALREADY);
  EXPECT_TRUE(read_file_owned_by(map, geteuid(), 1 << 20, 0, 14)) << "grown: read";
}

TEST(ReadRegularFile, RefusesFifosAndDevicesAtOnce) {
  TempDir dir;
  fs::path fifo = dir.path / "in.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_regular_file(fifo, 1 << 20).error().code, EINVAL);
  EXPECT_EQ(read_regular_file("/dev/zero", 1 << 20).error().code, EINVAL);
}

// A binary a process maps: a FIFO or a directory put in its place is refused
// at once; through a path that is not the kernel's, a symlink or another file
// than the one mapped is refused too.
TEST(OpenBinary, OnlyTheRegularFileThatWasMapped) {
  TempDir dir;
  fs::path lib = dir.path / "libx.so", other = dir.path / "liby.so", link = dir.path / "libz.so",
           fifo = dir.path / "libf.so";
  std::ofstream(lib) << "\x7f"
                        "ELF";
  std::ofstream(other) << "\x7f"
                          "ELF";
  fs::create_symlink(lib, link);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct stat st;
  ASSERT_EQ(stat(lib.c_str(), &st), 0);
  FileIdentity mapped{major(st.st_dev), minor(st.st_dev), st.st_ino};
  EXPECT_TRUE(open_binary(lib));
  EXPECT_TRUE(open_binary(lib, &mapped));
  EXPECT_TRUE(open_binary(link)) << "a kernel path (map_files) is a link to follow";
  EXPECT_EQ(open_binary(link, &mapped).error().code, ELOOP);
  EXPECT_EQ(open_binary(other, &mapped).error().code, ESTALE);
  EXPECT_EQ(open_binary(fifo).error().code, EINVAL);  // at once: no writer is waited for
  EXPECT_EQ(open_binary(dir.path).error().code, EINVAL);
  EXPECT_EQ(open_binary("/dev/zero").error().code, EINVAL);
}

}  // namespace
}  // namespace allocscope
