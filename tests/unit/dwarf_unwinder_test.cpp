// DWARF unwinding of a real stack snapshot of this process: a call chain
// built without frame pointers (unwind_chain.c) captures its registers and
// the top of its stack as the BPF side does, and DwarfUnwinder must walk it
// back to main through each binary's .eh_frame.
#include "dwarf_unwinder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "proc_maps.h"
#include "process.h"
#include "symbolizer.h"

extern "C" {
struct unwind_chain_capture {  // as in unwind_chain.c
  uint64_t regs[17];
  uint64_t sp;
  uint8_t* stack;
  uint64_t capacity;
  uint64_t stack_top;
  uint64_t size;
};
int unwind_chain_outer(unwind_chain_capture* c, int n);
}

namespace allocscope {
namespace {

struct Capture {
  std::vector<uint8_t> bytes;
  StackSnapshot snap;
  std::vector<Mapping> maps;

  // The snapshot cut to its first n bytes, as when the kernel copied less.
  StackSnapshot first_bytes(size_t n) const {
    StackSnapshot s = snap;
    s.stack = s.stack.first(std::min(n, s.stack.size()));
    return s;
  }
};

Capture capture(size_t capacity = 64 * 1024) {
  Capture c;
  auto maps = read_maps(getpid());
  EXPECT_TRUE(maps.has_value());
  c.maps = std::move(*maps);
  const Mapping* stack = find_mapping(c.maps, uint64_t(uintptr_t(__builtin_frame_address(0))));
  EXPECT_NE(stack, nullptr);
  c.bytes.resize(capacity);
  unwind_chain_capture raw{};
  raw.stack = c.bytes.data();
  raw.capacity = capacity;
  raw.stack_top = stack ? stack->end : 0;
  unwind_chain_outer(&raw, 2);
  c.bytes.resize(raw.size);
  std::copy(std::begin(raw.regs), std::end(raw.regs), c.snap.regs);
  c.snap.sp = raw.sp;
  c.snap.stack = c.bytes;
  return c;
}

std::vector<std::string> names(const std::vector<uint64_t>& ips) {
  Symbolizer sym;
  pid_t pid = getpid();
  std::vector<uint32_t> maps = sym.resolve(pid, ips);  // every ip - 1: frame 0 is getcontext's return address
  std::vector<std::string> out;
  for (size_t i = 0; i < ips.size(); ++i)
    out.push_back(sym.describe(maps[i], ips[i]).function);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v)
    s += "\n  " + n;
  return s;
}

ptrdiff_t index_of(const std::vector<std::string>& v, const std::string& name) {
  auto it = std::find(v.begin(), v.end(), name);
  return it == v.end() ? -1 : it - v.begin();
}

// What a frame-pointer walk (the kernel's user stack walk) makes of the same
// snapshot: follow saved rbp / return address pairs from rbp.
std::vector<uint64_t> frame_pointer_walk(const StackSnapshot& s, size_t max_frames) {
  std::vector<uint64_t> ips{s.regs[kRegRip]};
  uint64_t fp = s.regs[kRegRbp];
  auto load = [&](uint64_t addr, uint64_t* v) {
    if (addr < s.sp || addr - s.sp + 8 > s.stack.size())
      return false;
    std::memcpy(v, s.stack.data() + (addr - s.sp), 8);
    return true;
  };
  while (ips.size() < max_frames) {
    uint64_t next = 0, ret = 0;
    if (fp % 8 != 0 || !load(fp, &next) || !load(fp + 8, &ret) || ret == 0)
      break;
    ips.push_back(ret);
    if (next <= fp)
      break;
    fp = next;
  }
  return ips;
}

// Words for the unwinder to find where it looks for a return address: in a
// read-only segment of this binary (.rodata) and in writable memory (.data).
constexpr uint64_t kMarker = 0x4242;
constexpr std::array<uint64_t, 2048> marker_words() {
  std::array<uint64_t, 2048> a{};
  a.fill(kMarker);
  return a;
}
const std::array<uint64_t, 2048> kReadOnlyWords = marker_words();
std::array<uint64_t, 2048> g_writable_words = marker_words();

TEST(DwarfUnwinder, WalksAChainWithoutFramePointersBackToMain) {
  Capture c = capture();
  ASSERT_GT(c.snap.stack.size(), 0u);
  DwarfUnwinder unwinder;
  UnwindResult r = unwinder.unwind(getpid(), c.maps, c.snap);
  auto n = names(r.ips);
  SCOPED_TRACE("frames:" + joined(n) + "\nstop: " + r.stop_reason);

  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(r.ips[0], c.snap.regs[kRegRip]);
  EXPECT_EQ(n[0], "unwind_chain_inner");
  EXPECT_EQ(n[1], "unwind_chain_middle");
  EXPECT_EQ(n[2], "unwind_chain_outer");
  EXPECT_GT(index_of(n, "main"), 2);
  // The copy reaches the top of the stack: the unwind ends where _start's
  // CFI marks the return address undefined, not for want of bytes.
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.stop_reason, "");
  ASSERT_EQ(r.activation.size(), r.ips.size());
  EXPECT_EQ(r.activation[0], 1);
  EXPECT_TRUE(std::all_of(r.activation.begin() + 1, r.activation.end(), [](uint8_t a) { return a == 0; }));
}

TEST(DwarfUnwinder, FramePointerWalkLosesTheChain) {
  // Without frame pointers rbp is just a register (unwind_chain_middle keeps
  // a number in it), so following it finds nothing but the leaf: every
  // caller of the allocation is lost, which DWARF unwinding recovers.
  Capture c = capture();
  auto fp = names(frame_pointer_walk(c.snap, 127));
  SCOPED_TRACE("frame-pointer walk:" + joined(fp));
  EXPECT_EQ(fp[0], "unwind_chain_inner");
  EXPECT_EQ(index_of(fp, "unwind_chain_middle"), -1);
  EXPECT_EQ(index_of(fp, "unwind_chain_outer"), -1);
  EXPECT_EQ(index_of(fp, "main"), -1);

  DwarfUnwinder unwinder;
  auto dwarf = names(unwinder.unwind(getpid(), c.maps, c.snap).ips);
  EXPECT_NE(index_of(dwarf, "unwind_chain_middle"), -1);
  EXPECT_NE(index_of(dwarf, "unwind_chain_outer"), -1);
}

TEST(DwarfUnwinder, ShortStackCopyTruncates) {
  Capture c = capture();
  DwarfUnwinder unwinder;
  UnwindResult full = unwinder.unwind(getpid(), c.maps, c.snap);
  ASSERT_FALSE(full.truncated);

  // 64 bytes do not reach unwind_chain_inner's return address (its frame
  // holds a ucontext_t): only the captured ip is known.
  UnwindResult tiny = unwinder.unwind(getpid(), c.maps, c.first_bytes(64));
  EXPECT_TRUE(tiny.truncated);
  ASSERT_EQ(tiny.ips.size(), 1u);
  EXPECT_EQ(tiny.ips[0], full.ips[0]);
  EXPECT_NE(tiny.stop_reason.find("outside the 64-byte stack copy"), std::string::npos) << tiny.stop_reason;

  // A shorter copy gives a prefix of the full stack, flagged as truncated,
  // unless it still holds every frame (the copy also has the environment
  // and auxiliary vector above _start's frame).
  size_t truncations = 0;
  for (size_t n : {256, 1024, 2048, 4096, 8192}) {
    UnwindResult r = unwinder.unwind(getpid(), c.maps, c.first_bytes(n));
    SCOPED_TRACE(std::to_string(n) + " bytes, " + std::to_string(r.ips.size()) + " frames: " + r.stop_reason);
    ASSERT_LE(r.ips.size(), full.ips.size());
    EXPECT_TRUE(std::equal(r.ips.begin(), r.ips.end(), full.ips.begin()));
    EXPECT_EQ(r.truncated, r.ips.size() < full.ips.size());
    EXPECT_EQ(r.truncated, !r.stop_reason.empty());
    truncations += r.truncated;
  }
  EXPECT_GE(truncations, 2u);
}

TEST(DwarfUnwinder, FrameLimit) {
  Capture c = capture();
  DwarfUnwinder unwinder;
  UnwindResult r = unwinder.unwind(getpid(), c.maps, c.snap, 2);
  EXPECT_EQ(r.ips.size(), 2u);
  EXPECT_TRUE(r.truncated);
  EXPECT_NE(r.stop_reason.find("frame limit"), std::string::npos) << r.stop_reason;
  EXPECT_TRUE(unwinder.unwind(getpid(), c.maps, c.snap, 0).ips.empty());
}

TEST(DwarfUnwinder, CodeOutsideTheReportedBinariesStops) {
  Capture c = capture();
  std::string self = find_mapping(c.maps, c.snap.regs[kRegRip])->path;
  DwarfUnwinder unwinder;

  // Maps without this test binary: the pc is nowhere.
  std::vector<Mapping> without;
  for (const Mapping& m : c.maps)
    if (m.path != self)
      without.push_back(m);
  UnwindResult r = unwinder.unwind(getpid(), without, c.snap);
  EXPECT_TRUE(r.truncated);
  ASSERT_EQ(r.ips.size(), 1u);
  EXPECT_NE(r.stop_reason.find("is in no mapping"), std::string::npos) << r.stop_reason;

  // Its code as anonymous memory (as JIT code would be): no CFI; libdwfl's
  // frame-pointer fallback finds no frame in rbp either.
  std::vector<Mapping> anonymous = c.maps;
  for (Mapping& m : anonymous)
    if (m.path == self)
      m.path.clear(), m.inode = 0;
  r = unwinder.unwind(getpid(), anonymous, c.snap);
  EXPECT_TRUE(r.truncated);
  ASSERT_EQ(r.ips.size(), 1u);
  EXPECT_NE(r.stop_reason.find("not in an ELF file"), std::string::npos) << r.stop_reason;
}

TEST(DwarfUnwinder, ReadsReadOnlySegmentsFromTheFileAndNothingElse) {
  // A stack pointer outside the (empty) copy: the frame's return address
  // is read from the binary's file where the segment is read-only, which
  // holds the same bytes as memory, and refused where it is writable.
  Capture c = capture();
  DwarfUnwinder unwinder;
  StackSnapshot s = c.snap;
  s.stack = {};
  s.sp = s.regs[kRegRsp] = uint64_t(uintptr_t(kReadOnlyWords.data()));
  UnwindResult r = unwinder.unwind(getpid(), c.maps, s);
  ASSERT_EQ(r.ips.size(), 2u) << r.stop_reason;
  EXPECT_EQ(r.ips[1], kMarker);
  EXPECT_TRUE(r.truncated);
  EXPECT_NE(r.stop_reason.find("is in no mapping"), std::string::npos) << r.stop_reason;

  s.sp = s.regs[kRegRsp] = uint64_t(uintptr_t(g_writable_words.data()));
  r = unwinder.unwind(getpid(), c.maps, s);
  ASSERT_EQ(r.ips.size(), 1u);
  EXPECT_TRUE(r.truncated);
  EXPECT_NE(r.stop_reason.find("outside the 0-byte stack copy"), std::string::npos) << r.stop_reason;
}

TEST(DwarfUnwinder, SessionIsKeptUntilCodeMappingsChange) {
  Capture c = capture();
  DwarfUnwinder unwinder;
  UnwindResult first = unwinder.unwind(getpid(), c.maps, c.snap);
  EXPECT_EQ(unwinder.cached_processes(), 1u);
  size_t files = unwinder.cached_files();
  EXPECT_GE(files, 2u);  // this binary, libc, ...

  // A changed data mapping keeps the session; a new code mapping updates it
  // (here libc's text once more, far away: a second module of the same file).
  std::vector<Mapping> maps = c.maps;
  Mapping heap{.start = 0x1000, .end = 0x2000, .readable = true, .writable = true, .path = "[heap]"};
  maps.insert(maps.begin(), heap);
  EXPECT_EQ(unwinder.unwind(getpid(), maps, c.snap).ips, first.ips);
  const Mapping* libc = find_c_library(c.maps);
  ASSERT_NE(libc, nullptr);
  Mapping again = *libc;
  again.start += 0x100000000000;
  again.end += 0x100000000000;
  maps.push_back(again);
  EXPECT_EQ(unwinder.unwind(getpid(), maps, c.snap).ips, first.ips);
  EXPECT_EQ(unwinder.cached_files(), files);

  // Another process mapping the same files shares them (they are not even
  // reopened: this pid does not exist).
  EXPECT_EQ(unwinder.unwind(getpid() + 1000000, c.maps, c.snap).ips, first.ips);
  EXPECT_EQ(unwinder.cached_processes(), 2u);
  EXPECT_EQ(unwinder.cached_files(), files);
  unwinder.forget(getpid());
  unwinder.forget(getpid() + 1000000);
  EXPECT_EQ(unwinder.cached_processes(), 0u);
  EXPECT_EQ(unwinder.cached_files(), 0u);
}

TEST(DwarfUnwinder, GarbageDoesNotCrash) {
  Capture c = capture();
  DwarfUnwinder unwinder;
  std::mt19937_64 rng(7);
  std::vector<uint8_t> junk(16 * 1024);
  uint64_t libc_text = 0;
  for (const Mapping& m : c.maps)
    if (m.executable && is_c_library_name(m.path))
      libc_text = m.start;
  for (int i = 0; i < 2000; ++i) {
    StackSnapshot s;
    for (uint64_t& r : s.regs)
      r = rng();
    for (uint8_t& b : junk)
      b = uint8_t(rng());
    switch (i % 5) {
      case 0:  // all random
        break;
      case 1:  // a plausible pc and sp over random stack bytes
        s.regs[kRegRip] = c.snap.regs[kRegRip] + rng() % 64;
        s.regs[kRegRsp] = c.snap.sp;
        break;
      case 2:  // pcs anywhere in libc, stack pointers near the copy
        s.regs[kRegRip] = libc_text + rng() % 0x100000;
        s.regs[kRegRsp] = c.snap.sp + rng() % 64;
        s.regs[kRegRbp] = c.snap.sp + rng() % 4096;
        break;
      case 3:  // the real stack, random registers
        s.regs[kRegRip] = c.snap.regs[kRegRip];
        break;
      case 4:  // nothing copied
        s.regs[kRegRip] = 0;
        break;
    }
    s.sp = s.regs[kRegRsp];
    s.stack = i % 5 == 3 ? c.snap.stack : i % 5 == 4 ? std::span<const uint8_t>() : std::span<const uint8_t>(junk);
    if (i % 5 == 3)
      s.sp = c.snap.sp;
    UnwindResult r = unwinder.unwind(getpid(), c.maps, s, 64);
    ASSERT_LE(r.ips.size(), 64u);
    ASSERT_EQ(r.activation.size(), r.ips.size());
    ASSERT_EQ(r.truncated, !r.stop_reason.empty());
  }
}

TEST(DwarfUnwinder, Throughput) {
  Capture c = capture(16 * 1024);
  DwarfUnwinder unwinder;
  UnwindResult warm = unwinder.unwind(getpid(), c.maps, c.snap);
  ASSERT_GE(warm.ips.size(), 4u);
  size_t n = 0;
  auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  while (elapsed.count() < 0.3) {
    for (int i = 0; i < 100; ++i, ++n)
      unwinder.unwind(getpid(), c.maps, c.snap);
    elapsed = std::chrono::steady_clock::now() - start;
  }
  std::printf("[ dwarf    ] %.0f stacks/s of %zu frames (%zu-byte copy, warm caches)\n",
              double(n) / elapsed.count(), warm.ips.size(), c.snap.stack.size());
}

}  // namespace
}  // namespace allocscope
