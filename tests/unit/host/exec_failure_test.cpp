// A command that cannot run is named, with what kept it from running: found
// nowhere on PATH (and ./NAME suggested where that exists), not a file that
// runs, or its #! interpreter missing. Each case is made real, exec'd
// through Target, so that the words match what exec said.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "host/target.h"
#include "temp_dir.h"

namespace allocscope {
namespace {

// What record says when `command` is launched.
std::string launch_error(const std::string& command) {
  auto t = Target::launch({command});
  if (!t) return "launch: " + t.error().message;
  auto started = t->start();
  return started ? "" : started.error().message;
}

void write_script(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0755);
}

TEST(ExecFailure, NamesTheCommandAndWhyItDidNotRun) {
  TempDir dir;
  std::string missing = (dir.path / "missing").string(), plain = (dir.path / "plain").string();
  std::string bad = (dir.path / "bad-interpreter").string();
  std::ofstream(plain) << "data\n";
  write_script(bad, "#!/no/such/interpreter\n");
  EXPECT_EQ(launch_error(missing), "no such command: " + missing);
  EXPECT_EQ(launch_error(plain), "cannot run " + plain + ": not executable (permission denied)");
  EXPECT_EQ(launch_error(dir.path.string()), "cannot run " + dir.path.string() + ": it is a directory");
  EXPECT_EQ(launch_error(bad),
            "cannot run " + bad + ": the interpreter its #! line names, or its loader, is missing");
  EXPECT_EQ(launch_error("allocscope-no-such-command"),
            "command not found: allocscope-no-such-command (searched on PATH)");
}

// `leak` run as if on PATH where ./leak was meant (PATH has no "."): the
// line suggests ./leak, and only where ./leak would run.
TEST(ExecFailure, SuggestsTheLocalFileWhereItWouldRun) {
  TempDir dir;
  write_script((dir.path / "leak").string(), "#!/bin/sh\n");
  std::ofstream(dir.path / "notes") << "text\n";
  char here[4096];
  ASSERT_NE(getcwd(here, sizeof here), nullptr);
  ASSERT_EQ(chdir(dir.path.c_str()), 0);
  std::string leak = launch_error("leak"), notes = launch_error("notes");
  ASSERT_EQ(chdir(here), 0);
  EXPECT_EQ(leak, "command not found: leak (searched on PATH); did you mean ./leak?");
  EXPECT_EQ(notes, "command not found: notes (searched on PATH)");
}

}  // namespace
}  // namespace allocscope
