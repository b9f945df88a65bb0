#include "allocator_probes.h"

#include <algorithm>
#include <set>

#include "probe_placement.h"

namespace allocscope {

const char* fn_name(int fn) {
  static const char* names[AS_FN_COUNT] = {"malloc",        "calloc",  "realloc", "reallocarray",
                                           "posix_memalign", "aligned_alloc", "memalign", "valloc",
                                           "pvalloc",       "free"};
  return fn >= 0 && fn < AS_FN_COUNT ? names[fn] : "?";
}

std::vector<ProbeTarget> select_allocator_symbols(const std::vector<ElfSymbol>& symbols) {
  std::vector<ProbeTarget> targets;
  std::set<uint64_t> taken;
  for (int fn = 0; fn < AS_FN_COUNT; ++fn) {
    auto sym = std::find_if(symbols.begin(), symbols.end(),
                            [&](const ElfSymbol& s) { return s.name == fn_name(fn); });
    if (sym != symbols.end() && taken.insert(sym->vaddr).second)
      targets.push_back({static_cast<as_fn>(fn), sym->vaddr, 0, 0, false, ""});
  }
  return targets;
}

Result<std::vector<ProbeTarget>> find_allocator_probes(const std::string& path, bool naive) {
  auto elf = ElfFile::open(path);
  if (!elf)
    return fail(elf.error());
  std::vector<ProbeTarget> targets = select_allocator_symbols(elf->functions());
  bool has_malloc = std::any_of(targets.begin(), targets.end(),
                                [](const ProbeTarget& t) { return t.fn == AS_FN_MALLOC; });
  if (!has_malloc)
    return fail(path + " defines no malloc");
  for (ProbeTarget& t : targets) {
    auto off = elf->vaddr_to_offset(t.vaddr);
    if (!off)
      return fail(off.error());
    auto code = elf->read(*off, 512);
    if (!code)
      return fail(code.error());
    // Allocating calls need their return seen, which takes the entry.
    Placement at = place_probe(*code, t.vaddr, naive || t.fn != AS_FN_FREE);
    t.offset = *off + at.offset;
    t.placed_at = at.offset;
    t.emulated = at.emulated;
    t.instruction = at.instruction;
  }
  return targets;
}

}  // namespace allocscope
