// The kernel's unwind step (bpf/unwind.h) in userspace, reading memory
// through an UnwindMemory: the tests walk real stacks with the very code the
// BPF program runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "allocscope.h"

namespace allocscope {
struct UnwindMemory {
  virtual ~UnwindMemory() = default;
  // 8 bytes at `addr`, 0 on success.
  virtual int read(uint64_t addr, uint64_t* out) = 0;
};

// A table in the kernel's layout, in memory.
struct KernelTableView {
  const as_unwind_row* data;
  size_t size;
};
inline const as_unwind_row* kernel_table_at(void* table, uint32_t i) {
  auto* t = static_cast<const KernelTableView*>(table);
  return i < t->size ? t->data + i : nullptr;
}
}  // namespace allocscope

#define AS_READ_U64(mem, addr, out) (static_cast<::allocscope::UnwindMemory*>(mem)->read((addr), (out)))
#define AS_TABLE_AT(table, i) ::allocscope::kernel_table_at((table), (i))
#include "unwind.h"
