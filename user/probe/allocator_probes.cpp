#include "probe/allocator_probes.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <set>

#include "host/proc_maps.h"
#include "probe/allocator_entries.h"
#include "probe/go_runtime.h"
#include "probe/probe_placement.h"
#include "symbols/go_build.h"
#include "symbols/go_pclntab.h"

namespace allocscope {

namespace {

std::vector<ProbeTarget> c_library_symbols(const std::vector<ElfSymbol>& symbols) {
  std::vector<ProbeTarget> targets;
  std::set<uint64_t> taken;
  for (int fn = 0; fn <= AS_FN_EXIT; ++fn) {  // the C library's own names (Go's allocator is not one)
    auto sym = std::find_if(symbols.begin(), symbols.end(),
                            [&](const ElfSymbol& s) { return s.name == as_fn_name(fn); });
    if (sym != symbols.end() && taken.insert(sym->vaddr).second)
      targets.push_back({.fn = uint16_t(fn), .vaddr = sym->vaddr});
  }
  return targets;
}

// In table order, so that an address's name is the same whatever the
// order of the symbol tables.
std::vector<ProbeTarget> named_symbols(const std::vector<ElfSymbol>& symbols) {
  std::vector<std::pair<uint16_t, uint64_t>> found;  // code, address
  for (const ElfSymbol& s : symbols)
    if (const AllocatorEntry* e = allocator_entry(s.name); e && e->probed)
      found.emplace_back(entry_code(*e), s.vaddr);
  std::sort(found.begin(), found.end());
  std::vector<ProbeTarget> targets;
  std::set<uint64_t> taken;
  for (auto [code, vaddr] : found)
    if (taken.insert(vaddr).second) targets.push_back({.fn = code, .vaddr = vaddr});
  return targets;
}

// Go's allocator in a Go program of 1.18 or later (whose function table
// allocscope reads, and whose register ABI passes the size in rax): by its
// symbol, or, stripped, by the function table. Then, when they can be read,
// the runtime's own sampling and its frees (the caller picks one way).
std::vector<ProbeTarget> go_allocator(const ElfFile& elf, const std::vector<ElfSymbol>& symbols) {
  auto build = go_build(elf);
  if (!build) return {};
  auto table = go_pclntab(elf);
  if (!table) return {};  // before Go 1.18: the stack ABI, a table not read
  auto sym = std::find_if(symbols.begin(), symbols.end(),
                          [](const ElfSymbol& s) { return s.name == as_fn_name(AS_FN_GO_MALLOC); });
  std::optional<uint64_t> entry =
      sym != symbols.end() ? sym->vaddr : table->entry(as_fn_name(AS_FN_GO_MALLOC));
  if (!entry) return {};
  std::vector<ProbeTarget> targets{{.fn = uint16_t(AS_FN_GO_MALLOC), .vaddr = *entry}};
  auto sampling = go_runtime_sampling(elf, *table, build->version, symbols);
  if (!sampling) {
    targets[0].go_no_profile = sampling.error().message;
    return targets;
  }
  const GoRuntimeSampling& s = *sampling;
  ProbeTarget profile{.fn = uint16_t(AS_FN_GO_PROFILE),
                      .vaddr = s.mprof_malloc,
                      .go_linked_out = s.linked_out,
                      .go_linked_out_switch = s.linked_out_switch};
  profile.go_profile = as_go_profile{.probe = 0,
                                     .rate = s.rate,
                                     .mallocgc = s.mallocgc,
                                     .mallocgc_end = s.mallocgc_end,
                                     .args = s.layout.mp_first ? 1u : 0u,
                                     .calls = 0,
                                     .profstack = s.profstack};
  ProbeTarget free{.fn = uint16_t(AS_FN_GO_FREE), .vaddr = s.free_special};
  free.go_cookie = (uint64_t(s.layout.kind) | uint64_t(s.layout.kind_offset) << 8) << AS_COOKIE_GO_SHIFT;
  targets.push_back(free);  // attached first: no sample's free is missed in between
  targets.push_back(profile);
  return targets;
}

}  // namespace

std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols, bool c_library) {
  bool allocator = std::any_of(symbols.begin(), symbols.end(),
                               [](const ElfSymbol& s) { return defines_allocator(s.name); });
  if (!allocator) return {};
  return c_library ? c_library_symbols(symbols) : named_symbols(symbols);
}

GoHeapChoice pick_go_heap(std::vector<ProbeTarget>& targets, uint64_t rate, bool calls, bool off,
                          bool may_set_rate) {
  auto at = std::find_if(targets.begin(), targets.end(),
                         [](const ProbeTarget& t) { return as_fn_kind(t.fn) == AS_FN_GO_MALLOC; });
  if (at == targets.end()) return {};
  auto profile = std::find_if(targets.begin(), targets.end(),
                              [](const ProbeTarget& t) { return as_fn_kind(t.fn) == AS_FN_GO_PROFILE; });
  bool linked_out = profile != targets.end() && profile->go_linked_out;
  GoHeapChoice c{.route = GoHeapRoute::Calls, .why_calls = at->go_no_profile};
  if (c.why_calls.empty())
    c.why_calls = calls       ? "--go-heap-calls"
                  : rate <= 1 ? "exact mode counts every call"
                  : linked_out && !may_set_rate
                      ? "its runtime samples nothing (memory profiling linked out: no runtime/pprof)"
                  : !linked_out && rate != kGoMemProfileRate ? "--rate is not Go's MemProfileRate, 512 KiB"
                                                             : "";
  if (c.why_calls.empty()) c.route = GoHeapRoute::Runtime;
  if (off) c.route = GoHeapRoute::None;
  c.sets_rate = linked_out && c.route == GoHeapRoute::Runtime;
  std::erase_if(targets, [&](const ProbeTarget& t) {
    as_fn kind = as_fn_kind(t.fn);
    bool runtime = kind == AS_FN_GO_PROFILE || kind == AS_FN_GO_FREE;
    return (kind == AS_FN_GO_MALLOC && c.route != GoHeapRoute::Calls) ||
           (runtime && c.route != GoHeapRoute::Runtime);
  });
  return c;
}

Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path, bool naive,
                                                       const std::string& name, const Emulation& emulation) {
  auto elf = ElfFile::open(path);
  if (!elf) return fail(elf.error());
  return find_allocator_probes(*elf, naive, name, emulation);
}

Result<std::vector<ProbeTarget>> find_allocator_probes(const ElfFile& file, bool naive,
                                                       const std::string& name, const Emulation& emulation) {
  const std::string& path = file.path();
  std::vector<ElfSymbol> symbols = file.functions();
  std::vector<ProbeTarget> targets =
      select_allocator_symbols(symbols, is_c_library_name(name.empty() ? path : name));
  for (ProbeTarget& go : go_allocator(file, symbols)) targets.push_back(std::move(go));
  if (targets.empty())
    return fail(path + " defines no malloc, mallocx, je_malloc, tc_malloc or mi_malloc: not an allocator",
                Cause::NoAllocator);
  for (ProbeTarget& t : targets) {
    auto off = file.vaddr_to_offset(t.vaddr);
    if (!off) return fail(off.error());
    auto code = file.read(*off, 512);
    if (!code) return fail(code.error());
    // Allocating calls need their return seen, which takes the entry; free
    // and mallocgc read one argument, which may be read later on.
    as_fn kind = as_fn_kind(t.fn);
    Placement at = place_probe(*code, t.vaddr, naive || (kind != AS_FN_FREE && !is_go_entry(kind)), emulation,
                               is_go_entry(kind) ? ProbedArgument::GoFirst : ProbedArgument::CFirst);
    t.offset = *off + at.offset;
    t.placed_at = at.offset;
    t.emulated = at.emulated;
    t.instruction = at.instruction;
    // Go's prologue compares the stack pointer with the goroutine's guard
    // and branches to morestack, which enters the function again.
    t.at_stack_check = is_go_entry(kind) && at.offset > 0 && at.instruction.starts_with("jbe");
    if (t.go_profile) t.go_profile->probe = t.vaddr + at.offset;
  }
  return targets;
}

}  // namespace allocscope
