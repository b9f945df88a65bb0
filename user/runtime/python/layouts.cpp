#include "runtime/python/layouts.h"

namespace allocscope {
namespace {

// 3.8 to 3.10: frames are PyFrameObjects, each run by a call of the
// evaluation loop of its own; f_lasti says where it is. Names are co_name
// (no co_qualname before 3.11).
PythonProgram frame_object_layout(int minor) {
  PythonProgram p;
  p.major = 3;
  p.minor = minor;
  as_py_layout& k = p.kernel;
  k.holder = minor == 8 ? 1368 : 568;  // gilstate.tstate_current
  k.interp_head = 32;
  k.threads_head = 8;  // tstate_head
  k.tstate_next = 8;
  k.tstate_thread = 176;
  k.tstate_frame = 24;  // frame
  k.cframe_frame = AS_PY_ABSENT;
  k.frame_code = 32;                       // f_code
  k.frame_previous = 24;                   // f_back
  k.frame_instr = minor == 10 ? 96 : 104;  // f_lasti
  k.frame_owner = AS_PY_ABSENT;
  k.frame_entry = AS_PY_ABSENT;
  k.code_first_line = 40;
  k.code_units = AS_PY_ABSENT;
  k.owner_cstack = AS_PY_NO_OWNER;
  k.instr_kind = minor == 10 ? AS_PY_INSTR_UNIT_INDEX : AS_PY_INSTR_BYTE_OFFSET;
  k.frame_per_call = 1;
  PythonObjectLayout& o = p.objects;
  o.code_filename = 104;
  o.code_qualname = 112;   // co_name
  o.code_linetable = 120;  // co_lnotab (3.8, 3.9), co_linetable (3.10)
  o.code_first_line = 40;
  o.line_table = minor == 10 ? PythonLineTable::kAddressRanges : PythonLineTable::kLineNumbers;
  o.ascii_size = 48;
  o.compact_size = 72;
  return p;
}

// 3.12: _PyInterpreterFrames as in 3.11, the evaluation loop's entry frames
// marked by their owner; no GIL holder kept in _PyRuntime.
PythonProgram python_312_layout() {
  PythonProgram p;
  p.major = 3;
  p.minor = 12;
  as_py_layout& k = p.kernel;
  k.holder = AS_PY_ABSENT;
  k.interp_head = 40;
  k.threads_head = 72;
  k.tstate_next = 8;
  k.tstate_thread = 136;
  k.tstate_frame = 56;  // cframe
  k.cframe_frame = 0;   // current_frame
  k.frame_code = 0;
  k.frame_previous = 8;
  k.frame_instr = 56;  // prev_instr
  k.frame_owner = 70;
  k.frame_entry = AS_PY_ABSENT;
  k.code_first_line = 68;
  k.code_units = 192;
  k.owner_cstack = 3;  // FRAME_OWNED_BY_CSTACK
  PythonObjectLayout& o = p.objects;
  o.code_filename = 112;
  o.code_qualname = 128;
  o.code_linetable = 136;
  o.code_first_line = 68;
  o.code_first_traceable = 176;
  o.code_units = 192;
  o.ascii_size = 40;
  o.compact_size = 56;
  return p;
}

}  // namespace

PythonProgram python_311_layout() {
  PythonProgram p;
  p.major = 3;
  p.minor = 11;
  as_py_layout& k = p.kernel;
  k.holder = 576;  // gilstate.tstate_current
  k.interp_head = 40;
  k.threads_head = 16;
  k.tstate_next = 8;
  k.tstate_thread = 152;
  k.tstate_frame = 56;  // cframe
  k.cframe_frame = 8;   // current_frame
  k.frame_code = 32;
  k.frame_previous = 48;
  k.frame_instr = 56;  // prev_instr
  k.frame_owner = 69;
  k.frame_entry = 68;  // is_entry
  k.code_first_line = 72;
  k.code_units = 184;
  k.owner_cstack = AS_PY_NO_OWNER;
  PythonObjectLayout& o = p.objects;
  o.code_filename = 112;
  o.code_qualname = 128;
  o.code_linetable = 136;
  o.code_first_line = 72;
  o.code_first_traceable = 168;
  o.code_units = 184;
  o.ascii_size = 48;
  o.compact_size = 72;
  return p;
}

std::optional<PythonProgram> python_table_layout(int major, int minor) {
  if (major != 3) return std::nullopt;
  if (minor >= 8 && minor <= 10) return frame_object_layout(minor);
  if (minor == 11) return python_311_layout();
  if (minor == 12) return python_312_layout();
  return std::nullopt;
}

}  // namespace allocscope
