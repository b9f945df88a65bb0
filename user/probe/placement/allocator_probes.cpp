#include "probe/placement/allocator_probes.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <set>

#include "host/proc_maps.h"
#include "probe/placement/allocator_entries.h"
#include "probe/placement/probe_placement.h"

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

}  // namespace

Result<uint64_t> go_counted_in_bits(uint64_t probe, std::pair<uint64_t, uint64_t> code) {
  constexpr int64_t kMostDistance = (int64_t(1) << 23) - 1;  // signed, in the cookie's top 24 bits
  auto distance = int64_t(code.first - probe);
  uint64_t length = code.second - code.first;
  if (distance > kMostDistance || distance < -kMostDistance - 1 || length == 0 || length > 0xffff)
    return fail(
        "an allocator specialized by size lies too far from mallocgc, or mallocgc is too long, "
        "for its probe to tell mallocgc's calls");
  return AS_COOKIE_GO_SIZED | length << AS_COOKIE_GO_SIZED_LEN_SHIFT |
         (uint64_t(distance) & 0xffffff) << AS_COOKIE_GO_SHIFT;
}

std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols, bool c_library) {
  bool allocator = std::any_of(symbols.begin(), symbols.end(),
                               [](const ElfSymbol& s) { return defines_allocator(s.name); });
  if (!allocator) return {};
  return c_library ? c_library_symbols(symbols) : named_symbols(symbols);
}

Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path, bool naive,
                                                       const std::string& name, const Emulation& emulation,
                                                       const EntryFinders& runtimes) {
  auto elf = ElfFile::open(path);
  if (!elf) return fail(elf.error());
  return find_allocator_probes(*elf, naive, name, emulation, runtimes);
}

Result<std::vector<ProbeTarget>> find_allocator_probes(const ElfFile& file, bool naive,
                                                       const std::string& name, const Emulation& emulation,
                                                       const EntryFinders& runtimes) {
  const std::string& path = file.path();
  std::vector<ElfSymbol> symbols = file.functions();
  std::vector<ProbeTarget> targets =
      select_allocator_symbols(symbols, is_c_library_name(name.empty() ? path : name));
  for (EntryFinder find : runtimes)
    for (ProbeTarget& t : find(file, symbols)) targets.push_back(std::move(t));
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
    if (t.go_counted_in) {
      auto bits = go_counted_in_bits(t.vaddr + at.offset, *t.go_counted_in);
      if (!bits) return fail(path + ": " + bits.error().message);
      t.go_cookie |= *bits;
    }
  }
  return targets;
}

}  // namespace allocscope
