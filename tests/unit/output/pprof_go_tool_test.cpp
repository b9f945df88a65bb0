// What Go's own pprof (go tool pprof) reads from our files: totals,
// functions, and the allocator frames it drops.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "output/pprof.h"
#include "pprof_fixture.h"

namespace allocscope {
namespace {

// ---- Go's pprof reads our files ----

struct GoPprof {
  std::filesystem::path dir;
  std::filesystem::path file;

  // Go writes its cache and pprof its history under HOME: keep both in a
  // temporary directory, and never let go download a toolchain.
  // `symbolize`: pprof's own pass over names (its demangler) as users get it.
  std::string run(const std::string& args, bool symbolize = false) const {
    std::string cmd = "cd '" + dir.string() + "' && HOME='" + dir.string() + "' GOCACHE='" +
                      (dir / "gocache").string() + "' GOFLAGS= GOTOOLCHAIN=local GOPROXY=off go tool pprof " +
                      (symbolize ? "" : "-symbolize=none ") + args + " '" + file.string() + "' 2>&1";
    std::string out;
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
      char buf[4096];
      for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
      int status = pclose(pipe);
      EXPECT_EQ(status, 0) << cmd << "\n" << out;
    }
    return out;
  }
};

bool have_go() { return std::system("command -v go >/dev/null 2>&1") == 0; }

GoPprof write_profile(const Recording& r) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "allocscope-pprof-XXXXXX").string();
  const char* dir = mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  GoPprof go{dir, std::filesystem::path(dir) / "heap.pb.gz"};
  std::ofstream(go.file, std::ios::binary) << encode_pprof(r, "allocscope 0.1.0").value();
  return go;
}

// Column sums of `pprof -raw`: the "v1 v2 ...: loc loc" lines under Samples.
std::vector<int64_t> raw_column_sums(const std::string& out, size_t columns) {
  std::vector<int64_t> sums(columns, 0);
  std::istringstream in(out);
  bool in_samples = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Samples:") {
      in_samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0) break;
    size_t colon = line.find(':');
    if (!in_samples || colon == std::string::npos || line.find('[') != std::string::npos) continue;
    std::istringstream values(line.substr(0, colon));
    for (size_t i = 0; i < columns; ++i) {
      int64_t v = 0;
      values >> v;
      sums[i] += v;
    }
  }
  return sums;
}

int64_t top_total(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(of (\d+)B? total)"))) return -1;
  return std::stoll(m[1]);
}

TEST(PprofGoTool, ReadsTotalsAndFunctions) {
  if (!have_go()) GTEST_SKIP() << "go is not installed (golang-go, installed by dev.sh)";
  const Recording r = synthetic();
  const GoPprof go = write_profile(r);
  std::array<int64_t, 6> want{};
  for (const RecSample& s : r.samples) {
    StackTotals t = rounded(s.totals);
    for (size_t i = 0; i < 6; ++i)
      want[i] += std::array<int64_t, 6>{
          static_cast<int64_t>(t.alloc_objects), static_cast<int64_t>(t.alloc_bytes),
          static_cast<int64_t>(t.live_objects),  static_cast<int64_t>(t.live_bytes),
          static_cast<int64_t>(t.samples),       static_cast<int64_t>(t.live_samples)}[i];
  }

  const std::string raw = go.run("-raw");
  EXPECT_NE(raw.find("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] "
                     "samples/count live_samples/count"),
            std::string::npos)
      << raw;
  EXPECT_NE(raw.find("PeriodType: space bytes"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Period: 524288"), std::string::npos) << raw;
  // A handful of comments, and no label but pid and comm: allocscope's own
  // figures are not shown to pprof users.
  size_t comment_lines = 0;
  for (size_t at = raw.find("Comment: "); at != std::string::npos; at = raw.find("Comment: ", at + 1))
    ++comment_lines;
  EXPECT_LE(comment_lines, 3u) << raw;
  EXPECT_EQ(raw.find("as."), std::string::npos) << raw;
  EXPECT_EQ(raw.find("f64bits"), std::string::npos) << raw;
  std::vector<int64_t> sums = raw_column_sums(raw, 6);
  EXPECT_EQ(sums, std::vector<int64_t>(want.begin(), want.end())) << raw;

  const std::string alloc = go.run("-top -sample_index=alloc_space -unit=byte");
  EXPECT_EQ(top_total(alloc), want[1]) << alloc;
  const std::string inuse = go.run("-top -sample_index=inuse_space -unit=byte");
  EXPECT_EQ(top_total(inuse), want[3]) << inuse;
  const std::string objects = go.run("-top -sample_index=alloc_objects");
  EXPECT_EQ(top_total(objects), want[0]) << objects;
  const std::string samples = go.run("-top -sample_index=samples");
  EXPECT_EQ(top_total(samples), want[4]) << samples;

  const std::string traces = go.run("-traces -sample_index=alloc_space");
  for (const char* name : {"server::handle_request", "server::parse_header", "main", "worker_loop",
                           "comm:  server", "comm:  worker", "pid:  200"})
    EXPECT_NE(traces.find(name), std::string::npos) << name << "\n" << traces;
  std::filesystem::remove_all(go.dir);
}

// The allocator entry points, each sample's leaf, are the profile's
// drop_frames: pprof puts flat bytes on their callers, as in Go's own heap
// profiles, and never shows them.
TEST(PprofGoTool, FlatBytesLandOnTheAllocatorsCallers) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  const Recording r = synthetic();
  pb::Profile p = gunzip_message(encode_pprof(r).value());
  EXPECT_EQ(str(p, p.drop_frames()), "calloc|malloc|operator new");
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -nodefraction=0 -sample_index=alloc_space -unit=byte");
  // flat: parse_header (inlined, innermost) 1572865 + 600001 (malloc's and
  // operator new's), main 1048576 (calloc's).
  EXPECT_NE(top.find("2172866B 25.67% 87.61%   2172866B"), std::string::npos) << top;
  EXPECT_NE(top.find("1048576B 12.39%"), std::string::npos) << top;
  for (const char* allocator : {"malloc", "calloc", "operator new"})
    EXPECT_EQ(top.find(allocator), std::string::npos) << allocator << "\n" << top;
  std::filesystem::remove_all(go.dir);
}

// Go's runtime frames between the program and its allocator go too, as in
// Go's own heap profiles; those outside the program's first frame stay.
TEST(PprofGoTool, GosRuntimeFramesUnderTheProgramGo) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  Recording r;
  r.rate = 512 * 1024;
  r.mappings = {{0x400000, 0x500000, 0, "/usr/bin/service", ""}};
  r.functions = {{"runtime.mallocgc", "runtime.mallocgc", ""},
                 {"runtime.makeslice", "runtime.makeslice", ""},
                 {"main.site", "main.site", "main.go"},
                 {"main.main", "main.main", "main.go"},
                 {"runtime.main", "runtime.main", "proc.go"}};
  for (uint32_t f = 0; f < 5; ++f) r.locations.push_back({0, 0x400000 + 16 * f, {{f, 0}}});
  r.samples.push_back(RecSample{{0, 1, 2, 3, 4}, 1, "service", {1, 4096, 1, 4096, 1, 1}, {}});
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -nodefraction=0 -sample_index=alloc_space -unit=byte");
  EXPECT_NE(top.find("4096B   100%   100%      4096B   100%  main.site"), std::string::npos) << top;
  EXPECT_NE(top.find("runtime.main"), std::string::npos) << top;
  EXPECT_EQ(top.find("runtime.makeslice"), std::string::npos) << top;
  std::filesystem::remove_all(go.dir);
}

// Python's names in angle brackets (a module's code, a comprehension, a
// nested function) keep them through pprof's demangler: they carry no
// system name for it to simplify to nothing.
TEST(PprofGoTool, NamesInAngleBracketsSurviveItsDemangler) {
  if (!have_go()) GTEST_SKIP() << "go is not installed";
  Recording r = synthetic();
  r.functions.push_back({"<module>", "", "app.py"});
  r.functions.push_back({"outer.<locals>.inner", "", "app.py"});
  r.locations.push_back({-1, 0x8000000000000001, {{uint32_t(r.functions.size() - 2), 1}}});
  r.locations.push_back({-1, 0x8000000000000002, {{uint32_t(r.functions.size() - 1), 7}}});
  uint32_t module = uint32_t(r.locations.size() - 2), inner = uint32_t(r.locations.size() - 1);
  r.samples.push_back(RecSample{{0, inner, module}, 300, "python3", {1, 4096, 1, 4096, 1, 1}, {}});
  const GoPprof go = write_profile(r);
  const std::string top = go.run("-top -cum -nodefraction=0 -sample_index=alloc_space", true);
  EXPECT_NE(top.find(" <module>\n"), std::string::npos) << top;
  EXPECT_NE(top.find(" outer.<locals>.inner\n"), std::string::npos) << top;
  EXPECT_EQ(top.find("<unknown>"), std::string::npos) << top;
  std::filesystem::remove_all(go.dir);
}

}  // namespace
}  // namespace allocscope
