// Source lines and inlined calls from DWARF, in live processes: the
// `inlined` workload prints a return address that lies in an always-inlined
// helper, and the symbolizer must name the helper at its line, then its
// caller at the line of the inlined call; binaries without DWARF keep one
// frame with no position.
#include "symbols/symbolizer.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "allocscope.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "output/render.h"
#include "record/view/recording_builder.h"

extern char** environ;

namespace allocscope {
namespace {

// A child whose first line of output is read; killed when it goes.
class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fdopen(fds[0], "r");
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) fclose(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  std::string first_line() {
    char buf[128] = {};
    if (!out_ || !fgets(buf, sizeof buf, out_)) return "";
    return buf;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

// 1-based line of the source line holding `marker`, 0 when none does.
int64_t marker_line(const std::string& marker) {
  std::ifstream in(INLINED_SRC);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n)
    if (line.find(marker) != std::string::npos) return n;
  return 0;
}

// The `inlined` workload, stopped in the helper, and the return address it printed.
struct InlinedSite {
  explicit InlinedSite(const char* binary = INLINED_BIN) : child({binary, "--print-addr"}) {}
  Child child;
  uint64_t ip = std::strtoull(child.first_line().c_str(), nullptr, 16);
};

// FrameInfo::mapping points into `sym`, which must outlive it.
FrameInfo describe(Symbolizer& sym, pid_t pid, uint64_t ip) {
  std::vector<uint64_t> ips{ip};
  return sym.describe(sym.resolve(pid, ips)[0], ip);
}

// The executable mapping of the file ending in `suffix`, as soon as it is
// mapped: a vfork parent runs again before exec has mapped the new program.
std::optional<Mapping> wait_for_text(pid_t pid, const std::string& suffix) {
  for (int i = 0; i < 200; ++i) {
    for (const Mapping& m : read_maps(pid).value_or(std::vector<Mapping>{}))
      if (m.executable && m.path.ends_with(suffix)) return m;
    usleep(5000);
  }
  return std::nullopt;
}

bool has_debug_file(const std::string& build_id) {
  return build_id.size() > 2 && std::filesystem::exists("/usr/lib/debug/.build-id/" + build_id.substr(0, 2) +
                                                        "/" + build_id.substr(2) + ".debug");
}

// The C library's own qsort (under ASan, the default one is its interceptor).
uint64_t libc_qsort() {
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  return libc ? reinterpret_cast<uint64_t>(dlsym(libc, "qsort")) : 0;
}

std::string frames_text(const FrameInfo& f) {
  std::string s;
  for (const SourceFrame& x : f.frames)
    s += "\n  " + x.function + " [" + x.system_name + "] " + x.file + ":" + std::to_string(x.line);
  return s;
}

// Built by GCC, and by clang (no .debug_aranges: the units are found by
// their own ranges).
class InlinedBy : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Symbolizer, InlinedBy, ::testing::Values(INLINED_BIN, INLINED_CLANG_BIN),
                         [](const auto& info) { return std::string(info.index == 0 ? "gcc" : "clang"); });

TEST_P(InlinedBy, HelperAtItsLineThenItsCallerAtTheCallLine) {
  InlinedSite site(GetParam());
  ASSERT_GT(site.ip, 0u) << "the workload printed no address";
  Symbolizer sym;
  FrameInfo f = describe(sym, site.child.pid(), site.ip);
  SCOPED_TRACE("frames:" + frames_text(f));

  ASSERT_EQ(f.frames.size(), 2u);
  EXPECT_EQ(f.frames[0].function, "make_buffer");
  EXPECT_TRUE(f.frames[0].file.ends_with("/inlined.c"));
  EXPECT_EQ(f.frames[0].line, marker_line("MARK_MAKE_BUFFER"));
  EXPECT_EQ(f.frames[1].function, "site_inlined");
  EXPECT_EQ(f.frames[1].system_name, "site_inlined");
  EXPECT_TRUE(f.frames[1].file.ends_with("/inlined.c"));
  EXPECT_EQ(f.frames[1].line, marker_line("MARK_SITE_INLINED"));
  EXPECT_EQ(f.function, "site_inlined");  // the symbol the address is in, as without DWARF
  EXPECT_EQ(f.system_name, "site_inlined");
  EXPECT_FALSE(f.build_id.empty());
}

TEST(Symbolizer, RepeatedLookupsGiveTheSameFrames) {
  InlinedSite site;
  ASSERT_GT(site.ip, 0u);
  Symbolizer sym;
  std::vector<uint64_t> ips{site.ip};
  uint32_t map = sym.resolve(site.child.pid(), ips)[0];
  FrameInfo first = sym.describe(map, site.ip);
  FrameInfo again = sym.describe(map, site.ip);  // from the cache
  ASSERT_EQ(first.frames.size(), again.frames.size());
  for (size_t i = 0; i < first.frames.size(); ++i) {
    EXPECT_EQ(first.frames[i].function, again.frames[i].function);
    EXPECT_EQ(first.frames[i].line, again.frames[i].line);
  }
}

// A process gone and its stacks forgotten: compact() drops its mapping and
// its binary, and the mapping kept still names the same function by its
// new id.
TEST(Symbolizer, CompactKeepsWhatIsUsedUnderNewIds) {
  InlinedSite site;
  ASSERT_GT(site.ip, 0u);
  auto qsort_at = libc_qsort() + 1;
  Symbolizer sym;
  std::vector<uint64_t> child_ips{site.ip}, own_ips{qsort_at};
  uint32_t child_map = sym.resolve(site.child.pid(), child_ips)[0];
  uint32_t own_map = sym.resolve(getpid(), own_ips)[0];
  ASSERT_NE(child_map, Symbolizer::kNoMapping);
  ASSERT_NE(own_map, Symbolizer::kNoMapping);
  ASSERT_EQ(child_map, 0u);  // made first
  std::string own_name = sym.describe(own_map, qsort_at).function;
  size_t modules = sym.modules();
  sym.forget(site.child.pid());

  std::vector<bool> used(sym.resolved_mappings());
  used[own_map] = true;
  std::vector<uint32_t> remap = sym.compact(used);
  ASSERT_EQ(remap.size(), used.size());
  EXPECT_EQ(remap[child_map], Symbolizer::kNoMapping);
  EXPECT_EQ(remap[own_map], 0u);
  EXPECT_EQ(sym.resolved_mappings(), 1u);
  EXPECT_LT(sym.modules(), modules);  // the child's program is closed
  EXPECT_EQ(sym.describe(remap[own_map], qsort_at).function, own_name);
  // Resolving again makes a fresh id after the kept ones.
  EXPECT_EQ(sym.resolve(getpid(), own_ips)[0], 0u);
  EXPECT_EQ(sym.compact({}).at(0), Symbolizer::kNoMapping);
  EXPECT_EQ(sym.resolved_mappings(), 0u);
}

// A process gone before its maps were read (a short one, read late): the
// kernel's mappings name files by device and inode only. A file allocscope
// maps itself (the C library, the loader) still gets its path.
TEST(Symbolizer, AGoneProcessStillNamesTheFilesAllocscopeMapsToo) {
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  uint64_t qsort_at = libc_qsort() + 1;
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps.has_value());
  const Mapping* libc = find_mapping(*maps, qsort_at);
  ASSERT_NE(libc, nullptr);
  Mapping from_kernel = *libc;
  from_kernel.path.clear();
  Symbolizer sym;
  sym.add_mappings(gone, std::vector<Mapping>{from_kernel});
  std::vector<uint64_t> ips{qsort_at};
  uint32_t map = sym.resolve(gone, ips)[0];
  ASSERT_NE(map, Symbolizer::kNoMapping);
  EXPECT_EQ(sym.describe(map, qsort_at).function, "qsort");
}

// coreutils' sleep is stripped and its debug package is not installed: the
// frame is named as before DWARF was read, and has no position.
TEST(Symbolizer, WithoutDwarfOneFrameWithoutPosition) {
  Child child({"/bin/sleep", "30"});
  ASSERT_GT(child.pid(), 0);
  std::optional<Mapping> text = wait_for_text(child.pid(), "/sleep");
  ASSERT_TRUE(text.has_value());
  Symbolizer sym;
  FrameInfo f = describe(sym, child.pid(), text->start + 0x100);
  SCOPED_TRACE("frames:" + frames_text(f));
  if (has_debug_file(f.build_id)) GTEST_SKIP() << "sleep has a debug file here";

  ASSERT_EQ(f.frames.size(), 1u);
  EXPECT_EQ(f.frames[0].function, f.function);
  EXPECT_EQ(f.frames[0].system_name, f.system_name);
  EXPECT_EQ(f.frames[0].file, "");
  EXPECT_EQ(f.frames[0].line, 0);
}

TEST(Symbolizer, UnknownAddressIsOneUnknownFrame) {
  Symbolizer sym;
  FrameInfo f = describe(sym, getpid(), 8);  // page zero is never mapped
  ASSERT_EQ(f.frames.size(), 1u);
  EXPECT_EQ(f.function, "[unknown]");
  EXPECT_EQ(f.frames[0].function, "[unknown]");
  EXPECT_EQ(f.frames[0].line, 0);
}

// Where libc6-dbg is installed, libdwfl finds the C library's separate
// debug file by build id; the symbol still names the outer frame.
TEST(Symbolizer, SeparateDebugFileByBuildId) {
  auto qsort_at = libc_qsort();
  ASSERT_NE(qsort_at, 0u);
  Symbolizer sym;
  FrameInfo f = describe(sym, getpid(), qsort_at + 1);  // a "return address" just past the entry
  SCOPED_TRACE("frames:" + frames_text(f));
  ASSERT_NE(f.mapping, nullptr);
  ASSERT_TRUE(is_c_library_name(f.mapping->path)) << f.mapping->path;
  if (!has_debug_file(f.build_id)) GTEST_SKIP() << "no debug file for the C library";
  EXPECT_EQ(f.function, "qsort");
  EXPECT_EQ(f.frames.back().function, "qsort");
  EXPECT_FALSE(f.frames.back().file.empty());
  EXPECT_GT(f.frames.back().line, 0);
}

// Symbolizer -> Recording -> folded frame names, with and without lines.
TEST(SymbolizerRecording, InlinedCallsBecomeLinesOfOneLocation) {
  InlinedSite site;
  ASSERT_GT(site.ip, 0u);
  pid_t pid = site.child.pid();
  Profile profile(1, 16, 16);
  std::vector<uint64_t> ips{site.ip};
  AllocSample a;
  a.pid = uint32_t(pid);
  a.fn = AS_FN_MALLOC;
  a.addr = 0x1000;
  a.size = 4096;
  a.ips = ips;
  profile.on_alloc(a);
  Symbolizer sym;
  StackOrigin origin{.pid = uint32_t(pid), .comm = "inlined", .mappings = sym.resolve(pid, ips)};
  RecordingMeta meta;
  meta.rate = 1;
  Recording r = build_recording(profile, sym, meta, {origin});
  ASSERT_EQ(r.samples.size(), 1u);
  const RecSample& s = r.samples[0];
  ASSERT_EQ(s.locations.size(), 2u);  // malloc, then the call site
  const RecLocation& call = r.locations[s.locations[1]];
  EXPECT_EQ(call.address, site.ip - 1);
  ASSERT_EQ(call.lines.size(), 2u);
  EXPECT_TRUE(r.functions[call.lines[0].function].filename.ends_with("/inlined.c"));

  std::string file = r.functions[call.lines[0].function].filename;
  auto at = [&](const char* marker) { return " (" + file + ":" + std::to_string(marker_line(marker)) + ")"; };
  std::string label = "inlined (" + std::to_string(pid) + ")";
  EXPECT_EQ(frame_names(r, s), (std::vector<std::string>{label, "site_inlined", "make_buffer", "malloc"}));
  EXPECT_EQ(frame_names(r, s, true),
            (std::vector<std::string>{label, "site_inlined" + at("MARK_SITE_INLINED"),
                                      "make_buffer" + at("MARK_MAKE_BUFFER"), "malloc"}));
  RenderOptions o;
  o.lines = true;
  EXPECT_NE(render(r, Format::Folded, o).value().find("make_buffer (" + file + ":"), std::string::npos);
  EXPECT_EQ(render(r, Format::Folded, {}).value().find("inlined.c"), std::string::npos);
}

}  // namespace
}  // namespace allocscope
