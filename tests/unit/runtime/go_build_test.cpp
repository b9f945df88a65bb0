// Go programs told by the build information their linker leaves: Debian's
// own Go programs (static and stripped, cgo, PIE), against what `go version`
// says of them; a C program is none; made-up headers are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/go/build.h"
#include "symbols/elf_file.h"

namespace allocscope {
namespace {

// What the Go toolchain itself says built the file ("go1.19.8").
std::string go_version_of(const std::string& path) {
  std::string out;
  if (FILE* p = popen(("go version " + path + " 2>/dev/null").c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  size_t at = out.find(": ");
  return at == std::string::npos ? "" : out.substr(at + 2, out.find_first_of(" \n", at + 2) - at - 2);
}

std::optional<GoBuild> build_of(const std::string& path) {
  auto elf = ElfFile::open(path);
  if (!elf) ADD_FAILURE() << elf.error().message;
  return elf ? go_build(*elf) : std::nullopt;
}

// gofmt: static and stripped; go: cgo; prometheus: built by Debian's
// packaging, dynamically linked.
TEST(GoBuild, DebiansGoProgramsAreToldWithTheirToolchain) {
  for (std::string path : {"/usr/lib/go/bin/gofmt", "/usr/lib/go/bin/go", "/usr/bin/prometheus"}) {
    SCOPED_TRACE(path);
    std::string truth = go_version_of(path);
    ASSERT_TRUE(truth.starts_with("go1.")) << "go version said " << truth;
    auto build = build_of(path);
    ASSERT_TRUE(build);
    EXPECT_EQ(build->version, truth);
  }
}

TEST(GoBuild, ACProgramIsNotGo) { EXPECT_FALSE(build_of("/proc/self/exe")); }

std::vector<uint8_t> header(uint8_t flags, const std::string& version) {
  std::string s = std::string("\xff Go buildinf:", 14) + char(8) + char(flags) + std::string(16, '\0');
  s += char(version.size()) + version;
  return {s.begin(), s.end()};
}

TEST(GoBuild, HeadersAreReadOnlyAsFarAsTheySay) {
  auto b = parse_go_buildinfo(header(2, "go1.24.1"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->version, "go1.24.1");
  auto old = parse_go_buildinfo(header(0, ""));  // Go 1.17: pointers, not strings
  ASSERT_TRUE(old);
  EXPECT_EQ(old->version, "");
  std::vector<uint8_t> cut = header(2, "go1.24.1");
  cut.resize(cut.size() - 3);
  EXPECT_FALSE(parse_go_buildinfo(cut));  // a length past the end
  std::vector<uint8_t> wrong = header(2, "go1.24.1");
  wrong[1] = 'X';
  EXPECT_FALSE(parse_go_buildinfo(wrong));
  EXPECT_FALSE(parse_go_buildinfo(header(2, std::string(100, 'g'))));  // longer than any version
  EXPECT_FALSE(parse_go_buildinfo({}));
}

}  // namespace
}  // namespace allocscope
