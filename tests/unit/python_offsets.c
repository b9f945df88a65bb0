/* The offsets of CPython's structures as one version's headers (internal
 * ones included) lay them out, built as PYTHON_OFFSETS_FN() once per
 * version: Debian's 3.11 (libpython3.11-dev), and pyenv's 3.8, 3.9, 3.10
 * and 3.12 where they are installed. */
#define Py_BUILD_CORE 1
#include "python_offsets.h"

#include <Python.h>
#include <stddef.h>

#if PY_MINOR_VERSION >= 9
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#else
#include "internal/pycore_pystate.h"
#endif
#if PY_MINOR_VERSION >= 11
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#else
#include "frameobject.h"
#endif

struct python_offsets PYTHON_OFFSETS_FN(void) {
  struct python_offsets o = {
      .minor = PY_MINOR_VERSION,
#if PY_MINOR_VERSION < 12
      .holder = offsetof(_PyRuntimeState, gilstate.tstate_current),
#else
      .holder = PY_ABSENT,
#endif
      .interp_head = offsetof(_PyRuntimeState, interpreters.head),
      .tstate_next = offsetof(PyThreadState, next),
      .tstate_thread = offsetof(PyThreadState, thread_id),
#if PY_MINOR_VERSION >= 11
      .threads_head = offsetof(PyInterpreterState, threads.head),
      .tstate_frame = offsetof(PyThreadState, cframe),
      .cframe_frame = offsetof(_PyCFrame, current_frame),
      .frame_code = offsetof(_PyInterpreterFrame, f_code),
      .frame_previous = offsetof(_PyInterpreterFrame, previous),
      .frame_instr = offsetof(_PyInterpreterFrame, prev_instr),
      .frame_owner = offsetof(_PyInterpreterFrame, owner),
#if PY_MINOR_VERSION == 11
      .frame_entry = offsetof(_PyInterpreterFrame, is_entry),
#else
      .frame_entry = PY_ABSENT,
#endif
      .code_units = offsetof(PyCodeObject, co_code_adaptive),
      .code_qualname = offsetof(PyCodeObject, co_qualname),
      .code_linetable = offsetof(PyCodeObject, co_linetable),
      .code_first_traceable = offsetof(PyCodeObject, _co_firsttraceable),
#else
      .threads_head = offsetof(PyInterpreterState, tstate_head),
      .tstate_frame = offsetof(PyThreadState, frame),
      .cframe_frame = PY_ABSENT,
      .frame_code = offsetof(PyFrameObject, f_code),
      .frame_previous = offsetof(PyFrameObject, f_back),
      .frame_instr = offsetof(PyFrameObject, f_lasti),
      .frame_owner = PY_ABSENT,
      .frame_entry = PY_ABSENT,
      .code_units = PY_ABSENT,
      .code_qualname = offsetof(PyCodeObject, co_name),
#if PY_MINOR_VERSION == 10
      .code_linetable = offsetof(PyCodeObject, co_linetable),
#else
      .code_linetable = offsetof(PyCodeObject, co_lnotab),
#endif
      .code_first_traceable = PY_ABSENT,
#endif
      .code_first_line = offsetof(PyCodeObject, co_firstlineno),
      .code_filename = offsetof(PyCodeObject, co_filename),
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
