// The runtimes' rooms as the core meets them through the registry: the
// readers and finders it hands down, and Go's allocation face (the route
// chosen among a file's targets, the programs noted) without a BPF session.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "abi/preload/entry_codes.h"
#include "runtime/go/go_runtime.h"
#include "runtime/registry.h"
#include "symbols/elf_file.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

constexpr const char* kGofmt = "/usr/lib/go/bin/gofmt";

// A Go file's targets as the finders give them: mallocgc, and its
// runtime's sampling (profile record and its free).
std::vector<ProbeTarget> go_targets() {
  ProbeTarget profile{.fn = uint16_t(AS_FN_GO_PROFILE), .vaddr = 0x3000};
  profile.go_profile = as_go_profile{};
  return {{.fn = uint16_t(AS_FN_GO_MALLOC), .vaddr = 0x1000},
          {.fn = uint16_t(AS_FN_GO_FREE), .vaddr = 0x2000},
          profile};
}

std::vector<int> kinds(const std::vector<ProbeTarget>& targets) {
  std::vector<int> out;
  for (const ProbeTarget& t : targets) out.push_back(as_fn_kind(t.fn));
  std::sort(out.begin(), out.end());
  return out;
}

ProbedFile file_of(const ElfFile* elf, uint64_t ino) {
  return {1234, 42, ino, kGofmt, "gofmt", [elf] { return elf; }};
}

RuntimeSettings settings(uint64_t rate) {
  RuntimeSettings s;
  s.rate = rate;
  return s;
}

TEST(Registry, HandsDownGosTablesAndEntryPoints) {
  auto elf = ElfFile::open(kGofmt);
  ASSERT_TRUE(elf) << elf.error().message;
  auto tables = read_runtime_tables(runtime_tables_readers(), elf->elf());
  ASSERT_TRUE(tables);
  EXPECT_STREQ(tables->name(), "Go's pclntab");
  EXPECT_FALSE(tables->unwind_runs().empty());
  std::vector<ProbeTarget> found;
  for (EntryFinder find : runtime_entry_finders())
    for (ProbeTarget& t : find(*elf, elf->functions())) found.push_back(t);
  EXPECT_EQ(kinds(found), (std::vector<int>{AS_FN_GO_MALLOC, AS_FN_GO_PROFILE, AS_FN_GO_FREE}));
  // A C program is no runtime's.
  auto self = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(self);
  EXPECT_FALSE(read_runtime_tables(runtime_tables_readers(), self->elf()));
  for (EntryFinder find : runtime_entry_finders()) EXPECT_TRUE(find(*self, self->functions()).empty());
}

TEST(GoRuntime, AtGosRateItsRuntimesSamplingIsRead) {
  GoRuntime go(settings(kGoMemProfileRate), nullptr);
  auto found = go_targets(), targets = found;
  HeapRoute route = go.choose_targets(file_of(nullptr, 7), targets, found);
  EXPECT_TRUE(route.probed);
  EXPECT_EQ(kinds(targets), (std::vector<int>{AS_FN_GO_PROFILE, AS_FN_GO_FREE}));
}

TEST(GoRuntime, AnotherRateOrCallsAskedForSamplesMallocgc) {
  for (auto [rate, calls] : {std::pair{uint64_t(64 * 1024), false}, std::pair{kGoMemProfileRate, true}}) {
    RuntimeSettings s = settings(rate);
    if (calls) s.by_calls.insert("go");
    GoRuntime go(s, nullptr);
    auto found = go_targets(), targets = found;
    HeapRoute route = go.choose_targets(file_of(nullptr, 8), targets, found);
    EXPECT_TRUE(route.probed);
    EXPECT_EQ(kinds(targets), (std::vector<int>{AS_FN_GO_MALLOC})) << rate << " " << calls;
  }
}

TEST(GoRuntime, OffLeavesTheHeapUnprobedAndTheProgramNamed) {
  auto elf = ElfFile::open(kGofmt);
  ASSERT_TRUE(elf);
  RuntimeSettings s = settings(kGoMemProfileRate);
  s.off.insert("go");
  GoRuntime go(s, nullptr);
  auto found = go_targets(), targets = found;
  HeapRoute route = go.choose_targets(file_of(&*elf, 9), targets, found);
  EXPECT_FALSE(route.probed);
  EXPECT_TRUE(targets.empty());
  EXPECT_NE(route.unprobed.find("--no-go-heap"), std::string::npos) << route.unprobed;
  go.on_probed(file_of(&*elf, 9), {});  // the core found nothing to attach
  EXPECT_EQ(go.programs_unread(), 1u);
  EXPECT_TRUE(go.owns_program(42, 9));
  EXPECT_NE(go.unprobed_program(42, 9).find("a Go program (go1."), std::string::npos);
  go.on_probed(file_of(&*elf, 9), {});  // once a file
  EXPECT_EQ(go.programs_unread(), 1u);
}

TEST(GoRuntime, AFileWithoutGosEntryPointsIsNotItsAndLeftAsFound) {
  GoRuntime go(settings(kGoMemProfileRate), nullptr);
  std::vector<ProbeTarget> found{{.fn = uint16_t(AS_FN_MALLOC), .vaddr = 0x10}, {.fn = uint16_t(AS_FN_FREE)}};
  auto targets = found;
  HeapRoute route = go.choose_targets(file_of(nullptr, 10), targets, found);
  EXPECT_FALSE(route.probed);
  EXPECT_TRUE(route.unprobed.empty());
  EXPECT_EQ(kinds(targets), kinds(found));
  auto self = ElfFile::open("/proc/self/exe");
  ASSERT_TRUE(self);
  go.on_probed(file_of(&*self, 10), targets);
  EXPECT_FALSE(go.owns_program(42, 10));
  EXPECT_EQ(go.programs_unread(), 0u);
  EXPECT_FALSE(go.reads_heap_of(getpid()));
}

TEST(Runtimes, WithoutASessionGoIsToldAndPythonIsNotMade) {
  Symbolizer symbolizer;
  Runtimes all(RuntimeServices{symbolizer, nullptr, settings(kGoMemProfileRate)});
  auto found = go_targets(), targets = found;
  HeapRoute route = all.choose_targets(file_of(nullptr, 11), targets, found);
  EXPECT_TRUE(route.probed);
  EXPECT_EQ(kinds(targets), (std::vector<int>{AS_FN_GO_PROFILE, AS_FN_GO_FREE}));
  std::vector<std::pair<std::string, uint64_t>> counters;
  uint64_t kernel[AS_CNT_COUNT] = {};
  all.add_counters(kernel, counters);
  EXPECT_TRUE(counters.empty()) << "no runtime counts without BPF";
  EXPECT_TRUE(all.paths().empty());
}

// Without BPF no kernel walks CPython's frames: the samples in its
// allocator (the preload library's wrappers) are counted, and said once.
TEST(Runtimes, WithoutBpfCpythonsSamplesAreSaidToHoldCFramesOnly) {
  Symbolizer symbolizer;
  Runtimes runtimes{RuntimeServices{symbolizer}};
  std::vector<uint64_t> ips{0x1000};
  EXPECT_TRUE(runtimes.paths().empty()) << "nothing said before a sample";
  for (uint16_t fn : {uint16_t(AS_CODE_PYOBJ_MALLOC), uint16_t(AS_CODE_PYMEM_REALLOC), uint16_t(AS_CODE_NEW),
                      uint16_t(AS_FN_MALLOC)})
    runtimes.place_frames(getpid(), {}, {}, fn, ips);
  EXPECT_EQ(ips, std::vector<uint64_t>{0x1000}) << "its frames left as they are";
  std::vector<RuntimePath> paths = runtimes.paths();
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].key, "python");
  EXPECT_EQ(paths[0].value, "C frames only (no Python frames without BPF)");
  std::vector<std::string> said = runtimes.warnings({});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("(2 samples in its allocator)"), std::string::npos) << said[0];
}

}  // namespace
}  // namespace allocscope
