// Which allocator entry points of an ELF object to probe, and where.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "base/result.h"
#include "probe/placement/probe_placement.h"
#include "symbols/elf_file.h"

namespace allocscope {

struct ProbeTarget {
  uint16_t fn;             // entry code: as_fn_kind(fn), and the entry point named (allocator_entries.h)
  uint64_t vaddr = 0;      // the function's entry
  uint64_t offset = 0;     // file offset of the probe, what the kernel's uprobe takes
  uint64_t placed_at = 0;  // bytes after the entry where the probe sits
  bool emulated = false;   // the kernel emulates the probed instruction
  std::string instruction = {};  // the probed instruction, e.g. "push rbp"
  bool at_stack_check = false;   // Go: on the stack check's branch (see AS_COOKIE_GO_STACK_CHECK)
  // Go's runtime sampling: its program (on the AS_FN_GO_PROFILE target; the
  // session gives it a slot, and the probe's own address is filled in), and
  // what the AS_FN_GO_FREE probe reads, above AS_COOKIE_GO_SHIFT.
  std::optional<as_go_profile> go_profile = {};
  uint64_t go_cookie = 0;
  // Go: the calls made from this code ([start, end): mallocgc's) were
  // counted at its own probe (AS_COOKIE_GO_SIZED; find_allocator_probes
  // puts it in go_cookie once the probe is placed).
  std::optional<std::pair<uint64_t, uint64_t>> go_counted_in = {};
  // On the runtime.mallocgc target: why the runtime's own sampling cannot be
  // read instead (empty: it can, and the two targets above are there).
  std::string go_no_profile = {};
  // On the AS_FN_GO_PROFILE target: its runtime samples nothing until its
  // MemProfileRate is set (memory profiling linked out).
  bool go_linked_out = false;
  uint64_t go_linked_out_switch = 0;  // ... and where the linker's switch is (0: not found)

  // What the kernel hands the probe's program: the entry code, and how to
  // read the place.
  uint64_t cookie() const { return fn | (at_stack_check ? AS_COOKIE_GO_STACK_CHECK : 0) | go_cookie; }
};

// The cookie's bits (AS_COOKIE_GO_SIZED) telling the probe at `probe` that
// calls from `code` ([start, end): mallocgc) are counted there: its distance
// and length, both file addresses. Fails when they do not fit. Pure.
Result<uint64_t> go_counted_in_bits(uint64_t probe, std::pair<uint64_t, uint64_t> code);

// One target per entry point the symbols define, each address once. In a C
// library (`c_library`) the C family's entry points carry their plain kind
// as code (glibc's aligned_alloc and memalign share an address: the first in
// enum order is kept); in any other object every known entry point carries
// its own code. Empty when the symbols define no malloc-kind entry point:
// the object is not an allocator (libstdc++'s operator new calls malloc).
std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols, bool c_library);

// A language runtime's own allocation entry points in a file (Go's
// runtime.mallocgc, and its runtime's sampling), by `symbols` or its own
// tables; none when the file is not its (runtime/registry.h has them all).
using EntryFinder = std::vector<ProbeTarget> (*)(const ElfFile& elf, const std::vector<ElfSymbol>& symbols);
using EntryFinders = std::vector<EntryFinder>;

// The targets of the ELF object at `path`, with file offsets. Probes go on
// the first instruction the kernel emulates (see probe_placement.h), except
// with `naive`: every probe on the entry. An object that is no allocator
// fails with Cause::NoAllocator, naming what was looked for. `name` is the file's
// name as processes map it (`path` may be a /proc/PID/map_files link): it
// tells a C library (libc.so.6, ld-musl-*) by its name.
// `emulation`: what the running kernel emulates (the newest kernels' by default).
// `runtimes`: the runtimes' own entry points, looked for too.
Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path, bool naive = false,
                                                       const std::string& name = "",
                                                       const Emulation& emulation = {},
                                                       const EntryFinders& runtimes = {});
// The same, of a file already open (its path() is the one named).
Result<std::vector<ProbeTarget>> find_allocator_probes(const ElfFile& elf, bool naive,
                                                       const std::string& name, const Emulation& emulation,
                                                       const EntryFinders& runtimes = {});

}  // namespace allocscope
