// The kernel's unwind step (bpf/unwind.h) in userspace, reading memory
// through an UnwindMemory: the tests walk real stacks with the very code the
// BPF program runs.
#pragma once

#include <cstdint>

namespace allocscope {
struct UnwindMemory {
  virtual ~UnwindMemory() = default;
  // 8 bytes at `addr`, 0 on success.
  virtual int read(uint64_t addr, uint64_t* out) = 0;
};
}  // namespace allocscope

#define AS_READ_U64(mem, addr, out) (static_cast<::allocscope::UnwindMemory*>(mem)->read((addr), (out)))
#include "unwind.h"
