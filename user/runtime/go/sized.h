// Go 1.27's allocators specialized by size class (runtime.mallocgcTinySC2,
// mallocgcSmallNoScanSC5, mallocgcSmallScanNoHeaderSC3, ...): the compiler
// calls them directly for a small new(T) or make of a constant size, and
// mallocgc's table calls them for every size below 81 bytes. Each, or the
// slow path it calls, samples for the runtime's profile (profilealloc)
// itself, not through mallocgc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace allocscope {

class GoPclntab;

struct GoSizedAllocators {
  std::vector<uint64_t> entries;  // the allocators': what the probes of mallocgc's calls take too
  uint64_t start = 0, end = 0;    // their code and their slow paths', one run: what walks leave out
  // Why there is no such run (a linker that placed other code among them),
  // in words that finish "its heap in use is not measured: ".
  std::string not_one_run;
};

// runtime.mallocgc...SC<class>, or one of their slow paths
// (runtime.mallocgc...SlowPath). Pure.
bool is_go_sized_allocator(std::string_view function);
bool is_go_sized_slow_path(std::string_view function);

// The program's, by its function table: none before Go 1.27 (or built
// without them: race, asan).
GoSizedAllocators go_sized_allocators(const GoPclntab& table);

}  // namespace allocscope
