// Where a Go program's heap is read: the runtime's allocation entry points
// in a Go file, and the route chosen among them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "probe/placement/allocator_probes.h"
#include "symbols/elf_file.h"

namespace allocscope {

// Go's allocator in a Go program of 1.18 or later, and, when they can be
// read, its runtime's own sampling and its frees; none in another file.
// (An EntryFinder: runtime/registry.cpp hands it to find_allocator_probes.)
std::vector<ProbeTarget> go_allocation_entries(const ElfFile& elf, const std::vector<ElfSymbol>& symbols);

// A Go program's heap is read one way, chosen among its targets (the others
// are erased): from its runtime's own sampling (alloc and in use, at
// MemProfileRate, no cost per call), or at every runtime.mallocgc call
// (alloc only, at any rate).
enum class GoHeapRoute { None, Runtime, Calls };
struct GoHeapChoice {
  GoHeapRoute route = GoHeapRoute::None;
  std::string why_calls;   // Calls: why not the runtime's sampling
  bool sets_rate = false;  // Runtime: the program's MemProfileRate is allocscope's to set (it is 0)
};
// Go's default MemProfileRate: the runtime's samples serve a session at it.
inline constexpr uint64_t kGoMemProfileRate = 512 * 1024;
// `calls`: asked for (--go-heap-calls); `off`: no Go probe (--no-go-heap);
// `may_set_rate`: a program whose linker took memory profiling out may have
// its MemProfileRate set to `rate` (a running process of its own, -p).
GoHeapChoice pick_go_heap(std::vector<ProbeTarget>& targets, uint64_t rate, bool calls, bool off,
                          bool may_set_rate = false);

}  // namespace allocscope
