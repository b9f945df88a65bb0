#include "symbols/scope_index.h"

#include <dwarf.h>

#include <algorithm>

namespace allocscope {

void NestedRanges::add(uint64_t low, uint64_t high, uint32_t depth, uint32_t value) {
  ranges_.push_back({low, high, depth, value});
}

void NestedRanges::finish() {
  std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) {
    return a.low != b.low ? a.low < b.low : a.depth < b.depth;
  });
  reach_.resize(ranges_.size());
  uint64_t reach = 0;
  for (size_t i = 0; i < ranges_.size(); ++i) reach_[i] = reach = std::max(reach, ranges_[i].high);
}

// Back from the last range starting at or before pc, while an earlier one
// could still reach it: in a function, its inlined calls that start before
// pc (hundreds in an interpreter's loop, not the unit's tens of thousands).
int64_t NestedRanges::deepest(uint64_t pc) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), pc,
                             [](uint64_t v, const Range& r) { return v < r.low; });
  int64_t best = -1;
  uint32_t best_depth = 0;
  for (size_t i = size_t(it - ranges_.begin()); i-- > 0 && reach_[i] > pc;) {
    const Range& r = ranges_[i];
    if (r.high > pc && (best < 0 || r.depth > best_depth)) {
      best = r.value;
      best_depth = r.depth;
    }
  }
  return best;
}

namespace {

// Nesting deeper than this (imports included) is not followed: real code
// nests tens deep, a crafted file could loop.
constexpr uint32_t kMaxLevels = 256;

bool is_function(int tag) {
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

}  // namespace

UnitScopes::UnitScopes(Dwarf_Die* unit) {
  walk(unit, -1, 0, 0);
  ranges_.finish();
}

// A function DIE with code becomes the scope its children nest in; one
// without (a declaration, an abstract instance) does not.
void UnitScopes::add_node(Dwarf_Die* die, int32_t* node, uint32_t* depth) {
  auto index = uint32_t(nodes_.size());
  bool any = false;
  Dwarf_Addr base, start, end;
  for (ptrdiff_t off = 0; (off = dwarf_ranges(die, off, &base, &start, &end)) > 0;) {
    if (start >= end || start == 0) continue;  // the linker's discarded copies keep address 0
    ranges_.add(start, end, *depth, index);
    any = true;
  }
  if (!any) return;
  nodes_.push_back({*die, *node});
  *node = int32_t(index);
  ++*depth;
}

void UnitScopes::walk(Dwarf_Die* parent, int32_t node, uint32_t depth, int levels) {
  Dwarf_Die child;
  if (levels >= int(kMaxLevels) || dwarf_child(parent, &child) != 0) return;
  do {
    int tag = dwarf_tag(&child);
    if (tag == DW_TAG_imported_unit) {  // dwz's shared DIEs, read as if here
      Dwarf_Attribute attr;
      Dwarf_Die imported;
      if (dwarf_formref_die(dwarf_attr(&child, DW_AT_import, &attr), &imported))
        walk(&imported, node, depth, levels + 1);
      continue;
    }
    int32_t inner = node;
    uint32_t inner_depth = depth;
    if (is_function(tag)) add_node(&child, &inner, &inner_depth);
    if (dwarf_haschildren(&child)) walk(&child, inner, inner_depth, levels + 1);
  } while (dwarf_siblingof(&child, &child) == 0);
}

std::vector<Dwarf_Die> UnitScopes::chain(uint64_t pc) const {
  std::vector<Dwarf_Die> out;
  // A node's parent was added before it: the walk ends.
  for (int64_t i = ranges_.deepest(pc); i >= 0; i = nodes_[size_t(i)].parent) {
    out.push_back(nodes_[size_t(i)].die);
    if (dwarf_tag(&out.back()) != DW_TAG_inlined_subroutine) break;
  }
  return out;
}

}  // namespace allocscope
