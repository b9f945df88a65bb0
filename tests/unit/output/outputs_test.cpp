// Writing outputs safely (as root, in directories others can write) and
// rendering recordings that a crafted file can hold.
#include "output/outputs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "output/render.h"
#include "output/table.h"
#include "temp_dir.h"

namespace allocscope {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A symlink planted at the output's path (by another user, in a shared
// directory) is replaced; the file it points to is never opened.
TEST(WriteFileAtomically, ReplacesAPlantedSymlinkNotItsTarget) {
  TempDir dir;
  fs::path victim = dir.path / "victim", out = dir.path / "out.folded";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, out);
  ASSERT_EQ(::lchown(out.c_str(), 65534, 65534), 0) << "planted by another user (nobody)";
  ASSERT_TRUE(write_file_atomically(out.string(), "a;b 1\n"));
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_EQ(slurp(out), "a;b 1\n");
  size_t files = std::distance(fs::directory_iterator(dir.path), fs::directory_iterator{});
  EXPECT_EQ(files, 2u) << "a temporary file was left behind";
}

// A link of one's own (as /dev/stdout is root's) is followed, as a shell's
// redirection would follow it: the file it names gets the output.
TEST(WriteFileAtomically, FollowsItsOwnSymlink) {
  TempDir dir;
  fs::path file = dir.path / "real.folded", link = dir.path / "link.folded";
  std::ofstream(file) << "old";
  fs::create_symlink(file, link);
  ASSERT_TRUE(write_file_atomically(link.string(), "a;b 1\n"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(slurp(file), "a;b 1\n");
}

// A device or a FIFO is written in place: /dev/null (here through a link of
// our own, as -o /dev/stdout would be) stays the device it was, and a named
// pipe's reader gets the output.
TEST(WriteFileAtomically, DevicesAndFifosAreWrittenInPlace) {
  TempDir dir;
  fs::path to_null = dir.path / "null", fifo = dir.path / "fifo";
  fs::create_symlink("/dev/null", to_null);
  ASSERT_TRUE(write_file_atomically(to_null.string(), "discarded"));
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";
  EXPECT_TRUE(fs::is_symlink(to_null));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  ASSERT_TRUE(write_file_atomically(fifo.string(), "through the pipe"));
  reader.join();
  EXPECT_EQ(got, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_FALSE(write_file_atomically(dir.path.string(), "x")) << "a directory";
}

TEST(WriteFileAtomically, PrivateToRootWhenRunAsRoot) {
  TempDir dir;
  fs::path out = dir.path / "heap.pb.gz";
  ASSERT_TRUE(write_file_atomically(out.string(), "x"));
  struct stat st;
  ASSERT_EQ(stat(out.c_str(), &st), 0);
  if (geteuid() == 0) {
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  } else {
    mode_t mask = umask(0);
    umask(mask);
    EXPECT_EQ(st.st_mode & 0777, 0666u & ~mask);
  }
}

// --output-mode: exactly the bits asked for, umask and user aside, and
// through write_outputs too.
TEST(WriteFileAtomically, ModeGivenIsTheFilesMode) {
  TempDir dir;
  for (unsigned mode : {0644u, 0640u, 0400u}) {
    fs::path out = dir.path / ("m" + std::to_string(mode));
    ASSERT_TRUE(write_file_atomically(out.string(), "x", mode));
    struct stat st;
    ASSERT_EQ(stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode);
  }
  fs::path folded = dir.path / "w.folded";
  Recording r;
  ASSERT_TRUE(write_outputs(r, {{folded.string(), Format::Folded, 0604u}}, RenderOptions{}));
  struct stat st;
  ASSERT_EQ(stat(folded.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0604u);
}

TEST(WriteFileAtomically, UnwritableDirectoryIsAnErrorNamingThePath) {
  auto ok = write_file_atomically("/nonexistent-allocscope-dir/out.folded", "x");
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("/nonexistent-allocscope-dir/out.folded"), std::string::npos);
  EXPECT_EQ(ok.error().code, ENOENT);
}

// One failing output does not cost the others.
TEST(WriteOutputs, WritesEveryOutputItCanAndNamesTheOnesItCannot) {
  TempDir dir;
  Recording r;
  fs::path good = dir.path / "good.folded";
  auto ok = write_outputs(
      r, {{"/nonexistent-allocscope-dir/a.folded", Format::Folded, {}}, {good.string(), Format::Folded, {}}},
      RenderOptions{});
  ASSERT_FALSE(ok);
  EXPECT_NE(ok.error().message.find("a.folded"), std::string::npos);
  EXPECT_TRUE(fs::exists(good));
}

// A sample without frames is legal in pprof; names are bytes of any kind.
Recording crafted() {
  Recording r;
  r.rate = 1;
  r.functions = {{"bad\xff\xfename\n", "bad", ""}};
  r.locations = {{-1, 0x1000, {{0, 0}}}};
  r.samples = {RecSample{{}, 7, "no-frames", {1, 100, 1, 100, 1, 1}, {}},
               RecSample{{0}, 8, "bad\xc3", {2, 200, 0, 0, 2, 0}, {}}};
  return r;
}

TEST(Render, ControlCharactersCannotForgeLinesOfTheTable) {
  Recording r = crafted();
  r.functions[0].name = "evil\nallocscope: forged line\r\x1b[2J";
  RenderOptions o;
  o.top_by = TopBy::Stack;  // rows named by the whole stack, this frame included
  auto text = render(r, Format::Top, o);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find("\nallocscope: forged"), std::string::npos) << *text;
  EXPECT_EQ(text->find('\x1b'), std::string::npos);
  EXPECT_NE(text->find("evil\\x0aallocscope: forged line\\x0d\\x1b[2J"), std::string::npos) << *text;
}

TEST(Render, CraftedRecordingsRenderInEveryFormat) {
  Recording r = crafted();
  for (Format f : {Format::Folded, Format::Svg, Format::Pprof, Format::Top, Format::Json}) {
    for (TopBy by : {TopBy::Function, TopBy::Stack, TopBy::Process}) {
      RenderOptions o;
      o.top_by = by;
      auto text = render(r, f, o);
      ASSERT_TRUE(text) << format_name(f);
      EXPECT_FALSE(text->empty()) << format_name(f);
      if (f == Format::Json) {
        EXPECT_TRUE(nlohmann::json::accept(*text)) << "not valid JSON";
      }
    }
  }
}

// Under inuse, a site whose objects were all freed has nothing to show: the
// table and its JSON rows list only what is still live.
TEST(Render, RowsWithNothingOfTheMetricAreLeftOut) {
  Recording r;
  r.rate = 1;
  r.functions = {{"malloc", "malloc", ""}, {"freed_all", "freed_all", ""}, {"kept", "kept", ""}};
  r.locations = {{-1, 0x1000, {{0, 0}}}, {-1, 0x2000, {{1, 0}}}, {-1, 0x3000, {{2, 0}}}};
  StackTotals freed{.alloc_objects = 3, .alloc_bytes = 300, .samples = 3};
  StackTotals kept{.alloc_objects = 2,
                   .alloc_bytes = 200,
                   .live_objects = 2,
                   .live_bytes = 200,
                   .samples = 2,
                   .live_samples = 2};
  r.samples = {RecSample{{0, 1}, 7, "p", freed, {}}, RecSample{{0, 2}, 7, "p", kept, {}}};
  RenderOptions o;
  o.metric = Metric::InuseSpace;
  o.top = 10;
  for (TopBy by : {TopBy::Function, TopBy::Stack}) {
    o.top_by = by;
    auto text = render(r, Format::Top, o);
    ASSERT_TRUE(text);
    EXPECT_NE(text->find("kept"), std::string::npos) << *text;
    EXPECT_EQ(text->find("freed_all"), std::string::npos) << *text;
    auto doc = nlohmann::json::parse(*render(r, Format::Json, o));
    ASSERT_EQ(doc["rows"].size(), 1u) << doc["rows"].dump();
  }
  o.metric = Metric::AllocSpace;  // under alloc, both allocated
  o.top_by = TopBy::Function;
  auto doc = nlohmann::json::parse(*render(r, Format::Json, o));
  EXPECT_EQ(doc["rows"].size(), 2u) << doc["rows"].dump();
}

// A caller of other functions (main, _start) has no value of its own: no
// row of 0 B pads the table for it. The samples column counts the sampled
// allocations whatever the metric, the set its live column is a share of.
TEST(Render, CallersWithoutValuesOfTheirOwnPadNoRow) {
  Recording r;
  r.rate = 1;
  r.functions = {{"malloc", "malloc", ""}, {"site", "site", ""}, {"main", "main", ""}};
  r.locations = {{-1, 0x1000, {{0, 0}}}, {-1, 0x2000, {{1, 0}}}, {-1, 0x3000, {{2, 0}}}};
  StackTotals half{.alloc_objects = 4, .alloc_bytes = 400, .live_objects = 2, .live_bytes = 200};
  half.alloc_stats.exact_objects = 4;
  half.live_stats.exact_objects = 2;
  r.samples = {RecSample{{0, 1, 2}, 7, "p", half, {}}};
  RenderOptions o;
  o.metric = Metric::InuseSpace;
  auto text = render(r, Format::Top, o);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->find("  main\n"), std::string::npos) << *text;
  EXPECT_EQ(text->find(" 0 B "), std::string::npos) << *text;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line) && line.find("  site") == std::string::npos) {
  }
  ASSERT_NE(line.find("  site"), std::string::npos) << *text;
  EXPECT_NE(line.find(" 4 "), std::string::npos) << "the 4 sampled allocations, not the 2 live: " << line;
}

// --by code: a Python function (a frame of no file) where the stack has one,
// a Go function outside the runtime, else the direct caller.
TEST(Render, ByCodeIsTheInnermostFunctionOfTheProgramsCode) {
  Recording r;
  r.rate = 1;
  r.mappings = {{0x1000, 0x9000, 0, "/usr/bin/prog", ""}};
  r.functions = {{"malloc", "malloc", ""},     {"PyUnicode_New", "PyUnicode_New", ""},
                 {"parse", "", "app.py"},      {"main", "main", ""},
                 {"runtime.mallocgc", "", ""}, {"runtime.makeslice", "", ""},
                 {"main.site_slices", "", ""}, {"site_c", "site_c", ""}};
  for (uint32_t f = 0; f < r.functions.size(); ++f)
    r.locations.push_back({f == 2 ? -1 : 0, 0x1000 + f, {{f, 0}}});
  StackTotals t{.alloc_objects = 1, .alloc_bytes = 100, .samples = 1};
  r.samples = {RecSample{{0, 1, 2, 3}, 7, "python3", t, {}}, RecSample{{4, 5, 6, 3}, 8, "go", t, {}},
               RecSample{{0, 7, 3}, 9, "c", t, {}}, RecSample{{0}, 9, "c", t, {}},
               RecSample{{4, 5}, 8, "go", t, {}}};
  EXPECT_EQ(*code_function(r, r.samples[0]), 2u);
  EXPECT_EQ(*code_function(r, r.samples[1]), 6u);
  EXPECT_EQ(*code_function(r, r.samples[2]), 7u);
  EXPECT_FALSE(code_function(r, r.samples[3])) << "the allocator alone has no caller";
  EXPECT_EQ(*code_function(r, r.samples[4]), 5u) << "the runtime's own allocation: its direct caller";
  RenderOptions o;
  o.top_by = TopBy::Code;
  std::vector<std::string> names;
  for (const TableRow& row : table_rows(r, o)) names.push_back(row.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"main.site_slices", "parse", "runtime.makeslice", "site_c"}));
  EXPECT_EQ(nlohmann::json::parse(*render(r, Format::Json, o))["by"], "code");
}

// Fitted to a terminal's width (record --top): the interval goes first,
// then the other columns in turn; the estimate and the function stay, and
// no line is wider than asked.
TEST(Render, ATableFitsTheWidthItIsGiven) {
  Recording r;
  r.rate = 1;
  std::string long_name = "a_function_with_a_long_name_in_a_namespace::and_its_member(int, char const*)";
  r.functions = {{"malloc", "malloc", ""}, {long_name, long_name, ""}};
  r.locations = {{-1, 0x1000, {{0, 0}}}, {-1, 0x2000, {{1, 0}}}};
  StackTotals t{.alloc_objects = 4, .alloc_bytes = 400, .live_objects = 2, .live_bytes = 200, .samples = 4};
  r.samples = {RecSample{{0, 1}, 7, "p", t, {}}};
  RenderOptions o;
  auto wide = render(r, Format::Top, o);
  ASSERT_TRUE(wide);
  EXPECT_NE(wide->find("interval"), std::string::npos);
  EXPECT_NE(wide->find(long_name), std::string::npos) << "no limit: names whole";
  for (size_t width : {120, 80, 60, 40}) {
    o.width = width;
    auto text = render(r, Format::Top, o);
    ASSERT_TRUE(text);
    std::istringstream lines(*text);
    for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), width) << line;
    EXPECT_NE(text->find("estimate"), std::string::npos) << *text;
    EXPECT_NE(text->find("a_function_with"), std::string::npos) << *text;
    if (width <= 80) {
      EXPECT_EQ(text->find("interval  "), std::string::npos) << width << " columns:\n" << *text;
    }
  }
  o.width = 80;
  auto eighty = render(r, Format::Top, o);
  EXPECT_NE(eighty->find("share"), std::string::npos) << *eighty;
  EXPECT_NE(eighty->find("live"), std::string::npos) << *eighty;
}

}  // namespace
}  // namespace allocscope
