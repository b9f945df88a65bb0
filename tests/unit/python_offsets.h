/* CPython's offsets from one version's headers (python_offsets.c, built
 * once per version whose headers are here): the truth allocscope's tables
 * are checked against. A field the version does not have is PY_ABSENT. */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PY_ABSENT ((size_t)0xffff)

struct python_offsets {
  size_t minor;
  size_t holder, interp_head, threads_head, tstate_next, tstate_thread, tstate_frame, cframe_frame;
  size_t frame_code, frame_previous, frame_instr, frame_owner, frame_entry;
  size_t code_first_line, code_units, code_filename, code_qualname, code_linetable, code_first_traceable;
  size_t ob_type, unicode_length, unicode_state, ascii_size, compact_size, bytes_size, bytes_data;
};
struct python_offsets python311_offsets(void);
struct python_offsets python38_offsets(void);
struct python_offsets python39_offsets(void);
struct python_offsets python310_offsets(void);
struct python_offsets python312_offsets(void);

#ifdef __cplusplus
}
#endif
