#include "symbols/source_frames.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <utility>

#include "symbols/demangle.h"
#include "symbols/scope_index.h"

namespace allocscope {
namespace {

using Location = std::pair<std::string, int64_t>;  // file, line

// A string attribute, also when it lives on the abstract origin (inlined
// instances) or the declaration (DW_AT_specification, out-of-class members).
const char* integrated_string(Dwarf_Die* die, int name) {
  Dwarf_Attribute attr;
  return dwarf_formstring(dwarf_attr_integrate(die, name, &attr));
}

bool is_function(Dwarf_Die* die) {
  int tag = dwarf_tag(die);
  return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_entry_point;
}

SourceFrame function_frame(Dwarf_Die* die, const Location& at) {
  const char* linkage = integrated_string(die, DW_AT_linkage_name);
  if (!linkage) linkage = integrated_string(die, DW_AT_MIPS_linkage_name);  // pre-DWARF 4 producers
  const char* name = integrated_string(die, DW_AT_name);
  SourceFrame f;
  // The linkage name demangles to what the symbol table would say (qualified,
  // with parameters), so inlined frames read like outer ones.
  f.system_name = linkage ? linkage : name ? name : "";
  f.function = linkage ? demangle(linkage) : name ? name : "[inlined]";
  f.file = at.first;
  f.line = at.second;
  return f;
}

// The call an inlined_subroutine DIE stands for; its file index refers to
// the file table of the CU the DIE is in.
Location call_site(Dwarf_Die* inlined, Dwarf_Files* files) {
  Location at{"", 0};
  Dwarf_Attribute attr;
  Dwarf_Word v;
  if (files && dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &v) == 0)
    if (const char* file = dwarf_filesrc(files, v, nullptr, nullptr)) at.first = file;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &v) == 0) at.second = int64_t(v);
  return at;
}

// The address's own row of the line table.
Location line_at(Dwfl_Module* mod, Dwarf_Addr addr) {
  int line = 0;
  Dwfl_Line* row = dwfl_module_getsrc(mod, addr);
  const char* file = row ? dwfl_lineinfo(row, nullptr, &line, nullptr, nullptr, nullptr) : nullptr;
  return {file ? file : "", file ? line : 0};
}

// The same from the unit's own line table (DWARF address `pc`).
Location line_in_unit(Dwarf_Die* cu, Dwarf_Addr pc) {
  int line = 0;
  Dwarf_Line* row = dwarf_getsrc_die(cu, pc);
  const char* file = row ? dwarf_linesrc(row, nullptr, nullptr) : nullptr;
  if (file && dwarf_lineno(row, &line) != 0) line = 0;
  return {file ? file : "", file ? line : 0};
}

void build_unit_index(Dwarf* dw, DwarfIndex& index) {
  index.built = true;
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie;
  uint8_t unit_type = 0;
  while (dwarf_get_units(dw, cu, &cu, nullptr, &unit_type, &cudie, nullptr) == 0) {
    if (unit_type != DW_UT_compile && unit_type != DW_UT_partial) continue;
    Dwarf_Addr base, start, end;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0;)
      if (start < end) index.ranges.push_back({start, end, dwarf_dieoffset(&cudie)});
  }
  std::sort(index.ranges.begin(), index.ranges.end(),
            [](const DwarfIndex::Range& a, const DwarfIndex::Range& b) { return a.low < b.low; });
}

// The unit holding DWARF address `pc`, through the index (built on first use).
bool unit_at(Dwarf* dw, Dwarf_Addr pc, DwarfIndex& index, Dwarf_Die* out) {
  if (!index.built) build_unit_index(dw, index);
  auto it = std::upper_bound(index.ranges.begin(), index.ranges.end(), pc,
                             [](uint64_t v, const DwarfIndex::Range& r) { return v < r.low; });
  if (it == index.ranges.begin() || pc >= std::prev(it)->high) return false;
  return dwarf_offdie(dw, std::prev(it)->unit, out) != nullptr;
}

struct FreeScopes {
  void operator()(Dwarf_Die* p) const { std::free(p); }
};
using Scopes = std::unique_ptr<Dwarf_Die, FreeScopes>;

// libdw's own walk, for a unit the index finds no function in (a skeleton
// unit's functions are in its split unit, which dwarf_getscopes follows).
// dwarf_getscopes alone leaves an inlined instance for its abstract
// definition's parents, which loses the callers it was inlined into; the
// innermost DIE's own parents keep them (as eu-addr2line -i does).
std::vector<Dwarf_Die> chain_by_walk(Dwarf_Die* cu, Dwarf_Addr pc) {
  std::vector<Dwarf_Die> chain;
  Dwarf_Die* raw = nullptr;
  int n = dwarf_getscopes(cu, pc, &raw);
  Scopes first(raw);
  if (n <= 0) return chain;
  Dwarf_Die innermost = raw[0];
  raw = nullptr;
  n = dwarf_getscopes_die(&innermost, &raw);
  Scopes scopes(raw);
  for (int i = 0; i < n; ++i) {
    if (!is_function(&raw[i])) continue;
    chain.push_back(raw[i]);
    if (dwarf_tag(&raw[i]) != DW_TAG_inlined_subroutine) break;
  }
  return chain;
}

// The function DIEs holding pc, innermost first, up to the concrete function.
std::vector<Dwarf_Die> function_chain(Dwarf_Die* cu, Dwarf_Addr pc, DwarfIndex& index) {
  std::unique_ptr<UnitScopes>& scopes = index.scopes[dwarf_dieoffset(cu)];
  if (!scopes) scopes = std::make_unique<UnitScopes>(cu);
  return scopes->empty() ? chain_by_walk(cu, pc) : scopes->chain(pc);
}

}  // namespace

DwarfIndex::DwarfIndex() = default;
DwarfIndex::~DwarfIndex() = default;

std::vector<SourceFrame> source_frames(Dwfl_Module* mod, uint64_t addr, DwarfIndex& index) {
  std::vector<SourceFrame> frames;
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = mod ? dwfl_module_addrdie(mod, addr, &bias) : nullptr;
  Dwarf_Die indexed;
  Location at;
  if (cu) {
    at = line_at(mod, addr);
  } else if (Dwarf* dw = mod ? dwfl_module_getdwarf(mod, &bias) : nullptr;
             dw && unit_at(dw, addr - bias, index, &indexed)) {
    cu = &indexed;
    at = line_in_unit(cu, addr - bias);
  } else {
    return frames;
  }
  Dwarf_Files* files = nullptr;
  if (dwarf_getsrcfiles(cu, &files, nullptr) != 0) files = nullptr;
  for (Dwarf_Die& die : function_chain(cu, addr - bias, index)) {
    frames.push_back(function_frame(&die, at));
    if (dwarf_tag(&die) != DW_TAG_inlined_subroutine) return frames;
    at = call_site(&die, files);
  }
  // No concrete function around (a line table only, or an inline chain cut
  // short): the outer frame is left for the symbol table to name.
  if (!frames.empty() || !at.first.empty() || at.second != 0) frames.push_back({"", "", at.first, at.second});
  return frames;
}

}  // namespace allocscope
