// The in-process sampling probes an ELF file carries: SystemTap SDT notes
// (.note.stapsdt) of the otel_memory provider, fired by liballocscope-preload
// or by any program that samples its own allocations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "symbols/elf_file.h"

namespace allocscope {

// One stapsdt note: a probe site, its semaphore (0: none) and what it says.
struct UsdtNote {
  uint64_t pc = 0, semaphore = 0;
  std::string provider, name, args;
};

// Every stapsdt note of the file, in file order.
std::vector<UsdtNote> usdt_notes(const ElfFile& file);

// Whether the file at `path` (or `file`, opened) carries the
// otel_memory:alloc probe (Cause::NotElf: not an ELF file).
Result<bool> has_in_process_probes(const std::string& path);
bool has_in_process_probes(const ElfFile& file);

}  // namespace allocscope
