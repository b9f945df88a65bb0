// Bad input gets one clear line on stderr, a non-zero exit and no output file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "harness.h"
#include "host/process.h"

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
  expect_failure({}, "-- COMMAND, -p PID or --all", 2);
  expect_failure({"--comm", "x", "-p", "1"}, "add --all or --children", 2);
  expect_failure({"--all", "--comm", "a(", "-d", "1"}, "invalid regular expression", 2);
  expect_failure({"--all", "--", "/bin/true"}, "--all excludes command", 2);
  expect_failure({"--all", "--max-processes", "3"}, "max-processes", 2);
  expect_failure({"--confidence", "nan", "-p", "1"}, "not a number", 2);
  for (const char* top : {"-1", "0"}) {
    RunResult r = run({ALLOCSCOPE_BIN, "report", "/dev/null", "--top", top});
    EXPECT_EQ(r.status, 2) << top;
    EXPECT_NE(r.err.find("--top"), std::string::npos) << r.err;
  }
}

// A usage error is one line that starts with "allocscope:" and says what
// to do: the word that was wrong, what it may be, where help is.
TEST(Errors, UsageErrorsAreOneLineThatSaysWhatToDo) {
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {{"recrod", "-p", "1"}, "unknown command 'recrod': did you mean record?"},
           {{}, "say what to do: allocscope record, report, agent or check"},
           {{"record", "-p", "abc"}, "--pid: 'abc' is not a number (allocscope record --help)"},
           {{"record", "--bogus", "-p", "1"},
            "not an option of record: --bogus (allocscope record --help lists them)"},
           {{"record", "--durration", "1", "-p", "1"},
            "not an option of record: --durration; did you mean --duration?"},
           {{"record", "--top=5", "--", "true"}, "--top takes no value: --top=5"},
           {{"report"}, "report needs a recording: allocscope report FILE.pb.gz"},
           {{"report", "--diff", "/dev/null"}, "--diff compares two recordings"},
           {{"report", "/no/such.pb.gz"}, "no such file: /no/such.pb.gz"},
           {{"report", "/dev/null", "--metric", "foo"},
            "invalid metric 'foo' (alloc_space, alloc_objects, inuse_space or inuse_objects)"},
           {{"record", "-d", "abc", "-p", "1"}, "invalid duration 'abc' (30, 30s, 1.5s, 500ms, 2m, 1h)"},
       }) {
    std::vector<std::string> argv = {ALLOCSCOPE_BIN};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    RunResult r = run(argv, 60000);
    SCOPED_TRACE(r.err);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.err.rfind("allocscope: ", 0), 0u);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
    EXPECT_NE(r.err.find(c.said), std::string::npos);
  }
}

// --help shows values as they are given (N=100, {fp,dwarf}=dwarf,
// BOOL=true), flags bare: none of CLI11's own notation.
TEST(Errors, HelpShowsNoParserNotation) {
  for (const char* sub : {"record", "report", "agent", "check"}) {
    RunResult r = run({ALLOCSCOPE_BIN, sub, "--help"}, 60000);
    SCOPED_TRACE(sub);
    EXPECT_EQ(r.status, 0);
    for (const char* noise : {"{false}", "{true}", "BOOL=1", "BOOL=0", ":UINT", ":INT", ":FLOAT", " in ["})
      EXPECT_EQ(r.out.find(noise), std::string::npos) << noise << "\n" << r.out;
  }
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--help"}, 60000);
  EXPECT_NE(r.out.find("--unwind {fp,dwarf}=dwarf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--per-process BOOL=true"), std::string::npos) << r.out;
}

// Help and the version as git and most tools take them: words as well as
// options, and -d's help says what 0 means.
TEST(Errors, HelpAndVersionAreGivenForWordsAndOptions) {
  RunResult version = run({ALLOCSCOPE_BIN, "--version"}, 60000);
  ASSERT_EQ(version.status, 0) << version.err;
  EXPECT_NE(version.out.find("allocscope"), std::string::npos) << version.out;
  for (const char* word : {"version", "-V"}) {
    RunResult r = run({ALLOCSCOPE_BIN, word}, 60000);
    EXPECT_EQ(r.status, 0) << word << ": " << r.err;
    EXPECT_EQ(r.out, version.out) << word;
  }
  RunResult help = run({ALLOCSCOPE_BIN, "help"}, 60000), options = run({ALLOCSCOPE_BIN, "--help"}, 60000);
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_EQ(help.out, options.out);
  RunResult record = run({ALLOCSCOPE_BIN, "help", "record"}, 60000);
  EXPECT_EQ(record.status, 0) << record.err;
  EXPECT_EQ(record.out, run({ALLOCSCOPE_BIN, "record", "--help"}, 60000).out);
  EXPECT_NE(record.out.find("default (and 0): no limit"), std::string::npos) << record.out;
}

// -p names a kernel thread: said so, not that it has no allocator.
TEST(Errors, AKernelThreadIsNamedAsOne) {
  REQUIRE_BPF();
  expect_failure({"-p", "2"}, "is a kernel thread: it has no user memory");
}

// With --duration the first line says how long, not to press Ctrl-C.
TEST(Errors, ADurationIsAnnouncedAsOne) {
  REQUIRE_BPF();
  std::string out = temp_path("duration.pb.gz");
  Child w({WORKLOAD_BIN, "--wait"});
  ASSERT_TRUE(w.wait_for_line("ready", 20000));
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-d", "1", "-o", out, "-p", std::to_string(w.pid())}, 60000);
  w.signal(SIGTERM);
  w.wait();
  EXPECT_NE(r.err.find("; for 1.00 s (Ctrl-C stops sooner)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("Ctrl-C to stop"), std::string::npos) << r.err;
  std::remove(out.c_str());
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
  expect_failure({"--", "/nonexistent/program"}, "no such command: /nonexistent/program", 127);
}

// A static binary stripped of its symbols: its malloc cannot be found, and
// the error says what was looked for where.
TEST(Errors, StrippedStaticBinaryNamesWhatWasSearched) {
  REQUIRE_BPF();
  Child target({WORKLOAD_STRIPPED_BIN, "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  expect_failure({"-p", std::to_string(target.pid())}, "maps no allocator allocscope knows");
  expect_failure({"-p", std::to_string(target.pid())}, "alloc_sites_stripped");
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
}

// Launched, the same binary records nothing; the summary says why instead
// of leaving an empty profile unexplained.
TEST(Errors, LaunchedProgramWithoutAnAllocatorIsReported) {
  REQUIRE_BPF();
  std::string out = temp_path("stripped.folded");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", WORKLOAD_STRIPPED_BIN, "--scale-pct", "50"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("1 static program(s) ran with no allocator allocscope knows"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("alloc_sites_stripped"), std::string::npos) << r.err;
  std::remove(out.c_str());
}

TEST(Errors, UnwritableOutput) {
  REQUIRE_BPF();
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "-o", "/nonexistent/dir/out.folded", "--", WORKLOAD_BIN,
                     "--scale-pct", "1"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("write /nonexistent/dir/out.folded"), std::string::npos) << r.err;
  // Found before anything runs: the command is never started.
  std::string marker = temp_path("never-started");
  r = run({ALLOCSCOPE_BIN, "record", "-q", "-o", "/nonexistent/dir/out.folded", "--", "touch", marker});
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran although no output could be written";
  std::remove(marker.c_str());
}

TEST(Errors, WithoutPrivileges) {
  REQUIRE_BPF();  // needs root to drop to another user
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) not installed";
  // A directory of nobody's own, so the file would appear there if allocscope wrote it.
  std::string dir = temp_path("nobody");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0) << dir;
  std::string out = dir + "/out.folded";
  // Attaching needs BPF (a launched command does not: unprivileged_test.cpp).
  RunResult r = run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                     "--inh-caps=-all", ALLOCSCOPE_BIN, "record", "-o", out, "-p", std::to_string(getpid())});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("needs root"), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace allocscope::test

namespace allocscope::test {
namespace {

// A small real recording for report to read.
std::string small_recording() {
  std::string out = temp_path("small.pb.gz");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "-q", "-o", out, "--", WORKLOAD_BIN, "--scale-pct", "5"});
  EXPECT_EQ(r.status, 0) << r.err;
  return out;
}

// report reads regular files only: a FIFO fails at once instead of waiting
// for a writer, a device instead of reading it without end.
TEST(Errors, ReportRefusesWhatIsNotARegularFile) {
  std::string fifo = temp_path("input.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& input : {fifo, std::string("/dev/zero")}) {
    RunResult r = run({ALLOCSCOPE_BIN, "report", input}, 20000);
    EXPECT_EQ(r.status, 1) << input;
    EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  }
  std::remove(fifo.c_str());
}

// Standard output that cannot be written is an error, not a silent success.
TEST(Errors, FullStandardOutputIsAnError) {
  REQUIRE_BPF();
  std::string rec = small_recording();
  RunResult r = run({"/bin/sh", "-c", std::string(ALLOCSCOPE_BIN) + " report " + rec + " > /dev/full"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("write standard output: No space left on device"), std::string::npos) << r.err;
  std::remove(rec.c_str());
}

// A reader that had enough (report ... | head, EPIPE): report ends quietly
// and successfully, and its other outputs are still written.
TEST(Errors, ClosedPipeEndsReportQuietlyAndOtherOutputsAreWritten) {
  REQUIRE_BPF();
  std::string rec = small_recording(), folded = temp_path("after-pipe.folded"), said = temp_path("pipe.err");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);  // nobody will read
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    int err = open(said.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(err, 2);
    execl(ALLOCSCOPE_BIN, ALLOCSCOPE_BIN, "report", rec.c_str(), "-o", "-", "-o", folded.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(read_text_file(said).value_or("?"), "");
  EXPECT_TRUE(std::filesystem::exists(folded));
  std::remove(folded.c_str());
  std::remove(said.c_str());
  std::remove(rec.c_str());
}

// allocscope ignores SIGPIPE for itself; a command it launches must not
// inherit that (an ignored signal stays ignored across exec).
TEST(Errors, LaunchedCommandKeepsItsSignalDispositions) {
  REQUIRE_BPF();
  std::string out = temp_path("sigign.folded");
  RunResult traced =
      run({ALLOCSCOPE_BIN, "record", "-q", "-o", out, "--", "grep", "SigIgn", "/proc/self/status"});
  RunResult untraced = run({"grep", "SigIgn", "/proc/self/status"});
  EXPECT_EQ(traced.status, 0) << traced.err;
  EXPECT_EQ(traced.out, untraced.out);
  std::remove(out.c_str());
}

}  // namespace
}  // namespace allocscope::test
