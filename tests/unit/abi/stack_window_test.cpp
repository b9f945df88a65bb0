// The BPF walk's stack window (bpf/stack_window.h), over memory with a page
// that was never touched: a main thread's stack, whose last frames lie just
// below the kernel's random gap under the start-up strings.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "allocscope.h"

namespace {

// A stack of `pages` pages from `base`, one of them missing: a copy that
// touches it fails whole, as bpf_probe_read_user's does.
struct FakeStack {
  uint64_t base = 0x7ffd00000000;
  std::vector<uint64_t> words;
  uint64_t missing_page = 0;
  int copies = 0, failed = 0;
  uint64_t end() const { return base + words.size() * 8; }
  int read(void* dst, uint64_t len, uint64_t addr) {
    ++copies;
    if (addr < base || addr + len > end() || len == 0 ||
        (addr < missing_page + 4096 && addr + len > missing_page)) {
      ++failed;  // a page fault turned away: the costly case
      return -14;
    }
    std::memcpy(dst, reinterpret_cast<const uint8_t*>(words.data()) + (addr - base), len);
    return 0;
  }
};
FakeStack* g_stack = nullptr;

}  // namespace

#define AS_READ_USER(dst, len, addr) g_stack->read((dst), (len), (addr))
#include "stack_window.h"

namespace {

// A walk's reads from a page below the missing one up to its edge: each word
// right, a copy a page, and none failed (a window never reaches into a page
// the walk does not read).
TEST(StackWindow, AMissingPageAboveCostsNoFailedCopy) {
  FakeStack stack;
  stack.words.resize(4 * 4096 / 8);
  for (size_t i = 0; i < stack.words.size(); ++i) stack.words[i] = 0x1000 + i;
  stack.missing_page = stack.base + 2 * 4096;
  g_stack = &stack;
  stack_window w{};
  w.limit = stack.end();
  uint64_t from = stack.base + 4096 + 512;  // the walk's frames: up to the gap
  for (uint64_t addr = from; addr < stack.missing_page; addr += 8) {
    uint64_t got = 0;
    ASSERT_EQ(as_window_read(&w, addr, &got), 0) << std::hex << addr;
    EXPECT_EQ(got, 0x1000 + (addr - stack.base) / 8) << std::hex << addr;
  }
  EXPECT_EQ(stack.copies, 1) << "the rest of one page";
  EXPECT_EQ(stack.failed, 0);
  // A word in the missing page is unreadable, and says so, in one copy.
  uint64_t got = 0;
  EXPECT_NE(as_window_read(&w, stack.missing_page + 8, &got), 0);
  EXPECT_EQ(stack.failed, 1);
  // The page above it reads again.
  ASSERT_EQ(as_window_read(&w, stack.missing_page + 4096, &got), 0);
  EXPECT_EQ(got, 0x1000 + (3 * 4096) / 8);
}

// Without a missing page the window is copied a page's worth at a time, and
// stops at the stack's end.
TEST(StackWindow, ReadsUpToTheStacksEnd) {
  FakeStack stack;
  stack.words.resize(3 * 4096 / 8);
  for (size_t i = 0; i < stack.words.size(); ++i) stack.words[i] = i;
  stack.missing_page = 0;
  g_stack = &stack;
  stack_window w{};
  w.limit = stack.end();
  for (uint64_t addr = stack.base + 16; addr < stack.end(); addr += 8) {
    uint64_t got = 0;
    ASSERT_EQ(as_window_read(&w, addr, &got), 0);
    EXPECT_EQ(got, (addr - stack.base) / 8);
  }
  EXPECT_EQ(stack.copies, 3) << "3 pages less 16 bytes: three windows";
  EXPECT_EQ(stack.failed, 0);
  uint64_t got = 0;
  EXPECT_NE(as_window_read(&w, stack.end(), &got), 0) << "past the end";
}

// A stack whose end is not a page's (a guessed end): the words of its last
// page are read alone, and right; so is an unaligned word (never in a walk
// of aligned frames).
TEST(StackWindow, ReadsAPageCutByTheEndWordByWord) {
  FakeStack stack;
  stack.words.resize(4096 / 8 + 10);
  for (size_t i = 0; i < stack.words.size(); ++i) stack.words[i] = i;
  g_stack = &stack;
  stack_window w{};
  w.limit = stack.end();
  uint64_t got = 0;
  ASSERT_EQ(as_window_read(&w, stack.base + 4096 + 8, &got), 0);
  EXPECT_EQ(got, 4096 / 8 + 1);
  EXPECT_EQ(w.len, 0u) << "read alone";
  ASSERT_EQ(as_window_read(&w, stack.base + 16, &got), 0);
  EXPECT_EQ(got, 2u);
  EXPECT_EQ(w.len, 4096u - 16) << "the rest of the first page";
  ASSERT_EQ(as_window_read(&w, stack.base + 4, &got), 0);
  EXPECT_EQ(w.len, 0u) << "unaligned: read alone";
  EXPECT_EQ(stack.failed, 0);
}

}  // namespace
