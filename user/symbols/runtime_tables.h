// What a language runtime's own tables say of a file where its symbols,
// DWARF and CFI say nothing (Go's function table, which strip keeps, names a
// stripped Go program's code and the rules of its frames). The runtimes'
// rooms (user/runtime/) read them; the core hands their readers down to the
// symbolizer and the unwind tables, which name no runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "allocscope.h"
#include "symbols/source_frames.h"

typedef struct Elf Elf;

namespace allocscope {

// One rule over [start, end), ELF virtual addresses (rule.pc unused).
struct RuntimeRun {
  uint64_t start, end;
  as_unwind_row rule;
};

class RuntimeTables {
 public:
  virtual ~RuntimeTables() = default;
  // The frames at `vaddr`, innermost first (the calls inlined there, then
  // the function); empty: not known.
  virtual std::vector<SourceFrame> frames_at(uint64_t vaddr) const = 0;
  // The rules of the runtime's own code, in address order: they stand over
  // the file's CFI where both speak.
  virtual std::vector<RuntimeRun> unwind_runs() const = 0;
  // The tables' name, where a table says where its rows came from.
  virtual const char* name() const = 0;
};

// The tables of the file `elf` (which outlives them); nullptr when it is
// not the runtime's, or they cannot be read. Called on any thread.
using RuntimeTablesReader = std::unique_ptr<RuntimeTables> (*)(Elf* elf);
using RuntimeTablesReaders = std::vector<RuntimeTablesReader>;

// The first reader's tables of `elf`, or nullptr.
inline std::unique_ptr<RuntimeTables> read_runtime_tables(const RuntimeTablesReaders& readers, Elf* elf) {
  for (RuntimeTablesReader read : readers)
    if (auto tables = read(elf)) return tables;
  return nullptr;
}

}  // namespace allocscope
