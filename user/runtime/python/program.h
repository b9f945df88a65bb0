// A CPython runtime (3.8 to 3.15), read from the file that holds it (a
// program, or a library such as libpython3.X.so): where its runtime state,
// thread states, frames and code objects keep what a stack walk needs.
// 3.13 publishes that itself (_Py_DebugOffsets at the start of _PyRuntime);
// before, the offsets are tables of ours (layouts.h).
#pragma once

#include <cstdint>
#include <string>

#include "allocscope.h"
#include "base/result.h"
#include "symbols/elf_file.h"

namespace allocscope {

// How a code object maps instructions to lines.
enum class PythonLineTable {
  kLocations,      // co_linetable, the location table (3.11 on)
  kLineNumbers,    // co_lnotab, byte offset and line increments (3.8, 3.9)
  kAddressRanges,  // co_linetable, byte ranges and line deltas (3.10)
};

// Where a code object's and a string's parts lie.
struct PythonObjectLayout {
  PythonLineTable line_table = PythonLineTable::kLocations;
  uint32_t code_filename = 0, code_qualname = 0, code_linetable = 0, code_first_line = 0;
  uint32_t code_first_traceable = 0;  // 0: the version does not say (3.13)
  uint32_t code_units = 0;            // co_code_adaptive
  uint32_t ob_type = 8;
  uint32_t unicode_length = 16, unicode_state = 32;
  uint32_t ascii_size = 0, compact_size = 0;  // PyASCIIObject, PyCompactUnicodeObject
  uint32_t bytes_size = 16, bytes_data = 32;  // PyBytesObject: ob_size, ob_sval
};

struct PythonProgram {
  int major = 0, minor = 0;
  as_py_layout kernel = {};               // for the kernel's walk (python_files)
  PythonObjectLayout objects;             // for userspace's reads of code objects
  uint64_t eval_start = 0, eval_end = 0;  // _PyEval_EvalFrameDefault, virtual addresses
  uint64_t code_type = 0;                 // PyCode_Type's virtual address
  std::string version() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The file's interpreter layout. Fails with Cause::NoPythonRuntime for a file that holds
// no CPython runtime, and with ENOTSUP for one whose version or build
// allocscope cannot walk, saying why in a message that starts with the
// version found ("3.14: ...", "3.13t: ...", "3.7: ...").
Result<PythonProgram> read_python_program(const ElfFile& elf);

}  // namespace allocscope
