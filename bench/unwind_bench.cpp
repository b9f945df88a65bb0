// Userspace cost of DWARF unwinding: stacks per second on one core, warm
// caches. The stack is a real one of this process: 24 calls deep through
// functions built without frame pointers, snapshotted as the BPF side does
// (registers at a call's return, 16 KiB from the stack pointer up), then
// unwound again and again, as many samples of one hot call site would be.
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "dwarf_unwinder.h"
#include "process.h"

using namespace allocscope;

namespace {

struct Capture {
  StackSnapshot snap;
  std::vector<uint8_t> bytes;
  uint64_t stack_top = 0;
};

[[gnu::noipa]] void take(Capture* c) {
  ucontext_t uc;
  std::memset(&uc, 0, sizeof uc);
  getcontext(&uc);  // registers as just after a call returns, like a uretprobe
  const greg_t* g = uc.uc_mcontext.gregs;
  const int order[kDwarfRegCount] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
                                     REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                     REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (unsigned i = 0; i < kDwarfRegCount; ++i)
    c->snap.regs[i] = uint64_t(g[order[i]]);
  c->snap.sp = c->snap.regs[kRegRsp];
  size_t n = std::min<uint64_t>(c->bytes.size(), c->stack_top - c->snap.sp);
  std::memcpy(c->bytes.data(), reinterpret_cast<const void*>(c->snap.sp), n);
  c->bytes.resize(n);
  c->snap.stack = c->bytes;
}

// Four distinct functions in rotation, so the unwinder looks up several
// FDEs rather than one recursive function's.
[[gnu::noipa]] int level_a(Capture* c, int depth);
[[gnu::noipa]] int level_b(Capture* c, int depth) {
  volatile int pad[8] = {depth};
  int r = depth > 0 ? level_a(c, depth - 1) : (take(c), 0);
  return r + pad[0];
}
[[gnu::noipa]] int level_c(Capture* c, int depth) {
  volatile char pad[100] = {char(depth)};
  int r = level_b(c, depth - 1);
  return r + pad[0];
}
[[gnu::noipa]] int level_d(Capture* c, int depth) {
  volatile long pad[3] = {depth};
  int r = level_c(c, depth - 1);
  return r * 3 + int(pad[0]);
}
[[gnu::noipa]] int level_a(Capture* c, int depth) {
  volatile int pad[20] = {depth};
  int r = level_d(c, depth - 1);
  return r + pad[0];
}

}  // namespace

int main() {
  auto maps = read_maps(getpid());
  if (!maps) {
    std::fprintf(stderr, "%s\n", maps.error().c_str());
    return 1;
  }
  int local = 0;
  const Mapping* stack = find_mapping(*maps, uint64_t(uintptr_t(&local)));
  Capture c;
  c.bytes.resize(16 * 1024);
  c.stack_top = stack ? stack->end : 0;
  level_a(&c, 19);

  DwarfUnwinder unwinder;
  pid_t pid = getpid();
  auto t0 = std::chrono::steady_clock::now();
  UnwindResult first = unwinder.unwind(pid, *maps, c.snap);
  double cold_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  if (first.truncated)
    std::fprintf(stderr, "warning: unwind truncated: %s\n", first.stop_reason.c_str());

  size_t n = 0, frames = 0;
  auto start = std::chrono::steady_clock::now();
  std::chrono::duration<double> elapsed{};
  while (elapsed.count() < 2.0) {
    for (int i = 0; i < 1000; ++i, ++n)
      frames += unwinder.unwind(pid, *maps, c.snap).ips.size();
    elapsed = std::chrono::steady_clock::now() - start;
  }
  double per_second = double(n) / elapsed.count();
  std::printf("stack: %zu frames, %zu-byte copy, %zu mappings (%zu binaries)\n", first.ips.size(),
              c.snap.stack.size(), maps->size(), unwinder.cached_files());
  std::printf("first unwind (opens binaries, builds the session): %.0f us\n", cold_us);
  std::printf("warm: %.0f stacks/s, %.2f us/stack, %.0f ns/frame (target >= 20000 stacks/s: %s)\n",
              per_second, 1e6 / per_second, 1e9 * elapsed.count() / double(frames),
              per_second >= 20000 ? "met" : "MISSED");
  return 0;
}
