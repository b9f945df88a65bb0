/* CPython 3.11's offsets from its headers (python311_offsets.c). */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct python311_offsets {
  size_t holder, interp_head, threads_head, tstate_next, tstate_thread, tstate_frame, cframe_frame;
  size_t frame_code, frame_previous, frame_instr, frame_owner, frame_entry;
  size_t code_first_line, code_units, code_filename, code_qualname, code_linetable, code_first_traceable;
  size_t ob_type, unicode_length, unicode_state, ascii_size, compact_size, bytes_size, bytes_data;
};
struct python311_offsets python311_offsets(void);

#ifdef __cplusplus
}
#endif
