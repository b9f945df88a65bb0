/* SPDX-License-Identifier: GPL-2.0 */
/* Python frames of a sampled stack: the interpreter's own list of frames,
 * read from the sampled thread's Python thread state. A part of
 * allocscope.bpf.c's one translation unit, included after walk.bpf.h. */
#pragma once

/* A pointer-sized field at `off` of what `base` points to; 0 when unreadable. */
static __always_inline __u64 read_user_u64(__u64 base, __u32 off) {
  __u64 v = 0;
  if (bpf_probe_read_user(&v, sizeof(v), (const void *)(base + off)) != 0) return 0;
  return v;
}

/* One thread state of the interpreter's list: stops at the sampled thread's. */
static long find_py_thread(__u64 unused, void *data) {
  struct walk_scratch *w = *(struct walk_scratch **)data;
  __u64 t = w->py_tstate;
  if (!t) return 1;
  if (read_user_u64(t, w->py.tstate_thread) == w->py_thread) {
    w->py_found = 1;
    return 1;
  }
  w->py_tstate = read_user_u64(t, w->py.tstate_next);
  return 0;
}

/* A field of the frame copy at a layout's offset (bounded for the verifier). */
static __always_inline __u64 frame_u64(struct walk_scratch *w, __u16 off) {
  __u64 v;
  __builtin_memcpy(&v, w->py_buf + (off & (AS_PY_FRAME_BYTES - 1)), sizeof(v));
  return v;
}

/* The index of the code unit a frame runs, from its instruction field: a
 * pointer into the code object's units (3.11 on), or f_lasti, an int in
 * bytes (3.8, 3.9) or units (3.10), negative before the first. */
static __always_inline __u32 code_unit(struct walk_scratch *w, __u64 code, __u64 instr) {
  if (w->py.instr_kind == AS_PY_INSTR_POINTER) {
    __u64 units = code + w->py.code_units;
    return instr >= units && instr - units < (1ULL << 32) ? (instr - units) / 2 : AS_PY_INSTR_UNKNOWN;
  }
  __s32 lasti = (__s32)instr;
  if (lasti < 0) return AS_PY_INSTR_UNKNOWN;
  return w->py.instr_kind == AS_PY_INSTR_BYTE_OFFSET ? (__u32)lasti / 2 : (__u32)lasti;
}

/* One interpreter frame: recorded, unless it is an evaluation loop's entry
 * frame (3.12 on), which only marks where the loop's call began. */
static long walk_py_frame(__u64 unused, void *data) {
  struct walk_scratch *w = *(struct walk_scratch **)data;
  struct as_stack_event *ev = &w->ev;
  __u64 f = w->py_frame;
  if (!f) return 1;
  __u32 len = ((w->py.frame_bytes - 1) & (AS_PY_FRAME_BYTES - 1)) + 1;
  if (bpf_probe_read_user(w->py_buf, len, (const void *)f) != 0) return 1;
  __u32 n = ev->npy;
  __u8 owner = w->py_buf[w->py.frame_owner & (AS_PY_FRAME_BYTES - 1)];
  w->py_frame = frame_u64(w, w->py.frame_previous);
  /* Owned by the C stack or the interpreter (3.14 has both; 3.13 the one):
   * an evaluation loop's entry, or its thread's base frame (3.15). */
  if (w->py.owner_cstack != AS_PY_NO_OWNER && owner >= w->py.owner_cstack) {
    if (n > 0 && n <= AS_MAX_PY_FRAMES) ev->py_ends |= 1ULL << ((n - 1) & 63);
    return 0;
  }
  if (n >= AS_MAX_PY_FRAMES) {
    ev->py_cut = 1;
    count(AS_CNT_PY_DEPTH);
    return 1;
  }
  struct as_py_frame *out = &ev->py[n & (AS_MAX_PY_FRAMES - 1)];
  /* A tagged reference from 3.14 on (_PyStackRef: its low bits; objects
   * are 16-byte aligned, so the mask clears no earlier pointer's bit). */
  __u64 code = frame_u64(w, w->py.frame_code) & ~7ULL, instr = frame_u64(w, w->py.frame_instr);
  out->code = code;
  out->instr = code_unit(w, code, instr);
  __s32 first_line = 0;
  bpf_probe_read_user(&first_line, sizeof(first_line), (const void *)(code + w->py.code_first_line));
  __u64 filename = read_user_u64(code, w->py.code_filename);
  out->stamp = AS_PY_CODE_STAMP(first_line, filename);
  if (w->py.frame_per_call ||
      (w->py.frame_entry != AS_PY_ABSENT && w->py_buf[w->py.frame_entry & (AS_PY_FRAME_BYTES - 1)]))
    ev->py_ends |= 1ULL << (n & 63);
  ev->npy = n + 1;
  /* The stamp too: a stack sent once by its id is never sent again, and a
   * freed code object's address may run another's code at the same unit. */
  ev->id = mix(mix(ev->id, code), (__u64)out->instr << 32 | out->stamp);
  return 0;
}

/* The sampled thread's Python thread state; 0 when it has none. The GIL's
 * holder first (where the version keeps it): a thread that allocates
 * objects holds it. */
static __always_inline __u64 py_thread_state(struct walk_scratch *w, __u64 runtime) {
  struct walk_scratch *self = w;
  if (w->py.holder != AS_PY_ABSENT) {
    __u64 t = read_user_u64(runtime, w->py.holder);
    if (t && read_user_u64(t, w->py.tstate_thread) == w->py_thread) return t;
  }
  __u64 interp = read_user_u64(runtime, w->py.interp_head);
  if (!interp) return 0;
  w->py_tstate = read_user_u64(interp, w->py.threads_head);
  w->py_found = 0;
  bpf_loop(AS_PY_MAX_THREADS, find_py_thread, &self, 0);
  return w->py_found ? w->py_tstate : 0;
}

/* The layout of the CPython program `mm` runs; 0 for other programs. */
static __always_inline struct as_py_layout *python_layout(struct mm_struct *mm) {
  struct as_file_key key = {
      .ino = BPF_CORE_READ(mm, exe_file, f_inode, i_ino),
      .dev = BPF_CORE_READ(mm, exe_file, f_inode, i_sb, s_dev),
  };
  return bpf_map_lookup_elem(&python_files, &key);
}

/* Whether process `tgid` (of memory `mm`) runs CPython, from its program
 * or from a library. */
static __always_inline bool runs_python(__u32 tgid, struct mm_struct *mm) {
  return bpf_map_lookup_elem(&python_processes, &tgid) || python_layout(mm);
}

/* The layout of the CPython the process runs and its _PyRuntime's address:
 * from a library it mapped (python_processes) or from its program. */
static __always_inline bool python_runtime(struct walk_scratch *w, __u32 tgid, struct mm_struct *mm,
                                           __u64 *runtime) {
  struct as_py_process *p = bpf_map_lookup_elem(&python_processes, &tgid);
  if (p) {
    w->py = p->layout;
    *runtime = p->bias + w->py.runtime;
    return true;
  }
  struct as_py_layout *l = python_layout(mm);
  if (!l) return false;
  w->py = *l;
  *runtime = BPF_CORE_READ(mm, start_code) - w->py.exec_vaddr + w->py.runtime;
  return true;
}

/* Adds the Python frames of a CPython program's sampled thread to its
 * stack event (and its id). Nothing for other programs. */
static __always_inline void walk_python(struct walk_scratch *w) {
  struct as_stack_event *ev = &w->ev;
  ev->npy = 0;
  ev->py_cut = 0;
  ev->py_ends = 0;
  struct task_struct *task = bpf_get_current_task_btf();
  struct mm_struct *mm = task->mm;
  if (!mm) return;
  __u64 runtime = 0;
  if (!python_runtime(w, task->tgid, mm, &runtime)) return;
  w->py_thread = BPF_CORE_READ(task, thread.fsbase);
  __u64 tstate = py_thread_state(w, runtime);
  __u64 frame = tstate ? read_user_u64(tstate, w->py.tstate_frame) : 0;
  if (frame && w->py.cframe_frame != AS_PY_ABSENT) frame = read_user_u64(frame, w->py.cframe_frame);
  w->py_frame = frame;
  struct walk_scratch *self = w;
  if (frame) bpf_loop(AS_MAX_PY_FRAMES + 16, walk_py_frame, &self, 0);
  count(ev->npy ? AS_CNT_PY_STACKS : AS_CNT_PY_NO_THREAD);
  count_bytes(AS_CNT_PY_FRAMES, ev->npy);
}
