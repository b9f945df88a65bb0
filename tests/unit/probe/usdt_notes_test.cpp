// The preload library's probe sites, read from the built library: each
// otel_memory probe has its allocscope twin with the same arguments, on a
// 10-byte nop aligned to 16 bytes (the kernel rewrites a nop within a page).
#include "probe/placement/usdt_notes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <sstream>

namespace allocscope {
namespace {

const std::vector<uint8_t> kNop10 = {0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00};

size_t argument_count(const std::string& args) {
  std::istringstream in(args);
  return size_t(std::distance(std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()));
}

const UsdtNote* find(const std::vector<UsdtNote>& notes, const std::string& provider,
                     const std::string& name) {
  auto it = std::find_if(notes.begin(), notes.end(),
                         [&](const UsdtNote& n) { return n.provider == provider && n.name == name; });
  return it == notes.end() ? nullptr : &*it;
}

TEST(UsdtNotes, EachPreloadProbeHasATwinOnAnAlignedTenByteNop) {
  auto file = ElfFile::open(PRELOAD_LIB);
  ASSERT_TRUE(file) << file.error().message;
  std::vector<UsdtNote> notes = usdt_notes(*file);
  EXPECT_TRUE(has_in_process_probes(*file));
  for (const char* name : {"alloc", "free"}) {
    const UsdtNote* otel = find(notes, "otel_memory", name);
    const UsdtNote* twin = find(notes, "allocscope", name);
    ASSERT_NE(otel, nullptr) << name;
    ASSERT_NE(twin, nullptr) << name;
    EXPECT_EQ(argument_count(twin->args), argument_count(otel->args)) << twin->args << " / " << otel->args;
    EXPECT_EQ(twin->pc % 16, 0u) << name;
    EXPECT_NE(twin->semaphore, 0u) << name;
    EXPECT_NE(twin->semaphore, otel->semaphore) << name;
    auto at = file->vaddr_to_offset(twin->pc);
    ASSERT_TRUE(at) << at.error().message;
    auto bytes = file->read(*at, kNop10.size());
    ASSERT_TRUE(bytes) << bytes.error().message;
    EXPECT_EQ(*bytes, kNop10) << name;
    auto one = file->read(*file->vaddr_to_offset(otel->pc), 1);
    ASSERT_TRUE(one);
    EXPECT_EQ((*one)[0], 0x90) << name << ": otel_memory's site is sdt.h's one-byte nop";
  }
}

}  // namespace
}  // namespace allocscope
