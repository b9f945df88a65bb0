// /proc/PID/maps parsing, address lookup and C library detection.
#include "host/proc_maps.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace allocscope {
namespace {

// A realistic map, deliberately out of address order; anonymous lines come
// both with and without the trailing space older kernels print.
constexpr const char* kMaps =
    "7f1c2a428000-7f1c2a5bd000 r-xp 00028000 fd:01 2097261                    "
    "/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "55d0c8a00000-55d0c8a02000 r--p 00000000 fd:01 1048602                    /usr/bin/cat\n"
    "55d0c8a02000-55d0c8a07000 r-xp 00002000 fd:01 1048602                    /usr/bin/cat\n"
    "55d0c9e8f000-55d0c9eb0000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f1c2a400000-7f1c2a428000 r--p 00000000 fd:01 2097261                    "
    "/usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f1c2a61b000-7f1c2a628000 rw-p 00000000 00:00 0 \n"
    "7f1c2a700000-7f1c2a710000 r-xp 00001000 103:0a 393222                   /opt/My Apps/lib plugin.so\n"
    "7f1c2a800000-7f1c2a801000 rw-s 00000000 00:05 77                         /tmp/old.so (deleted)\n"
    "7f1c2a900000-7f1c2a901000 rw-p 00000000 00:00 0\n"
    "7ffd5d2f0000-7ffd5d311000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffd5d3b2000-7ffd5d3b4000 r-xp 00000000 00:00 0                          [vdso]\n"
    // The last line has no final newline.
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

TEST(ParseMaps, ParsesEveryFieldAndSortsByStart) {
  std::vector<Mapping> maps = parse_maps(kMaps);
  ASSERT_EQ(maps.size(), 12u);
  for (size_t i = 1; i < maps.size(); ++i) EXPECT_LT(maps[i - 1].start, maps[i].start);

  const Mapping& text = maps[1];  // /usr/bin/cat r-xp
  EXPECT_EQ(text.start, 0x55d0c8a02000u);
  EXPECT_EQ(text.end, 0x55d0c8a07000u);
  EXPECT_EQ(text.offset, 0x2000u);
  EXPECT_EQ(text.dev_major, 0xfdu);  // device numbers are hex
  EXPECT_EQ(text.dev_minor, 1u);
  EXPECT_EQ(text.inode, 1048602u);  // the inode is decimal
  EXPECT_TRUE(text.readable);
  EXPECT_FALSE(text.writable);
  EXPECT_TRUE(text.executable);
  EXPECT_FALSE(text.deleted);
  EXPECT_EQ(text.path, "/usr/bin/cat");
  EXPECT_TRUE(text.is_file());

  const Mapping& libc_text = maps[4];
  EXPECT_EQ(libc_text.start, 0x7f1c2a428000u);
  EXPECT_EQ(libc_text.offset, 0x28000u);
  EXPECT_EQ(libc_text.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

  const Mapping& vsyscall = maps.back();
  EXPECT_EQ(vsyscall.start, 0xffffffffff600000u);
  EXPECT_EQ(vsyscall.end, 0xffffffffff601000u);
  EXPECT_FALSE(vsyscall.readable);
  EXPECT_TRUE(vsyscall.executable);
  EXPECT_EQ(vsyscall.path, "[vsyscall]");
}

TEST(ParseMaps, PseudoAndAnonymousMappingsAreNotFiles) {
  std::vector<Mapping> maps = parse_maps(kMaps);
  ASSERT_EQ(maps.size(), 12u);
  EXPECT_EQ(maps[2].path, "[heap]");
  EXPECT_TRUE(maps[2].writable);
  EXPECT_FALSE(maps[2].is_file());
  EXPECT_EQ(maps[5].path, "");  // anonymous, trailing space
  EXPECT_FALSE(maps[5].is_file());
  EXPECT_EQ(maps[8].path, "");  // anonymous, no trailing space
  EXPECT_EQ(maps[9].path, "[stack]");
  EXPECT_EQ(maps[10].path, "[vdso]");
  EXPECT_TRUE(maps[10].executable);
  EXPECT_FALSE(maps[10].is_file());
}

TEST(ParseMaps, PathWithSpacesAndDeletedSuffix) {
  std::vector<Mapping> maps = parse_maps(kMaps);
  ASSERT_EQ(maps.size(), 12u);
  const Mapping& plugin = maps[6];
  EXPECT_EQ(plugin.path, "/opt/My Apps/lib plugin.so");
  EXPECT_EQ(plugin.dev_major, 0x103u);
  EXPECT_EQ(plugin.dev_minor, 0xau);
  EXPECT_FALSE(plugin.deleted);

  const Mapping& old = maps[7];
  EXPECT_EQ(old.path, "/tmp/old.so");  // the marker is not part of the name
  EXPECT_TRUE(old.deleted);
  EXPECT_TRUE(old.is_file());
  EXPECT_TRUE(old.writable);
}

TEST(ParseMaps, SkipsMalformedLines) {
  std::vector<Mapping> maps = parse_maps(
      "\n"
      "garbage\n"
      "zzzz-1000 r-xp 00000000 00:00 0 /bad/range\n"
      "1000-2000 r-xp 00000000 0000 0 /no/colon/in/dev\n"
      "1000-2000 r- 00000000 00:00 0 /short/perms\n"
      "1000-2000 r-xp 0000zz00 00:00 0 /bad/offset\n"
      "1000-2000 r-xp 00000000 00:00 12a /bad/inode\n"
      "3000-4000 r-xp 00000000 08:02 42 /good\n");
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].start, 0x3000u);
  EXPECT_EQ(maps[0].path, "/good");
  EXPECT_TRUE(parse_maps("").empty());
}

TEST(FindMapping, StartInclusiveEndExclusiveGapsMiss) {
  std::vector<Mapping> maps = parse_maps(
      "2000-3000 r--p 00000000 08:01 1 /a\n"
      "3000-5000 r-xp 00001000 08:01 1 /a\n"  // adjacent to the one before
      "8000-9000 rw-p 00000000 00:00 0\n");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(find_mapping(maps, 0), nullptr);
  EXPECT_EQ(find_mapping(maps, 0x1fff), nullptr);
  EXPECT_EQ(find_mapping(maps, 0x2000), &maps[0]);
  EXPECT_EQ(find_mapping(maps, 0x2fff), &maps[0]);
  EXPECT_EQ(find_mapping(maps, 0x3000), &maps[1]);
  EXPECT_EQ(find_mapping(maps, 0x4fff), &maps[1]);
  EXPECT_EQ(find_mapping(maps, 0x5000), nullptr);  // gap
  EXPECT_EQ(find_mapping(maps, 0x7fff), nullptr);
  EXPECT_EQ(find_mapping(maps, 0x8000), &maps[2]);
  EXPECT_EQ(find_mapping(maps, 0x9000), nullptr);
  EXPECT_EQ(find_mapping(maps, UINT64_MAX), nullptr);
  EXPECT_EQ(find_mapping({}, 0x2000), nullptr);
}

TEST(FindMapping, FileOffsetOfAnAddress) {
  std::vector<Mapping> maps = parse_maps(kMaps);
  const Mapping* m = find_mapping(maps, 0x7f1c2a428000 + 0x1234);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(m->file_offset(0x7f1c2a428000 + 0x1234), 0x28000u + 0x1234);
  EXPECT_EQ(m->file_offset(m->start), m->offset);
}

TEST(CLibraryName, GlibcAndMuslYesLookAlikesNo) {
  for (const char* yes : {"libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/lib/libc-2.31.so",
                          "libc.musl-x86_64.so.1", "/lib/ld-musl-x86_64.so.1", "/lib/ld-musl-aarch64.so.1"})
    EXPECT_TRUE(is_c_library_name(yes)) << yes;
  for (const char* no : {"libcap.so.2", "libcrypt.so.1", "libc++.so.1", "/usr/lib/libcurl.so.4", "mylibc.so",
                         "/opt/mylibc.so.6", "/usr/lib/libc.so.6.d/other.so", "libc-client.so.2007e", "",
                         "/lib/ld-linux-x86-64.so.2", "[heap]"})
    EXPECT_FALSE(is_c_library_name(no)) << no;
}

TEST(CLibrary, PicksTheExecutableMappingOfLibc) {
  std::vector<Mapping> maps = parse_maps(
      "1000-2000 r--p 00000000 08:01 10 /usr/lib/libcrypt.so.1\n"
      "2000-3000 r-xp 00001000 08:01 10 /usr/lib/libcrypt.so.1\n"
      "a000-b000 r--p 00000000 08:01 20 /usr/lib/libc.so.6\n"
      "b000-c000 r-xp 00001000 08:01 20 /usr/lib/libc.so.6\n"
      "c000-d000 r--p 00002000 08:01 20 /usr/lib/libc.so.6\n"
      "5000-6000 r-xp 00000000 00:00 0 libc.so.6\n");  // not a file: a name on an anonymous mapping
  const Mapping* libc = find_c_library(maps);
  ASSERT_NE(libc, nullptr);
  EXPECT_EQ(libc->start, 0xb000u);
  EXPECT_EQ(libc->path, "/usr/lib/libc.so.6");
  EXPECT_TRUE(libc->executable);
}

TEST(CLibrary, DeletedLibcStillFoundAndStaticBinaryHasNone) {
  std::vector<Mapping> upgraded =
      parse_maps("b000-c000 r-xp 00001000 08:01 20 /usr/lib/libc.so.6 (deleted)\n");
  const Mapping* libc = find_c_library(upgraded);
  ASSERT_NE(libc, nullptr);
  EXPECT_TRUE(libc->deleted);
  EXPECT_EQ(libc->path, "/usr/lib/libc.so.6");

  std::vector<Mapping> static_binary = parse_maps(
      "400000-401000 r--p 00000000 08:01 5 /usr/bin/static\n"
      "401000-480000 r-xp 00001000 08:01 5 /usr/bin/static\n"
      "7ffd5d3b2000-7ffd5d3b4000 r-xp 00000000 00:00 0 [vdso]\n");
  EXPECT_EQ(find_c_library(static_binary), nullptr);
}

}  // namespace
}  // namespace allocscope
