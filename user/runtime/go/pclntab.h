// A Go program's own table of its functions (the pclntab Go's runtime walks
// its stacks with), which strip keeps: function names, entries, files and
// lines of Go 1.18 and later, read without symbols or DWARF. What names the
// Go frames of a stripped program and finds its runtime's functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

typedef struct Elf Elf;

namespace allocscope {

class ElfFile;

struct GoPosition {
  std::string function;  // the function the code is in ("main.main", "runtime.mallocgc")
  std::string file;      // of the innermost code (an inlined call's own)
  int64_t line = 0;      // likewise; 0 when unknown
};

// A run of a Go function's stack-pointer table (its pcsp): over [start, end)
// the function's frame holds `sp` bytes below the stack pointer it was
// entered with (the return address not counted). What Go's own traceback
// unwinds by.
struct GoSpRun {
  uint64_t start, end;  // ELF virtual addresses
  int32_t sp;
  uint8_t flag;  // the function's funcFlag: kGoTopFrame, kGoSpWrite
};
inline constexpr uint8_t kGoTopFrame = 1;  // the outermost frame of its stack (goexit, mstart, rt0_go)
inline constexpr uint8_t kGoSpWrite = 2;   // writes the stack pointer (switches stacks): sp is not known

class GoPclntab {
 public:
  // `table`: the bytes from the table's header on, which must outlive the
  // result; `text`: where the program's text starts, if the header's own
  // field is zero (a relocation's place). Fails for another layout (before
  // Go 1.18, or not a pclntab), naming it.
  static Result<GoPclntab> parse(std::span<const uint8_t> table, uint64_t text);

  // The function at ELF virtual address `vaddr` and its position there.
  std::optional<GoPosition> at(uint64_t vaddr) const;
  // The frames at `vaddr`, innermost first: the calls the compiler inlined
  // there (each at its own position), then the function itself at the
  // outermost call's site. Just at()'s frame without the inline trees.
  std::vector<GoPosition> frames(uint64_t vaddr) const;
  // Where the functions' data (their inline trees) lies: the bytes from
  // Go's go:func.* symbol on (moduledata.gofunc), at `vaddr`.
  void set_func_data(std::span<const uint8_t> bytes, uint64_t vaddr) {
    gofunc_ = bytes;
    gofunc_vaddr_ = vaddr;
  }
  bool has_func_data() const { return !gofunc_.empty(); }
  // The entry address of a function, by its name.
  std::optional<uint64_t> entry(std::string_view function) const;
  // The names of the functions that start with `prefix`, in name order.
  std::vector<std::string_view> names_starting(std::string_view prefix) const;
  // Its code: [entry, the next function's entry).
  std::optional<std::pair<uint64_t, uint64_t>> range(std::string_view function) const;
  uint64_t functions() const { return nfunc_; }
  // Every function's stack-pointer runs, in address order; a function
  // whose table cannot be read is left out.
  std::vector<GoSpRun> sp_runs() const;
  // 118 (Go 1.18 and 1.19) or 120 (Go 1.20 on): the layout read.
  int layout() const { return layout_; }

 private:
  GoPclntab() = default;
  struct Func {
    uint64_t entry;
    uint32_t name_off, pcsp, pcfile, pcln, cu;
    uint8_t flag;
    uint64_t at = 0;       // the _func's offset in the table
    uint32_t npcdata = 0;  // its pc-value tables after the fixed fields, then its data offsets
  };
  GoPosition position(const Func& f, std::string_view name, uint64_t vaddr) const;
  // The index into the function's inline tree at vaddr (-1: none), and the tree.
  std::optional<uint64_t> inline_tree(const Func& f) const;
  // Calls visit(start, end, value) for each run of a pc-value table, in
  // order, until it returns false; false if the table is malformed.
  template <typename Visit>
  bool each_pc_value(uint32_t offset, uint64_t entry, Visit&& visit) const;
  std::optional<uint32_t> u32(uint64_t at) const;
  std::optional<Func> func(uint64_t index) const;
  std::optional<std::string_view> string_at(uint64_t at) const;
  std::optional<int32_t> pc_value(uint32_t offset, uint64_t entry, uint64_t vaddr) const;
  std::optional<uint64_t> index_of(uint64_t vaddr) const;

  std::span<const uint8_t> t_, gofunc_;
  uint64_t gofunc_vaddr_ = 0;
  int layout_ = 0;
  uint8_t quantum_ = 1;
  uint64_t nfunc_ = 0, text_ = 0;
  uint64_t funcnames_ = 0, cutab_ = 0, filetab_ = 0, pctab_ = 0, functab_ = 0;
  mutable std::unordered_map<std::string_view, uint64_t> by_name_;  // filled on first entry()
};

// The pclntab of a Go ELF file (its .gopclntab section), kept in the ELF's
// mapping: `elf` must outlive it.
Result<GoPclntab> go_pclntab(Elf* elf);
Result<GoPclntab> go_pclntab(const ElfFile& elf);

}  // namespace allocscope
