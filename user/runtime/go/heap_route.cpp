#include "runtime/go/heap_route.h"

#include <algorithm>
#include <optional>

#include "probe/placement/allocator_entries.h"
#include "runtime/go/build.h"
#include "runtime/go/pclntab.h"
#include "runtime/go/sampling.h"
#include "runtime/go/sized.h"

namespace allocscope {

// Go's allocator in a Go program of 1.18 or later (whose function table
// allocscope reads, and whose register ABI passes the size in rax): by its
// symbol, or, stripped, by the function table. Then, when they can be read,
// the runtime's own sampling and its frees (the caller picks one way).
std::vector<ProbeTarget> go_allocation_entries(const ElfFile& elf, const std::vector<ElfSymbol>& symbols) {
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
  // Go 1.27's allocators specialized by size, probed as mallocgc is: each
  // call once (those of mallocgc's table counted at mallocgc).
  // Their walks from the runtime's sampling leave out their one run of
  // code as mallocgc's.
  auto mallocgc = table->range(as_fn_name(AS_FN_GO_MALLOC));
  GoSizedAllocators sized = go_sized_allocators(*table);
  if (mallocgc)
    for (uint64_t e : sized.entries)
      targets.push_back({.fn = uint16_t(AS_FN_GO_MALLOC), .vaddr = e, .go_counted_in = *mallocgc});
  auto sampling = go_runtime_sampling(elf, *table, build->version, symbols);
  if (!sampling || !sized.not_one_run.empty()) {
    targets[0].go_no_profile = sampling ? sized.not_one_run : sampling.error().message;
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
                                     .profstack = s.profstack,
                                     .sized = sized.start,
                                     .sized_end = sized.end};
  ProbeTarget free{.fn = uint16_t(AS_FN_GO_FREE), .vaddr = s.free_special};
  free.go_cookie = (uint64_t(s.layout.kind) | uint64_t(s.layout.kind_offset) << 8) << AS_COOKIE_GO_SHIFT;
  targets.push_back(free);  // attached first: no sample's free is missed in between
  targets.push_back(profile);
  return targets;
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

}  // namespace allocscope
