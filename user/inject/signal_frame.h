// The frame a hijacked thread leaves on its own stack, below its red zone,
// while allocscope runs a call in it: the return address of the call (a
// `mov $15,%rax; syscall` of the C library's: rt_sigreturn), then the
// kernel's ucontext holding the thread's own registers, signal mask and
// extended (XSAVE) state, then the call's data. Should allocscope die while
// the call runs, the call returns into rt_sigreturn and the kernel puts the
// thread back as it was: no tracer is needed for the target to go on.
// Pure: the bytes and where they go.
#pragma once

#include <sys/user.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace allocscope::inject {

struct FrameLayout {
  uint64_t frame = 0;          // the stack pointer at the call: its return address
  uint64_t context = 0;        // the ucontext rt_sigreturn reads (frame + 8)
  uint64_t fpstate = 0;        // the XSAVE image, 64-byte aligned as XRSTOR needs
  uint64_t data = 0;           // the call's data, 16-byte aligned
  uint64_t low = 0, high = 0;  // the bytes written: [low, high), all below the red zone
};

// Where a frame goes below stack pointer `sp`, for an XSAVE image of
// `xstate_bytes` and `data_bytes` of the call's data.
FrameLayout lay_out_frame(uint64_t sp, size_t xstate_bytes, size_t data_bytes);

// The bytes of [layout.low, layout.high): `resume` the registers
// rt_sigreturn restores, `xstate` as PTRACE_GETREGSET(NT_X86_XSTATE) gave
// it, `sigmask` the thread's blocked signals, `restorer` the address the
// call returns to, `data` the call's data.
std::vector<uint8_t> frame_bytes(const FrameLayout& layout, const user_regs_struct& resume,
                                 std::span<const uint8_t> xstate, uint64_t sigmask, uint64_t restorer,
                                 std::span<const uint8_t> data);

// The kernel's 64-bit ucontext, as rt_sigreturn reads it (arch/x86/include/
// uapi/asm/ucontext.h and sigcontext.h).
struct KernelSigcontext {
  uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags;
  uint16_t cs, gs, fs, ss;
  uint64_t err, trapno, oldmask, cr2, fpstate;
  uint64_t reserved[8];
};
static_assert(sizeof(KernelSigcontext) == 256);
struct KernelUcontext {
  uint64_t flags, link;
  uint64_t stack_sp;
  int32_t stack_flags, pad;
  uint64_t stack_size;
  KernelSigcontext mcontext;
  uint64_t sigmask;
};
static_assert(sizeof(KernelUcontext) == 304);

}  // namespace allocscope::inject
