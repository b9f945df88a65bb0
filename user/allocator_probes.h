// Which allocator entry points of a C library to probe, and where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope.h"
#include "elf_file.h"
#include "result.h"

namespace allocscope {

const char* fn_name(int fn);  // enum as_fn -> "malloc", ...

struct ProbeTarget {
  as_fn fn;
  uint64_t vaddr = 0;   // the function's entry
  uint64_t offset = 0;  // file offset of the probe, what the kernel's uprobe takes
  uint64_t placed_at = 0;    // bytes after the entry where the probe sits
  bool emulated = false;     // the kernel emulates the probed instruction
  std::string instruction;   // the probed instruction, e.g. "push rbp"
};

// One target per entry point the symbols define; entry points that share an
// address (glibc's aligned_alloc and memalign) keep the first in enum order.
std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols);

// The targets of the C library at `path`, with file offsets. Probes go on
// the first instruction the kernel emulates (see probe_placement.h), except
// with `naive`: every probe on the entry.
Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path, bool naive = false);

}  // namespace allocscope
