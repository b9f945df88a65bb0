// The functions and inlined calls of one DWARF compilation unit by address,
// read in one walk of the unit. libdw's dwarf_getscopes walks the unit's whole
// tree for every address it is asked (twice with the walk to the parents):
// symbolizing a recording of libpython's -O3 code took 5 s for 10,000
// addresses, nearly all of it in that walk.
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <vector>

namespace allocscope {

// Address ranges that nest (a function's holds its inlined calls'), each with
// its depth: the deepest holding an address, in a sorted vector. Pure.
class NestedRanges {
 public:
  void add(uint64_t low, uint64_t high, uint32_t depth, uint32_t value);
  // Sorts; add after it is not allowed.
  void finish();
  // The value of the deepest range holding `pc` (of two as deep, the one
  // starting later), or -1.
  int64_t deepest(uint64_t pc) const;
  bool empty() const { return ranges_.empty(); }

 private:
  struct Range {
    uint64_t low, high;  // [low, high)
    uint32_t depth, value;
  };
  std::vector<Range> ranges_;    // by low
  std::vector<uint64_t> reach_;  // highest `high` of ranges_[0..i]: where a scan back can stop
};

// One unit's function DIEs (subprograms, inlined subroutines, entry points)
// that have code, each with the one it is nested in.
class UnitScopes {
 public:
  // Walks the unit (and the partial units it imports, as dwz makes them).
  explicit UnitScopes(Dwarf_Die* unit);
  // The function DIE holding `pc` (a DWARF address) and those it is nested
  // in, innermost first, up to a subprogram; empty when no function holds it.
  std::vector<Dwarf_Die> chain(uint64_t pc) const;
  // No function DIE with code: a unit of assembly, or a skeleton unit.
  bool empty() const { return ranges_.empty(); }

 private:
  struct Node {
    Dwarf_Die die;
    int32_t parent;  // index into nodes_, -1 when outermost
  };
  void walk(Dwarf_Die* parent, int32_t node, uint32_t depth, int imports);
  void add_node(Dwarf_Die* die, int32_t* node, uint32_t* depth);

  std::vector<Node> nodes_;
  NestedRanges ranges_;
};

}  // namespace allocscope
