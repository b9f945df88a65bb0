// Reading and writing another process's memory (process_vm_readv: the caller needs the
// right to trace it, which root has).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>

namespace allocscope {

// Fills `out` from process `pid` at `addr`; false unless every byte was read.
bool read_process_memory(pid_t pid, uint64_t addr, std::span<uint8_t> out);
// Writes `in` into process `pid` at `addr` (writable memory only: the
// kernel refuses what the process could not write itself); false unless
// every byte was written.
bool write_process_memory(pid_t pid, uint64_t addr, std::span<const uint8_t> in);

}  // namespace allocscope
