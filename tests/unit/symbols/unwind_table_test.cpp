// Unwind tables compiled from real binaries, walked with the very step the
// BPF program runs (bpf/unwind.h) over a real stack of this process: a call
// chain built without frame pointers (unwind_chain.c) captures its registers
// and the top of its stack as the kernel sees them at an allocator's return.
#include "symbols/unwind_table.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "host/proc_maps.h"
#include "host/process.h"
#include "self_rows.h"
#include "symbols/elf_file.h"
#include "symbols/signal_trampoline.h"
#include "symbols/stack_walk.h"
#include "symbols/symbolizer.h"
#include "symbols/unwind_step.h"

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

constexpr int kRip = 16, kRsp = 7, kRbp = 6;

struct Capture {
  std::vector<uint8_t> bytes;
  uint64_t sp = 0, ip = 0, bp = 0, stack_end = 0;
  std::vector<Mapping> maps;
};

Capture capture() {
  Capture c;
  auto maps = read_maps(getpid());
  EXPECT_TRUE(maps.has_value());
  c.maps = std::move(*maps);
  const Mapping* stack = find_mapping(c.maps, uint64_t(uintptr_t(__builtin_frame_address(0))));
  EXPECT_NE(stack, nullptr);
  c.bytes.resize(256 * 1024);
  unwind_chain_capture raw{};
  raw.stack = c.bytes.data();
  raw.capacity = c.bytes.size();
  raw.stack_top = stack ? stack->end : 0;
  unwind_chain_outer(&raw, 2);
  c.bytes.resize(raw.size);
  c.sp = raw.sp;
  c.ip = raw.regs[kRip];
  c.bp = raw.regs[kRbp];
  c.stack_end = raw.stack_top;
  EXPECT_EQ(raw.regs[kRsp], raw.sp);
  return c;
}

// Reads from the stack copy only, as the kernel reads the live stack.
struct CopyMemory : UnwindMemory {
  const Capture& c;
  size_t limit;
  explicit CopyMemory(const Capture& cap, size_t n = SIZE_MAX)
      : c(cap), limit(std::min(n, cap.bytes.size())) {}
  int read(uint64_t addr, uint64_t* out) override {
    if (addr < c.sp || addr - c.sp + 8 > limit) return -1;
    std::memcpy(out, c.bytes.data() + (addr - c.sp), 8);
    return 0;
  }
};

struct Walk {
  std::vector<uint64_t> ips;
  int stop = AS_STOP_NONE;
};

// The walk from the capture's frame (the kernel records frame 0, the
// allocator's return address, before anything else).
class Walker {
 public:
  explicit Walker(const std::vector<Mapping>& maps) : rows_(maps) {}
  bool& frame_pointers_only() { return rows_.frame_pointers_only; }

  Walk walk(const Capture& c, UnwindMemory& mem) {
    Walk w;
    if (!rows_.row(c.ip)) {
      w.stop = AS_STOP_BAD_IP;
      return w;
    }
    w.ips.push_back(c.ip);
    w.stop = continue_walk({c.ip, c.sp, c.bp, 0, 0}, c.stack_end, rows_, mem, w.ips, true);
    return w;
  }

 private:
  SelfRows rows_;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += "\n  " + n;
  return s;
}

ptrdiff_t index_of(const std::vector<std::string>& v, const std::string& name) {
  auto it = std::find(v.begin(), v.end(), name);
  return it == v.end() ? -1 : it - v.begin();
}

TEST(UnwindTable, WalksAChainWithoutFramePointersToTheOutermostFrame) {
  Capture c = capture();
  CopyMemory mem(c);
  Walk w = Walker(c.maps).walk(c, mem);
  auto n = function_names(w.ips);
  SCOPED_TRACE("frames:" + joined(n));
  ASSERT_GE(n.size(), 5u);
  EXPECT_EQ(n[0], "unwind_chain_inner");
  EXPECT_EQ(n[1], "unwind_chain_middle");
  EXPECT_EQ(n[2], "unwind_chain_outer");
  EXPECT_GT(index_of(n, "main"), 2);
  // _start's CFI marks the return address undefined: the stack is whole.
  EXPECT_EQ(w.stop, AS_STOP_COMPLETE);
  EXPECT_EQ(n.back(), "_start");
}

// A stack captured inside a signal handler: above it, the signal frame the
// kernel pushed, then the code the signal interrupted.
Capture in_handler;
extern "C" void capture_in_handler(int) { in_handler = capture(); }
extern "C" __attribute__((noinline)) void raise_into_handler() {
  raise(SIGUSR1);
  asm volatile("" ::: "memory");  // not a tail call: this frame stays
}

TEST(UnwindTable, WalksOutOfASignalHandlerIntoTheInterruptedCode) {
  struct sigaction sa {
  }, old{};
  sa.sa_handler = capture_in_handler;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  raise_into_handler();
  sigaction(SIGUSR1, &old, nullptr);
  CopyMemory mem(in_handler);
  Walk w = Walker(in_handler.maps).walk(in_handler, mem);
  auto n = function_names(w.ips);
  SCOPED_TRACE("frames:" + joined(n));
  ptrdiff_t handler = index_of(n, "capture_in_handler"), raiser = index_of(n, "raise_into_handler");
  EXPECT_GT(handler, 2);
  EXPECT_GT(raiser, handler + 1);  // the C library's trampoline and raise() between
  EXPECT_EQ(index_of(n, kSignalFrame), handler + 1);
  EXPECT_GT(index_of(n, "main"), raiser);
  EXPECT_EQ(w.stop, AS_STOP_COMPLETE);
}

TEST(UnwindTable, FramePointerRuleStopsAtTheFirstBadFrameInsteadOfGuessing) {
  // unwind_chain_middle keeps a number in rbp: the frame-pointer rule gives a
  // CFA below the stack pointer, which the step refuses. The walk ends
  // there with the one frame it knows, never with invented ones.
  Capture c = capture();
  CopyMemory mem(c);
  Walker fp(c.maps);
  fp.frame_pointers_only() = true;
  Walk w = fp.walk(c, mem);
  EXPECT_EQ(w.ips.size(), 1u);
  EXPECT_EQ(w.stop, AS_STOP_BAD_FRAME);
}

TEST(UnwindTable, UnreadableStackStopsTheWalk) {
  Capture c = capture();
  Walker walker(c.maps);
  CopyMemory full_mem(c);
  Walk full = walker.walk(c, full_mem);
  ASSERT_EQ(full.stop, AS_STOP_COMPLETE);
  // Less of the stack readable: a prefix of the stack, cut where a read
  // failed, unless what is readable still holds every frame.
  size_t cut = 0;
  for (size_t n : {0, 64, 1024, 4096, 16384}) {
    CopyMemory mem(c, n);
    Walk w = walker.walk(c, mem);
    SCOPED_TRACE(std::to_string(n) + " bytes readable, " + std::to_string(w.ips.size()) + " frames");
    ASSERT_LE(w.ips.size(), full.ips.size());
    EXPECT_TRUE(std::equal(w.ips.begin(), w.ips.end(), full.ips.begin()));
    EXPECT_EQ(w.stop, w.ips.size() < full.ips.size() ? AS_STOP_READ : AS_STOP_COMPLETE);
    cut += w.stop == AS_STOP_READ;
  }
  EXPECT_GE(cut, 3u);
}

TEST(UnwindTable, RowsAreSortedAndCoverTheCode) {
  auto t = build_unwind_table("/proc/self/exe");
  ASSERT_TRUE(t.has_value()) << t.error();
  EXPECT_EQ(t->source, UnwindTable::Source::EhFrame);
  EXPECT_GT(t->fdes, 10u);
  ASSERT_FALSE(t->rows.empty());
  for (size_t i = 1; i < t->rows.size(); ++i) ASSERT_LT(t->rows[i - 1].pc, t->rows[i].pc);
  // The address of a function of ours is covered by a row that follows
  // rsp at its entry: CFA = rsp + 8.
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  uint64_t fn = uint64_t(uintptr_t(&unwind_chain_outer));
  const Mapping* m = find_mapping(*maps, fn);
  ASSERT_NE(m, nullptr);
  const as_unwind_row* r = find_row(t->rows, m->file_offset(fn));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kind, AS_CFA_RSP);
  EXPECT_EQ(r->cfa_off, 1);
  EXPECT_EQ(find_row(t->rows, 0), t->rows.front().pc == 0 ? &t->rows.front() : nullptr);
}

TEST(UnwindTable, CLibraryHasPltAndOutermostRows) {
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  const Mapping* libc = find_c_library(*maps);
  ASSERT_NE(libc, nullptr);
  auto t = build_unwind_table(libc->path);
  ASSERT_TRUE(t.has_value()) << t.error();
  auto count = [&](uint8_t kind) {
    return std::count_if(t->rows.begin(), t->rows.end(),
                         [&](const as_unwind_row& r) { return r.kind == kind; });
  };
  EXPECT_GT(count(AS_CFA_PLT), 0);  // the .plt's expression
  EXPECT_GT(count(AS_ROW_END), 0);  // clone3 / thread start: undefined return address
  EXPECT_GT(count(AS_CFA_RBP), 0);  // functions that keep a frame pointer, code between FDEs
  // Rules elfutils could not express stay "no information" (cfa_off 0); no
  // other such row is left.
  EXPECT_EQ(std::count_if(t->rows.begin(), t->rows.end(),
                          [](const as_unwind_row& r) { return r.kind == AS_ROW_NONE && r.cfa_off != 0; }),
            0);
  // __restore_rt: the interrupted rsp, rip and rbp where Linux's x86-64
  // signal frame keeps them (struct ucontext's uc_mcontext at rsp + 40).
  auto sig = std::find_if(t->rows.begin(), t->rows.end(),
                          [](const as_unwind_row& r) { return r.kind == AS_CFA_SIGNAL; });
  ASSERT_NE(sig, t->rows.end());
  EXPECT_EQ(sig->cfa_off, 160 / 8);
  EXPECT_EQ(sig->rbp, 120 / 8);
}

// musl's __restore_rt has no FDE: found by its rt_sigreturn bytes, it gets
// the signal row from the nop before it, and the code after keeps its rule.
TEST(UnwindTable, MuslsSignalTrampolineIsFoundByItsCode) {
  const std::string musl = "/usr/lib/ld-musl-x86_64.so.1";
  auto f = ElfFile::open(musl);
  ASSERT_TRUE(f.has_value()) << "musl (Debian's package) is missing: " << f.error();
  auto t = build_unwind_table(*f);
  ASSERT_TRUE(t.has_value()) << t.error();
  auto sig = std::find_if(t->rows.begin(), t->rows.end(),
                          [](const as_unwind_row& r) { return r.kind == AS_CFA_SIGNAL; });
  ASSERT_NE(sig, t->rows.end());
  EXPECT_EQ(sig->cfa_off, 160 / 8);
  EXPECT_EQ(sig->rbp, 120 / 8);
  auto code = f->read(sig->pc, 10);
  ASSERT_TRUE(code.has_value());
  const std::vector<uint8_t> want = {0x90, 0x48, 0xc7, 0xc0, 0x0f,
                                     0x00, 0x00, 0x00, 0x0f, 0x05};  // nop; mov $15,%rax; syscall
  EXPECT_EQ(*code, want);
  ASSERT_NE(sig + 1, t->rows.end());
  EXPECT_EQ((sig + 1)->pc, sig->pc + 10);
  // The code after it, which no FDE describes either, holds musl's entry
  // point (_dlstart): the outermost frame.
  EXPECT_EQ((sig + 1)->kind, AS_ROW_END);
  EXPECT_EQ(std::count_if(t->rows.begin(), t->rows.end(),
                          [](const as_unwind_row& r) { return r.kind == AS_CFA_SIGNAL; }),
            1);
}

// V8's builtins, which node's file holds without CFI, lie between its
// FDEs: walked by frame pointers (the JIT code they call and return to
// keeps them), where a walk once stopped.
TEST(UnwindTable, CodeBetweenFdesIsWalkedByFramePointers) {
  auto f = ElfFile::open("/usr/bin/node");
  ASSERT_TRUE(f.has_value()) << "node (Debian's nodejs) is missing: " << f.error();
  auto t = build_unwind_table(*f);
  ASSERT_TRUE(t.has_value()) << t.error();
  std::vector<ElfSymbol> functions = f->functions();
  auto builtin = std::find_if(functions.begin(), functions.end(),
                              [](const ElfSymbol& s) { return s.name == "Builtins_CallApiCallback"; });
  ASSERT_NE(builtin, functions.end());
  auto offset = f->vaddr_to_offset(builtin->vaddr + builtin->size / 2);
  ASSERT_TRUE(offset.has_value()) << offset.error();
  const as_unwind_row* r = find_row(t->rows, *offset);
  ASSERT_NE(r, nullptr);
  as_unwind_row fp = as_frame_pointer_row();
  EXPECT_EQ(r->kind, fp.kind);
  EXPECT_EQ(r->cfa_off, fp.cfa_off);
  EXPECT_EQ(r->rbp, fp.rbp);
}

// The code is read a chunk at a time: a chunk boundary anywhere in the
// rt_sigreturn bytes (or anywhere else) finds the same offsets.
TEST(UnwindTable, SigreturnCodeIsFoundAcrossReadBoundaries) {
  auto f = ElfFile::open("/usr/lib/ld-musl-x86_64.so.1");
  ASSERT_TRUE(f.has_value()) << "musl (Debian's package) is missing: " << f.error();
  uint64_t end = 0;
  for (const auto& s : f->segments()) end = std::max(end, s.offset + s.size);
  std::vector<uint64_t> whole = sigreturn_code_offsets(*f, 0, end);
  ASSERT_FALSE(whole.empty());
  uint64_t hit = whole.front();
  ASSERT_GT(hit, 64u);
  for (uint64_t cut = 0; cut <= sizeof kSigreturnCode; ++cut) {
    uint64_t from = hit + cut - 64;  // the first read of 64 bytes ends `cut` bytes into the code
    auto got = sigreturn_code_offsets(*f, from, end, 64);
    ASSERT_FALSE(got.empty()) << "cut " << cut;
    EXPECT_EQ(got.front(), hit) << "cut " << cut;
  }
  EXPECT_EQ(sigreturn_code_offsets(*f, 0, end, 9), whole);
  EXPECT_EQ(sigreturn_code_offsets(*f, 0, end, 4096 + 3), whole);
  EXPECT_TRUE(sigreturn_code_offsets(*f, hit + 1, hit + sizeof kSigreturnCode + 1).empty());
}

TEST(UnwindTable, KernelLayoutFindsWhatTheRowsSay) {
  // The kernel's search (page index, then a binary search in the page) must
  // give the very row find_row gives, at every offset of real tables.
  auto maps = read_maps(getpid());
  ASSERT_TRUE(maps);
  const Mapping* libc = find_c_library(*maps);
  ASSERT_NE(libc, nullptr);
  std::mt19937_64 rng(11);
  for (const std::string& path : {std::string("/proc/self/exe"), libc->path, std::string(NO_CFI_BIN)}) {
    auto t = build_unwind_table(path);
    ASSERT_TRUE(t.has_value()) << t.error();
    std::vector<as_unwind_row> k = kernel_layout(t->rows);
    KernelTableView view{k.data(), k.size()};
    uint64_t end = (uint64_t(t->rows.back().pc) + 8192) * 2;
    for (int i = 0; i < 20000; ++i) {
      uint64_t off = i < 2000 && size_t(i) < t->rows.size() ? t->rows[size_t(i)].pc + (i & 1) : rng() % end;
      const as_unwind_row* want = find_row(t->rows, off);
      const as_unwind_row* got = as_table_find(&view, off);
      ASSERT_EQ(got == nullptr, want == nullptr) << path << " at " << off;
      if (want) {
        ASSERT_EQ(std::memcmp(got, want, sizeof *want), 0) << path << " at " << off;
      }
    }
  }
  KernelTableView empty{nullptr, 0};
  EXPECT_EQ(as_table_find(&empty, 0), nullptr);
}

TEST(UnwindTable, FileWithoutCallFrameInformationUsesFramePointers) {
  auto t = build_unwind_table(NO_CFI_BIN);
  ASSERT_TRUE(t.has_value()) << t.error();
  EXPECT_EQ(t->source, UnwindTable::Source::FramePointers);
  ASSERT_EQ(t->rows.size(), 1u);
  as_unwind_row fp = as_frame_pointer_row();
  EXPECT_EQ(std::memcmp(&t->rows[0], &fp, sizeof fp), 0);
}

TEST(UnwindTable, NotAnElfFile) {
  EXPECT_FALSE(build_unwind_table("/proc/self/status").has_value());
  EXPECT_FALSE(build_unwind_table("/nonexistent").has_value());
}

// Rules on a synthetic stack: memory is a little array of words.
struct Words : UnwindMemory {
  uint64_t base;
  std::vector<uint64_t> w;
  int read(uint64_t addr, uint64_t* out) override {
    if (addr < base || (addr - base) % 8 || (addr - base) / 8 >= w.size()) return -1;
    *out = w[(addr - base) / 8];
    return 0;
  }
};

TEST(UnwindStep, EachRuleKind) {
  Words m;
  m.base = 0x7000;
  m.w = {0x9999, 0x1111, 0x2222, 0x7010, 0x3333, 0, 0, 0};  // 0x7000..0x7038
  as_unwind_regs r{};
  // rsp-based, rbp saved at CFA - 16.
  r = {0x400000, 0x7000, 0x55, 0, 0};
  as_unwind_row rsp{0, 2, AS_CFA_RSP, -2};  // CFA 0x7010: ra at 0x7008, rbp at 0x7000
  EXPECT_EQ(as_unwind_step(&rsp, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.ip, 0x1111u);
  EXPECT_EQ(r.sp, 0x7010u);
  EXPECT_EQ(r.bp, 0x9999u);
  // rbp-based.
  r = {0x400000, 0x7000, 0x7008, 0, 0};
  as_unwind_row rbp{0, 2, AS_CFA_RBP, 0};  // CFA 0x7018: ra at 0x7010
  EXPECT_EQ(as_unwind_step(&rbp, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.ip, 0x2222u);
  EXPECT_EQ(r.bp, 0x7008u);  // unchanged
  // PLT: 8 more once (ip & 15) >= 11.
  r = {0x40000b, 0x7000, 0, 0, 0};
  as_unwind_row plt{0, 11, AS_CFA_PLT, 0};  // CFA 0x7010
  EXPECT_EQ(as_unwind_step(&plt, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.ip, 0x1111u);
  r = {0x40000a, 0x7000, 0, 0, 0};  // CFA 0x7008
  EXPECT_EQ(as_unwind_step(&plt, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.ip, 0x9999u);
  // A realigned frame: CFA = *(rbp - 8) = 0x7010.
  r = {0x400000, 0x7000, 0x7020, 0, 0};
  as_unwind_row deref{0, -1, AS_CFA_DEREF_RBP, 0};
  EXPECT_EQ(as_unwind_step(&deref, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.sp, 0x7010u);
  EXPECT_EQ(r.ip, 0x1111u);
  // A signal's trampoline: rsp at rsp + 24, rip next, rbp at rsp + 8; the
  // pc is then exact (no call before it).
  r = {0x400000, 0x7000, 0x55, 1, 0};
  as_unwind_row sig{0, 3, AS_CFA_SIGNAL, 1};
  EXPECT_EQ(as_unwind_step(&sig, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.sp, 0x7010u);
  EXPECT_EQ(r.ip, 0x3333u);
  EXPECT_EQ(r.bp, 0x1111u);
  EXPECT_EQ(r.bp_lost, 0u);
  EXPECT_EQ(r.ip_exact, 1u);
  EXPECT_EQ(as_unwind_step(&rsp, &r, 0x8000, &m), AS_STOP_NONE);
  EXPECT_EQ(r.ip_exact, 0u);           // a return address again
  r = {0x400000, 0x7018, 0x55, 0, 0};  // the saved rsp (0) is below this one
  EXPECT_EQ(as_unwind_step(&sig, &r, 0x8000, &m), AS_STOP_BAD_FRAME);
  // The outermost frame and code without information.
  as_unwind_row end{0, 0, AS_ROW_END, 0}, none{0, 0, AS_ROW_NONE, 0};
  EXPECT_EQ(as_unwind_step(&end, &r, 0x8000, &m), AS_STOP_COMPLETE);
  EXPECT_EQ(as_unwind_step(&none, &r, 0x8000, &m), AS_STOP_NO_INFO);
}

TEST(UnwindStep, RefusesFramesThatDoNotMoveUpTheStack) {
  Words m;
  m.base = 0x7000;
  m.w = {0x1111, 0x2222, 0x3333, 0x4444};
  as_unwind_regs r{0x400000, 0x7010, 0x7000, 0, 0};
  as_unwind_row fp = as_frame_pointer_row();  // CFA = rbp + 16 = 0x7010: not above sp
  EXPECT_EQ(as_unwind_step(&fp, &r, 0x8000, &m), AS_STOP_BAD_FRAME);
  r = {0x400000, 0x7000, 0x7010, 0, 0};  // CFA 0x7020 > stack end 0x7018
  EXPECT_EQ(as_unwind_step(&fp, &r, 0x7018, &m), AS_STOP_BAD_FRAME);
  r = {0x400000, 0x7000, 0x7003, 0, 0};  // misaligned CFA
  EXPECT_EQ(as_unwind_step(&fp, &r, 0x8000, &m), AS_STOP_BAD_FRAME);
  // rbp lost (an expression the table could not keep): a later rbp-based
  // frame cannot be followed.
  r = {0x400000, 0x7000, 0x7010, 1, 0};
  EXPECT_EQ(as_unwind_step(&fp, &r, 0x8000, &m), AS_STOP_BAD_FRAME);
  // Unreadable return address.
  r = {0x400000, 0x7000, 0x7100, 0, 0};
  EXPECT_EQ(as_unwind_step(&fp, &r, 0x8000, &m), AS_STOP_READ);
}

TEST(UnwindTable, GarbageRegistersNeverYieldFramesOutsideCode) {
  Capture c = capture();
  std::mt19937_64 rng(7);
  Walker walker(c.maps);
  for (int i = 0; i < 3000; ++i) {
    Capture g = c;
    g.bp = i % 2 ? rng() : c.sp + rng() % 4096;
    g.ip = i % 3 ? c.ip + rng() % 256 : rng();
    g.sp = c.sp + (rng() % 512) * 8;
    if (g.sp - c.sp < g.bytes.size()) g.bytes.erase(g.bytes.begin(), g.bytes.begin() + long(g.sp - c.sp));
    for (size_t k = 0; k < 64 && k < g.bytes.size(); ++k) g.bytes[rng() % g.bytes.size()] = uint8_t(rng());
    CopyMemory mem(g);
    Walk r = walker.walk(g, mem);
    ASSERT_LE(r.ips.size(), size_t(AS_MAX_FRAMES));
    for (size_t k = 0; k < r.ips.size(); ++k) {
      const Mapping* m = find_mapping(c.maps, k ? r.ips[k] - 1 : r.ips[k]);
      ASSERT_TRUE(m && m->executable) << "frame " << k << " at " << std::hex << r.ips[k];
    }
  }
}

}  // namespace
}  // namespace allocscope
