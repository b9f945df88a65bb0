// CPython code objects read from a process's memory: the function's
// qualified name (its name before 3.11), its file, and the line of each
// instruction: from the location table of 3.11 on (Objects/locations.md in
// CPython's tree), 3.10's address ranges or the line number table of 3.8
// and 3.9 (Objects/lnotab_notes.txt of each).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/python/program.h"

namespace allocscope {

struct PythonCode {
  std::string qualname, filename;
  int32_t first_line = 0;
  int32_t first_traceable = 0;  // code units before it set the frame up
  PythonLineTable kind = PythonLineTable::kLocations;
  std::vector<uint8_t> linetable;
};

// Fills `out` from the target's memory at `addr`; false when unreadable.
using ReadMemory = std::function<bool(uint64_t addr, std::span<uint8_t> out)>;

// The code object at `addr`, which the kernel stamped `stamp` when it was
// sampled (AS_PY_CODE_STAMP); nullopt when it is not a code object of that
// stamp any more (freed, its memory reused) or cannot be read.
// `code_type`: PyCode_Type's runtime address in that process.
std::optional<PythonCode> read_python_code(const PythonObjectLayout& layout, uint64_t code_type,
                                           uint64_t addr, uint32_t stamp, const ReadMemory& read);

// The source line of code unit `instr`; 0 when the table gives none.
int32_t python_line(const PythonCode& code, uint32_t instr);

}  // namespace allocscope
