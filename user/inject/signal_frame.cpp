#include "inject/signal_frame.h"

#include <cstring>

namespace allocscope::inject {
namespace {

constexpr uint64_t kRedZone = 128;
constexpr uint64_t kUcFpXstate = 0x1, kUcSigcontextSs = 0x2, kUcStrictRestoreSs = 0x4;
// The software bytes of an XSAVE image in a signal frame
// (arch/x86/include/uapi/asm/sigcontext.h: struct _fpx_sw_bytes: magic1,
// extended_size, xfeatures, xstate_size), where ptrace's image holds XCR0
// (the features enabled: gdb's I386_LINUX_XSAVE_XCR0_OFFSET).
constexpr size_t kSwBytesOffset = 464, kSwBytes = 48;
constexpr uint32_t kFpXstateMagic1 = 0x46505853, kFpXstateMagic2 = 0x46505845;
constexpr size_t kMagic2Bytes = 4;
// Not SS_ONSTACK, SS_DISABLE nor 0: the kernel's do_sigaltstack refuses the
// restored alternate stack (EINVAL, which rt_sigreturn ignores), so the
// thread keeps the one it has, whatever that is.
constexpr int32_t kKeepAltStack = 3;

uint64_t align_down(uint64_t v, uint64_t a) { return v & ~(a - 1); }

void put(std::vector<uint8_t>& out, uint64_t offset, const void* p, size_t n) {
  std::memcpy(out.data() + offset, p, n);
}

// rt_sigreturn restores the features xfeatures names, from an image of
// xstate_size bytes followed by magic2; without them it restores none.
void put_xstate_software_bytes(std::vector<uint8_t>& out, uint64_t fp_offset,
                               std::span<const uint8_t> xstate) {
  if (xstate.size() < kSwBytesOffset + kSwBytes) return;
  uint64_t xcr0 = 0;
  std::memcpy(&xcr0, xstate.data() + kSwBytesOffset, sizeof xcr0);
  struct {
    uint32_t magic1, extended_size;
    uint64_t xfeatures;
    uint32_t xstate_size, padding[7];
  } sw{kFpXstateMagic1, uint32_t(xstate.size() + kMagic2Bytes), xcr0, uint32_t(xstate.size()), {}};
  static_assert(sizeof sw == kSwBytes);
  uint32_t magic2 = kFpXstateMagic2;
  put(out, fp_offset + kSwBytesOffset, &sw, sizeof sw);
  put(out, fp_offset + xstate.size(), &magic2, sizeof magic2);
}

KernelSigcontext sigcontext_of(const user_regs_struct& r, uint64_t fpstate) {
  KernelSigcontext s{};
  s.r8 = r.r8, s.r9 = r.r9, s.r10 = r.r10, s.r11 = r.r11, s.r12 = r.r12, s.r13 = r.r13, s.r14 = r.r14,
  s.r15 = r.r15;
  s.rdi = r.rdi, s.rsi = r.rsi, s.rbp = r.rbp, s.rbx = r.rbx, s.rdx = r.rdx, s.rax = r.rax, s.rcx = r.rcx;
  s.rsp = r.rsp, s.rip = r.rip, s.eflags = r.eflags;
  s.cs = static_cast<uint16_t>(r.cs);
  s.ss = static_cast<uint16_t>(r.ss);
  s.fpstate = fpstate;
  return s;
}

}  // namespace

FrameLayout lay_out_frame(uint64_t sp, size_t xstate_bytes, size_t data_bytes) {
  FrameLayout l;
  l.high = align_down(sp - kRedZone, 16);
  l.data = align_down(l.high - data_bytes, 16);
  l.fpstate = align_down(l.data - xstate_bytes - kMagic2Bytes, 64);
  l.context = align_down(l.fpstate - sizeof(KernelUcontext), 16);
  l.frame = l.context - 8;  // a call's entry: the stack 8 off 16-byte alignment
  l.low = l.frame;
  return l;
}

std::vector<uint8_t> frame_bytes(const FrameLayout& layout, const user_regs_struct& resume,
                                 std::span<const uint8_t> xstate, uint64_t sigmask, uint64_t restorer,
                                 std::span<const uint8_t> data) {
  std::vector<uint8_t> out(layout.high - layout.low, 0);
  put(out, 0, &restorer, sizeof restorer);
  KernelUcontext uc{};
  uc.flags = kUcSigcontextSs | kUcStrictRestoreSs;
  uc.stack_flags = kKeepAltStack;
  uc.sigmask = sigmask;
  uint64_t fp_offset = layout.fpstate - layout.low;
  if (!xstate.empty()) {
    uc.flags |= kUcFpXstate;
    put(out, fp_offset, xstate.data(), xstate.size());
    put_xstate_software_bytes(out, fp_offset, xstate);
  }
  uc.mcontext = sigcontext_of(resume, xstate.empty() ? 0 : layout.fpstate);
  put(out, layout.context - layout.low, &uc, sizeof uc);
  if (!data.empty()) put(out, layout.data - layout.low, data.data(), data.size());
  return out;
}

}  // namespace allocscope::inject
