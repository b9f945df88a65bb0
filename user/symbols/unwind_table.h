// Call frame information compiled into the rows the BPF unwinder follows
// (struct as_unwind_row, bpf/unwind.h): elfutils interprets each FDE of
// .eh_frame (or .debug_frame) and reports the pc range of every rule; a row
// keeps what an x86-64 unwind of code that calls needs (the CFA rule and
// where rbp was saved), keyed by file offset so that the kernel can look it
// up from a mapping's offset without knowing the load address.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "allocscope.h"
#include "base/result.h"
#include "symbols/elf_file.h"
#include "symbols/runtime_tables.h"

namespace allocscope {

struct UnwindTable {
  std::vector<as_unwind_row> rows;  // sorted by pc, consecutive rows differ
  // Runtime: a runtime's functions by its own tables (a Go program's by its
  // pclntab; the rest, a cgo program's C code, by its .eh_frame).
  enum class Source { EhFrame, DebugFrame, FramePointers, Runtime } source = Source::EhFrame;
  const char* runtime = "";   // Runtime: the tables' name ("Go's pclntab")
  uint64_t runtime_runs = 0;  // rows from the runtime's tables
  uint64_t fdes = 0;          // frame description entries read
  uint64_t unsupported = 0;   // rules the kernel cannot follow (rows that stop a walk)
};

// Builds the table of an x86-64 ELF file. A file without call frame
// information gets the frame-pointer rule for all of its code; a runtime's
// own code (`runtime_tables`: runtime/registry.h has them all), its rules.
Result<UnwindTable> build_unwind_table(const ElfFile& elf, const RuntimeTablesReaders& runtime_tables = {});
Result<UnwindTable> build_unwind_table(const std::string& path,
                                       const RuntimeTablesReaders& runtime_tables = {});

// The row that covers file offset `pc`: the last with row.pc <= pc (the
// kernel's binary search); nullptr when pc is before the first.
const as_unwind_row* find_row(std::span<const as_unwind_row> rows, uint64_t pc);

const char* source_name(const UnwindTable& t);

// The rows as the kernel holds them: header, page index, rows (the layout
// bpf/unwind.h describes and as_table_find searches). kernel_layout_size
// entries, written by write_kernel_layout where they go (the kernel's map:
// no copy of a table that can be millions of rows); the rows are its last.
size_t kernel_layout_size(std::span<const as_unwind_row> rows);
void write_kernel_layout(std::span<const as_unwind_row> rows, std::span<as_unwind_row> out);
std::vector<as_unwind_row> kernel_layout(std::span<const as_unwind_row> rows);

}  // namespace allocscope
