// Where to plant a uprobe in a function: the kernel emulates a few x86
// instructions (push of a register, nops, relative branches and calls) in
// the trap itself, but must single-step every other one out of line, which
// costs far more (~0.5 us against ~9 us per call in this VM, where the
// single-step's debug trap exits to the hypervisor). So a free's probe goes
// on the first emulated instruction that every call doing real work executes
// with the pointer argument intact: for glibc's free, the `push %rbp` after
// the NULL check; for jemalloc's, the branch between its fast and slow paths.
// Decoded with capstone; pure logic on the code bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace allocscope {

// What the running kernel emulates of the instructions that depend on its
// version (kernel_features.h finds out); relative branches and calls are
// emulated by every kernel allocscope runs on.
struct Emulation {
  bool push = true;  // push %reg
  bool nops = true;  // nop, and the multi-byte 0f 1f nops (after Linux 6.12)
};

struct Placement {
  uint64_t offset = 0;      // bytes from the function's entry
  bool emulated = false;    // whether the kernel emulates the instruction there
  std::string instruction;  // e.g. "push rbp"
};

// The registers whose values the probe reads: the C ABI's first argument
// (free's pointer), or Go's register ABI's first three (mallocgc's size,
// mProf_Malloc's block and size, freeSpecial's record and block).
enum class ProbedArgument { CFirst, GoFirst };

// `code` holds the function's first bytes (a few hundred, so that branch
// targets can be followed), `address` the virtual address of code[0]. When
// `entry_only`, only offset 0 is considered (return probes need the return
// address at the top of the stack, as it is on entry).
// `emulation` is what the kernel emulates (default: the newest kernels).
Placement place_probe(std::span<const uint8_t> code, uint64_t address, bool entry_only,
                      const Emulation& emulation = {}, ProbedArgument argument = ProbedArgument::CFirst);

// Whether the kernel's uprobe emulates this instruction (no single-step).
bool kernel_emulates(std::span<const uint8_t> instruction, const Emulation& emulation = {});

}  // namespace allocscope
