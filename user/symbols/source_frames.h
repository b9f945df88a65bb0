// Where an address is in the source, from a module's DWARF: its file and
// line, and the chain of inlined calls it sits in. System code (libdw).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct Dwfl_Module;  // elfutils/libdwfl.h, kept out of the symbolizer's includers

namespace allocscope {

// One function level at an address: the innermost is the code itself, each
// further one the function that inlined the previous, at its call's line.
struct SourceFrame {
  std::string function;     // demangled
  std::string system_name;  // linkage name or symbol ("" when unknown)
  std::string file;         // as DWARF records it, often absolute; "" when unknown
  int64_t line = 0;         // 0 when unknown
};

class UnitScopes;  // symbols/scope_index.h

// What a module's DWARF is looked up by, read on first need; one per module.
// Its compilation units by address, for DWARF without .debug_aranges
// (clang's and rustc's default): libdw before 0.191 (bookworm has 0.188)
// finds the unit of an address only there, so such a program had names but
// no file or line. And each unit's functions by address (UnitScopes).
struct DwarfIndex {
  DwarfIndex();
  ~DwarfIndex();
  struct Range {
    uint64_t low, high, unit;  // [low, high) in DWARF addresses; the unit DIE's offset
  };
  bool built = false;
  std::vector<Range> ranges;                                         // sorted by low
  std::unordered_map<uint64_t, std::unique_ptr<UnitScopes>> scopes;  // by the unit DIE's offset
};

// Frames at module address `addr` (as dwfl sees it), innermost first; the
// last is the concrete function, "" named when DWARF has a line table but no
// function entry there. Empty without DWARF for the address.
std::vector<SourceFrame> source_frames(Dwfl_Module* mod, uint64_t addr, DwarfIndex& index);

}  // namespace allocscope
