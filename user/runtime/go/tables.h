// A Go program's own tables as the symbolizer and the unwind tables read
// them: its pclntab names a stripped program's code (inlined calls too)
// and gives the rules of its frames, which Go's compiler describes in no
// .eh_frame.
#pragma once

#include <memory>

#include "symbols/runtime_tables.h"

namespace allocscope {

struct GoSpRun;

// The tables of a Go program of 1.18 or later; nullptr for another file.
// (A RuntimeTablesReader: runtime/registry.cpp hands it down.)
std::unique_ptr<RuntimeTables> read_go_tables(Elf* elf);

// The rule of a run of a Go function's stack-pointer table. Pure.
as_unwind_row go_row(const GoSpRun& run);

}  // namespace allocscope
