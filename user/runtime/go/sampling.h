// What it takes to read a Go program's own heap sampling from outside: its
// runtime samples blocks at MemProfileRate (runtime.mProf_Malloc) and its
// sweeper frees their records when the blocks are collected
// (runtime.freeSpecial). Found by symbol or, stripped, by the pclntab; the
// layouts of those calls are per Go release.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "symbols/elf_file.h"

namespace allocscope {

class GoPclntab;

// How one Go release passes and keeps what the probes read.
struct GoProfileLayout {
  bool mp_first = false;    // mProf_Malloc(mp, p, size) (1.23 on), else (p, size)
  uint8_t kind = 0;         // _KindSpecialProfile
  uint8_t kind_offset = 0;  // of special.kind (after next and offset)
};

// The layout of the release named by a build version ("go1.19.8"); nullopt
// for a release allocscope has not read (before 1.18, after 1.24). Pure.
std::optional<GoProfileLayout> go_profile_layout(std::string_view version);

// Where the runtime keeps its sampling, in the file's virtual addresses.
struct GoRuntimeSampling {
  uint64_t mprof_malloc = 0, free_special = 0;  // entries
  uint64_t rate = 0;                            // runtime.MemProfileRate
  // runtime.disableMemoryProfiling, the linker's switch that the runtime's
  // start reads to set the rate to 0; 0: not found.
  uint64_t linked_out_switch = 0;
  uint64_t mallocgc = 0, mallocgc_end = 0;
  uint64_t profstack = 0;  // offset of m.profStack, whose nil drops a sample (1.23 on); 0: none
  // The linker took memory profiling out (no runtime/pprof): the runtime
  // set MemProfileRate to 0 and samples nothing until someone sets it.
  bool linked_out = false;
  GoProfileLayout layout;
};

// The program's runtime sampling, or why it cannot be read, in words that
// finish "its heap in use is not measured: ..." (memory profiling linked
// out, a release not read, a function not found).
Result<GoRuntimeSampling> go_runtime_sampling(const ElfFile& elf, const GoPclntab& table,
                                              std::string_view version,
                                              const std::vector<ElfSymbol>& functions);

// mProf_Malloc(mp, ...) of Go 1.23 on returns without a record while mp's
// profStack is not made yet (samples of the runtime's start): the offset
// its first test (`mov r, [rax+d]; test r, r; je`) reads, from the code of
// the function at `address`. Pure.
std::optional<uint64_t> go_profstack_offset(std::span<const uint8_t> code, uint64_t address);

// The byte the code at `address` reads (relative to rip) just before it
// writes the 8 bytes at `rate`: the runtime's start choosing MemProfileRate
// by the linker's switch (runtime.schedinit since Go 1.2x, runtime.init
// before: `cmp byte [switch], 0; je; mov qword [rate], 0`, or a movzx and
// a cmov). Pure.
std::optional<uint64_t> go_rate_switch(std::span<const uint8_t> code, uint64_t address, uint64_t rate);

}  // namespace allocscope
