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
  uint64_t vaddr = 0;
  uint64_t offset = 0;  // file offset, what the kernel's uprobe takes
};

// One target per entry point the symbols define; entry points that share an
// address (glibc's aligned_alloc and memalign) keep the first in enum order.
std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols);

// The targets of the C library at `path`, with file offsets.
Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path);

}  // namespace allocscope
