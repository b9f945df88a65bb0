/* The offsets of CPython 3.11's structures as Debian's headers (libpython3.11-dev,
 * internal ones included) lay them out: the truth allocscope's table of them
 * is checked against. */
#define Py_BUILD_CORE 1
#include "python311_offsets.h"

#include <Python.h>
#include <stddef.h>

#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"

struct python311_offsets python311_offsets(void) {
  struct python311_offsets o = {
      .holder = offsetof(_PyRuntimeState, gilstate.tstate_current),
      .interp_head = offsetof(_PyRuntimeState, interpreters.head),
      .threads_head = offsetof(PyInterpreterState, threads.head),
      .tstate_next = offsetof(PyThreadState, next),
      .tstate_thread = offsetof(PyThreadState, thread_id),
      .tstate_frame = offsetof(PyThreadState, cframe),
      .cframe_frame = offsetof(_PyCFrame, current_frame),
      .frame_code = offsetof(_PyInterpreterFrame, f_code),
      .frame_previous = offsetof(_PyInterpreterFrame, previous),
      .frame_instr = offsetof(_PyInterpreterFrame, prev_instr),
      .frame_owner = offsetof(_PyInterpreterFrame, owner),
      .frame_entry = offsetof(_PyInterpreterFrame, is_entry),
      .code_first_line = offsetof(PyCodeObject, co_firstlineno),
      .code_units = offsetof(PyCodeObject, co_code_adaptive),
      .code_filename = offsetof(PyCodeObject, co_filename),
      .code_qualname = offsetof(PyCodeObject, co_qualname),
      .code_linetable = offsetof(PyCodeObject, co_linetable),
      .code_first_traceable = offsetof(PyCodeObject, _co_firsttraceable),
      .ob_type = offsetof(PyObject, ob_type),
      .unicode_length = offsetof(PyASCIIObject, length),
      .unicode_state = offsetof(PyASCIIObject, state),
      .ascii_size = sizeof(PyASCIIObject),
      .compact_size = sizeof(PyCompactUnicodeObject),
      .bytes_size = offsetof(PyVarObject, ob_size),
      .bytes_data = offsetof(PyBytesObject, ob_sval),
  };
  return o;
}
