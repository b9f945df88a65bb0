// Bad input gets one clear line on stderr, a non-zero exit and no output file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "harness.h"

namespace allocscope::test {
namespace {

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Runs allocscope record with `args`; expects failure mentioning `message`.
void expect_failure(std::vector<std::string> args, const std::string& message, int status = 1) {
  std::string out = temp_path("error.folded");
  std::vector<std::string> argv = {ALLOCSCOPE_BIN, "record", "-o", out};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = run(argv, 60000);
  EXPECT_EQ(r.status, status) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "stderr: " << r.err;
  EXPECT_FALSE(exists(out)) << "output written despite the error";
  std::remove(out.c_str());
}

TEST(Errors, BadOptionValues) {
  expect_failure({"--rate", "0", "-p", "1"}, "rate", 2);
  expect_failure({"--rate", "abc", "-p", "1"}, "rate", 2);
  expect_failure({"--rate", "5GiB", "-p", "1"}, "rate", 2);
  expect_failure({"--metric", "bytes", "-p", "1"}, "metric", 2);
  expect_failure({"-d", "soon", "-p", "1"}, "duration", 2);
  expect_failure({}, "-p PID or -- COMMAND", 2);
  expect_failure({"--comm", "x", "-p", "1"}, "add --all or --children", 2);
  expect_failure({"--all", "--comm", "a(", "-d", "1"}, "invalid regular expression", 2);
  expect_failure({"--all", "--", "/bin/true"}, "--all excludes command", 2);
  expect_failure({"--all", "--max-processes", "3"}, "max-processes", 2);
}

TEST(Errors, NoSuchCgroup) {
  REQUIRE_BPF();
  expect_failure({"--all", "--cgroup", "no/such/cgroup"}, "no such cgroup: no/such/cgroup");
}

TEST(Errors, NoSuchProcess) {
  REQUIRE_BPF();
  expect_failure({"-p", "99999999"}, "no such process: 99999999");
}

TEST(Errors, CommandNotFound) {
  REQUIRE_BPF();
  expect_failure({"--", "/nonexistent/program"}, "run command: No such file or directory", 127);
}

TEST(Errors, StaticBinaryHasNoCLibrary) {
  REQUIRE_BPF();
  Child target({WORKLOAD_STATIC_BIN, "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  expect_failure({"-p", std::to_string(target.pid())}, "maps no C library");
}

TEST(Errors, UnwritableOutput) {
  REQUIRE_BPF();
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "-o", "/nonexistent/dir/out.folded", "--", WORKLOAD_BIN,
               "--scale-pct", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("write /nonexistent/dir/out.folded"), std::string::npos) << r.err;
}

TEST(Errors, WithoutPrivileges) {
  REQUIRE_BPF();  // needs root to drop to another user
  if (access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "setpriv (util-linux) not installed";
  std::string out = "/tmp/allocscope-nobody.folded";
  RunResult r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
               ALLOCSCOPE_BIN, "record", "-o", out, "--", "/bin/true"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("needs root"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

}  // namespace
}  // namespace allocscope::test
