// Go programs, whose heap allocscope does not sample yet, are named as Go
// (with their release) in the summary, the recording's counters and -p's
// refusal, never called stripped: Debian's gofmt (static, stripped) and go
// (cgo). Real BPF.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "harness.h"

namespace allocscope::test {
namespace {

constexpr const char* kGofmt = "/usr/lib/go/bin/gofmt";  // static, stripped
constexpr const char* kGo = "/usr/lib/go/bin/go";        // cgo: the C library is probed

// What `go version FILE` says built it ("go1.19.8").
std::string go_release(const std::string& path) {
  RunResult r = run({kGo, "version", path});
  size_t at = r.out.find(": ");
  return at == std::string::npos ? "" : r.out.substr(at + 2, r.out.find_first_of(" \n", at + 2) - at - 2);
}

nlohmann::json counters_of(const std::string& path) {
  std::ifstream in(path);
  auto json = nlohmann::json::parse(in, nullptr, false);
  return json.is_object() ? json["counters"] : nlohmann::json();
}

TEST(Go, ALaunchedGoProgramIsNamedAsGoNotAsStripped) {
  REQUIRE_BPF();
  std::string release = go_release(kGofmt);
  ASSERT_TRUE(release.starts_with("go1.")) << release;
  for (const char* program : {kGofmt, kGo}) {
    SCOPED_TRACE(program);
    std::string out = temp_path("go.json");
    RunResult r = run({ALLOCSCOPE_BIN, "record", "-o", out, "--", program, "help"});
    EXPECT_EQ(r.status, std::string(program) == kGofmt ? 2 : 0) << r.err;  // gofmt: no such file "help"
    EXPECT_NE(r.err.find("warning: 1 Go program(s) ran: Go allocates from its own heap"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(std::string(program) + " (" + release + ")"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("static program(s) ran with no allocator"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("record again with --rate 1"), std::string::npos) << r.err;  // it would not help
    EXPECT_EQ(counters_of(out)["go_programs"], 1);
    std::remove(out.c_str());
  }
}

// A stripped cgo program's Go frames, above its C allocations, are named
// from Go's own function table.
TEST(Go, AStrippedProgramsGoFramesAreNamed) {
  REQUIRE_BPF();
  std::string out = temp_path("go.folded");
  RunResult r = run({ALLOCSCOPE_BIN, "record", "--rate", "1", "-q", "-o", out, "--", kGo, "version"});
  ASSERT_EQ(r.status, 0) << r.err;
  size_t go_frames = 0, unnamed = 0;
  for (const auto& [frames, value] : read_folded(out))
    for (const std::string& f : frames) {
      go_frames += f.starts_with("runtime.");
      unnamed += f.starts_with("go+0x");
    }
  EXPECT_GT(go_frames, 0u) << r.err;
  EXPECT_EQ(unnamed, 0u);
  std::remove(out.c_str());
}

TEST(Go, AttachingToAGoProgramWithoutCgoSaysWhy) {
  REQUIRE_BPF();
  std::string fifo = temp_path("gofmt.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // Its stdin a FIFO it holds open for writing too: it reads, and waits.
  Child gofmt({"/bin/sh", "-c", std::string("exec ") + kGofmt + " <> " + fifo});
  usleep(300000);  // exec'd
  RunResult r =
      run({ALLOCSCOPE_BIN, "record", "-p", std::to_string(gofmt.pid()), "-o", temp_path("x.folded")});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("(gofmt) is a Go program (" + go_release(kGofmt) +
                       "): Go allocates from its own heap (runtime.mallocgc)"),
            std::string::npos)
      << r.err;
  gofmt.signal(SIGKILL);
  std::remove(fifo.c_str());
}

}  // namespace
}  // namespace allocscope::test
