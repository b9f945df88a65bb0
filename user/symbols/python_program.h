// A CPython interpreter program (3.11, 3.13), read from its file: where its
// runtime state, thread states, frames and code objects keep what a stack
// walk needs. 3.13 publishes that itself (_Py_DebugOffsets at the start of
// _PyRuntime); 3.11 does not, and its offsets are a table of ours, checked
// against Debian's build by a test.
#pragma once

#include <cstdint>
#include <string>

#include "allocscope.h"
#include "base/result.h"
#include "symbols/elf_file.h"

namespace allocscope {

// Where a code object's and a string's parts lie.
struct PythonObjectLayout {
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

// The program's interpreter layout. Fails with ENOENT for a file that is
// not a CPython interpreter, and with ENOTSUP (saying why) for one whose
// version or build allocscope cannot walk.
Result<PythonProgram> read_python_program(const ElfFile& elf);

// The table of 3.11 (release builds, x86-64).
PythonProgram python_311_layout();

}  // namespace allocscope
