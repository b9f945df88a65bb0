// Where CPython 3.8 to 3.12 (release builds, x86-64) keep what a stack walk
// needs: tables of ours, each checked against that version's headers by a
// test (tests/unit/python_offsets.c). 3.13 on publish their own
// (_Py_DebugOffsets, read by program.cpp).
#pragma once

#include <optional>

#include "runtime/python/program.h"

namespace allocscope {

// The table of `major`.`minor`; nullopt for a version without one.
std::optional<PythonProgram> python_table_layout(int major, int minor);

// The table of 3.11 (Debian 12's interpreter).
PythonProgram python_311_layout();

}  // namespace allocscope
