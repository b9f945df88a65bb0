/* SPDX-License-Identifier: GPL-2.0 */
/* Stack walks in the kernel: mappings found and cached, unwind rows looked
 * up, frames stepped, stacks sent once per id. A part of allocscope.bpf.c's
 * one translation unit, included there after state.bpf.h. */
#pragma once

static __always_inline __u64 mix(__u64 h, __u64 v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

struct vma_found {
  struct as_vma v;
  __u64 flags; /* vm_flags */
};

/* The process's id in its innermost PID namespace (what a container's own
 * tools call it): its pid's number at the pid's own level. */
static __always_inline __u32 ns_tgid_of(struct task_struct *leader) {
  struct pid *p = BPF_CORE_READ(leader, thread_pid);
  unsigned int level = BPF_CORE_READ(p, level);
  __u32 nr = 0;
  if (p && level < 32) bpf_probe_read_kernel(&nr, sizeof nr, &p->numbers[level].nr);
  return nr;
}

static long remember_vma(struct task_struct *task, struct vm_area_struct *vma, void *data) {
  struct vma_found *f = data;
  f->v.start = vma->vm_start;
  f->v.end = vma->vm_end;
  f->v.pgoff = (__u64)vma->vm_pgoff << 12;
  f->flags = vma->vm_flags;
  struct file *file = vma->vm_file;
  if (file) {
    f->v.ino = BPF_CORE_READ(file, f_inode, i_ino);
    f->v.dev = BPF_CORE_READ(file, f_inode, i_sb, s_dev);
  }
  return 0;
}

/* Every executable file mapping of one process, named as the walks name
 * their files: userspace reads them before it builds a process's tables
 * (its /proc/PID/maps may name an overlay's file where the mapping holds
 * the file below: recent kernels, 6.18 for one, show the one and map the
 * other). */
SEC("iter/task_vma")
int list_code_vmas(struct bpf_iter__task_vma *ctx) {
  struct vm_area_struct *vma = ctx->vma;
  if (!vma || !(vma->vm_flags & AS_VM_EXEC) || !vma->vm_file) return 0;
  struct vma_found f = {};
  remember_vma(ctx->task, vma, &f);
  bpf_seq_write(ctx->meta->seq, &f.v, sizeof(f.v));
  return 0;
}

/* The scans below are global functions: verified once on their own, where
 * inlined each loop would be verified again on every path into it. */

/* The entry of `vmas` (n of them) holding addr, copied to out; 0 if none. */
__noinline int scan_stack_vmas(struct as_stack_event *ev, __u64 addr, struct as_vma *out) {
  if (!ev || !out) return 0;
  AS_UNROLL
  for (__u32 j = 0; j < AS_MAX_VMAS; j++) {
    if (j >= ev->nvmas) break;
    if (addr >= ev->vmas[j].start && addr < ev->vmas[j].end) {
      *out = ev->vmas[j];
      return 1;
    }
  }
  return 0;
}

__noinline int scan_cached_vmas(struct vma_cache *c, __u64 addr, struct as_vma *out) {
  if (!c || !out) return 0;
  AS_UNROLL
  for (int j = 0; j < VMA_CACHE; j++) {
    if (addr >= c->vmas[j].start && addr < c->vmas[j].end) {
      *out = c->vmas[j];
      return 1;
    }
  }
  return 0;
}

__noinline int cache_vma_in(struct vma_cache *c, struct as_vma *v) {
  if (!c || !v) return 0;
  AS_UNROLL
  for (int j = 0; j < VMA_CACHE; j++)
    if (c->vmas[j].start == v->start && c->vmas[j].ino == v->ino) return 0;
  c->vmas[c->next % VMA_CACHE] = *v;
  c->next++;
  return 1;
}

static __always_inline void cache_vma(__u32 tgid, struct as_vma *v) {
  struct vma_cache *c = bpf_map_lookup_elem(&process_vmas, &tgid);
  if (!c) {
    bpf_map_update_elem(&process_vmas, &tgid, &empty_vma_cache, BPF_NOEXIST);
    c = bpf_map_lookup_elem(&process_vmas, &tgid);
    if (!c) return;
  }
  cache_vma_in(c, v);
}

/* Puts the executable mapping holding `addr` in w->vma, looked up in the
 * kernel the first time (and added to the event's list); false (w->stop
 * set) when there is none. A copy rather than an index into the list: the
 * verifier then follows one path past the search, not one per entry. */
static __always_inline bool find_vma(struct walk_scratch *w, __u64 addr) {
  struct as_stack_event *ev = &w->ev;
  if (scan_stack_vmas(ev, addr, &w->vma)) return true;
  __u32 n = ev->nvmas;
  if (n >= AS_MAX_VMAS) {
    /* Full of mappings earlier walks met: start over with this walk's own,
     * unless it is this walk that needs so many. */
    if (ev->nframes < n)
      w->restart = 1;
    else
      w->stop = AS_STOP_VMAS;
    return false;
  }
  struct task_struct *task = bpf_get_current_task_btf();
  __u32 tgid = task->tgid;
  struct vma_found f = {};
  long err = bpf_find_vma(task, addr, remember_vma, &f, 0);
  if (err == -AS_EBUSY) {
    if (!scan_cached_vmas(bpf_map_lookup_elem(&process_vmas, &tgid), addr, &f.v)) {
      w->stop = AS_STOP_VMA_BUSY;
      return false;
    }
  } else if (err || !(f.flags & AS_VM_EXEC)) { /* not code: a return address that is not one */
    w->stop = AS_STOP_BAD_IP;
    return false;
  } else {
    cache_vma(tgid, &f.v);
  }
  ev->vmas[n] = f.v;
  ev->nvmas = n + 1;
  w->vma = f.v;
  return true;
}

static __always_inline void request_table(struct as_vma *v, struct as_file_key *key) {
  __u8 one = 1;
  if (bpf_map_update_elem(&table_requests, key, &one, BPF_NOEXIST) != 0) return; /* asked already */
  struct as_table_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    bpf_map_delete_elem(&table_requests, key); /* ask again next time */
    return;
  }
  count(AS_CNT_TABLE_REQUESTS);
  e->kind = AS_EV_NEED_TABLE;
  e->tgid = bpf_get_current_pid_tgid() >> 32;
  e->vma = *v;
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* The row of the table of file (ino, dev) that covers file offset `off`:
 * binary search for the last row whose pc is at most `off`. A global
 * function, verified once on its own: inlined, its loop would be verified
 * again on every path. The key is built on its own stack: verifiers before
 * 6.2 take no map key from memory a caller passed in. */
__noinline int lookup_row(__u64 ino, __u32 dev, __u64 off, struct as_unwind_row *out) {
  if (!out) return AS_STOP_NO_INFO;
  struct as_file_key key = {.ino = ino, .dev = dev};
  void *table = bpf_map_lookup_elem(&unwind_tables, &key);
  if (!table) return AS_STOP_NO_TABLE;
  struct as_unwind_row none = {0, 0, AS_ROW_NONE, 0};
  const struct as_unwind_row *r = off <= 0xffffffffULL ? as_table_find(table, off) : 0;
  *out = r ? *r : none;
  return r ? AS_STOP_NONE : AS_STOP_NO_INFO;
}

/* The step, verified once on its own (a global function). */
__noinline int unwind_step(struct as_unwind_row *row, struct as_unwind_regs *regs,
                           struct stack_window *window) {
  if (!row || !regs || !window) return AS_STOP_BAD_FRAME;
  return as_unwind_step(row, regs, window->limit, window);
}

/* bpf_loop's context must be on the stack: it holds the way to the rest. */
struct walk_ctx {
  struct walk_scratch *w;
  struct row_cache *rows; /* NULL: none could be made, every frame a miss */
  struct stack_window *window;
};

#define AS_MAX_OWN_FRAMES 8 /* see struct own_frames */

/* One frame of the walk: records its pc and moves to its caller. The frame
 * number is read from the event, not taken from the loop, so that the
 * verifier sees one frame, not 127 different ones. */
static long walk_frame(__u64 unused, void *data) {
  struct walk_ctx *wc = data;
  struct walk_scratch *w = wc->w;
  struct row_cache *rows = wc->rows;
  struct as_stack_event *ev = &w->ev;
  __u32 n = ev->nframes;
  if (n >= AS_MAX_FRAMES) {
    w->stop = AS_STOP_DEPTH;
    return 1;
  }
  __u64 ip = w->regs.ip;
  /* A return address: the call is before it. The first pc (the allocator's
   * return into its caller, or a USDT probe's site) is where that code
   * resumes, and its state; so is a pc a signal interrupted. */
  __u64 at = w->steps == 0 || w->regs.ip_exact ? ip : ip - 1;
  __u64 tag = at | (w->generation << 48);
  struct cached_row *c = rows ? &rows->rows[(at ^ (at >> 9)) & (ROW_CACHE - 1)] : 0;
  if (c && c->tag == tag) {
    w->row = c->row;
  } else {
    w->misses++;
    if (!find_vma(w, at)) return 1;
    struct as_vma *v = &w->vma;
    w->row = frame_pointer_rule;
    /* Code in anonymous memory (JIT) has no file to describe it: frame
     * pointers, checked like any row. */
    if (use_tables && v->ino) {
      if (lookup_row(v->ino, v->dev, at - v->start + v->pgoff, &w->row) == AS_STOP_NO_TABLE) {
        struct as_file_key key = {.ino = v->ino, .dev = v->dev};
        request_table(v, &key);
        ev->frames[n] = ip; /* its pc is known, its caller not yet */
        ev->nframes = n + 1;
        w->stop = AS_STOP_NO_TABLE;
        return 1;
      }
    }
    if (c) {
      c->tag = tag;
      c->row = w->row;
    }
  }
  bool record = true;
  if (w->until_end) {
    bool own = w->steps > 0 && ((at >= w->until && at < w->until_end) || (at >= w->also && at < w->also_end));
    if (own) {
      w->own_found = 1;
      record = false;
    } else if (w->own_found) {
      w->until_end = 0; /* the first frame past them */
    } else if (w->steps >= AS_MAX_OWN_FRAMES) {
      w->stop = AS_STOP_BAD_FRAME;
      return 1;
    } else {
      record = false;
    }
  } else if (w->skip) {
    w->skip--;
    record = false;
  }
  if (record) {
    ev->frames[n] = ip;
    ev->nframes = n + 1;
    w->id = mix(w->id, ip);
  }
  int rc = unwind_step(&w->row, &w->regs, wc->window);
  if (rc != AS_STOP_NONE) {
    w->stop = rc;
    return 1;
  }
  w->steps++;
  return 0;
}

/* Walks the current thread's user stack from the registers at the
 * allocator's return (the caller's) into the thread's scratch event, and
 * gives the stack's id; NULL when there is no scratch. */
#define STACK_GUESS (8ULL << 20) /* glibc's default thread stack */

/* The first frames of a walk that are not the program's: `count` of them,
 * or (until_end != 0) every one up to the first whose call lies in
 * [until, until_end) or [also, also_end), found within AS_MAX_OWN_FRAMES,
 * and those above it still in either (Go's runtime sampling inside mallocgc,
 * or inside an allocator specialized by size that mallocgc's table called). */
struct own_frames {
  __u32 count;
  __u64 until, until_end, also, also_end;
};

static __always_inline struct walk_scratch *walk_stack(struct pt_regs *ctx, __u16 fn,
                                                       const struct own_frames *own) {
  __u64 ip = ctx->ip, sp = ctx->sp, bp = ctx->bp;
  struct task_struct *task = bpf_get_current_task_btf();
  struct walk_scratch *w = bpf_task_storage_get(&walks, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  struct stack_window *window = bpf_task_storage_get(&windows, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!w || !window) return 0;
  struct as_stack_event *ev = &w->ev;
  /* A thread's stack mapping ends where it did: looked up once per thread
   * (again if sp is past it: a signal stack). */
  if (sp >= w->stack_end) {
    struct vma_found stack = {};
    w->stack_end = bpf_find_vma(task, sp, remember_vma, &stack, 0) == 0 ? stack.v.end : 0;
  }
  /* The lookup fails while another thread holds the mmap lock (it is
   * creating a thread's stack, say): this walk is then bounded by a default
   * stack's size above sp, and the next one asks again. Bounded by 0, every
   * frame would look bad and the stack be cut at the allocator's caller. */
  __u64 stack_end = w->stack_end ? w->stack_end : sp + STACK_GUESS;
  window->len = 0; /* the stack has changed since the last walk */
  window->limit = stack_end;
  w->stack_limit = stack_end;
  /* The id covers the process instance: a new program (exec) or a new
   * process with the same pid never shares a stack with an old one. */
  struct task_struct *leader = task->group_leader;
  __u64 instance = mix(mix(mix(task->tgid, leader->start_time), leader->self_exec_id), fn);
  struct walk_ctx wc = {
      .w = w,
      .rows = bpf_task_storage_get(&row_caches, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE),
      .window = window,
  };
  AS_UNROLL
  for (int attempt = 0; attempt < 2; attempt++) {
    ev->nframes = 0;
    w->regs.ip = ip;
    w->regs.sp = sp;
    w->regs.bp = bp;
    w->regs.bp_lost = 0;
    w->regs.ip_exact = 0;
    w->id = instance;
    w->stop = AS_STOP_NONE;
    w->restart = 0;
    w->misses = 0;
    w->skip = own->count;
    w->until = own->until;
    w->until_end = own->until_end;
    w->also = own->also;
    w->also_end = own->also_end;
    w->own_found = 0;
    w->steps = 0;
    AS_PART(AS_PART_WALK_SETUP);
    bpf_loop(AS_MAX_FRAMES, walk_frame, &wc, 0);
    AS_PART(AS_PART_WALK);
    if (!w->restart) break;
    ev->nvmas = 0;
    w->generation++;
  }
  __u32 stop = w->stop;
  if (stop == AS_STOP_NONE) stop = w->restart ? AS_STOP_VMAS : AS_STOP_DEPTH;
  count(AS_CNT_STOP_FIRST + (stop < 10 ? stop : 0));
  count_bytes(AS_CNT_FRAMES, ev->nframes);
  count_bytes(AS_CNT_ROW_MISSES, w->misses);
  ev->kind = AS_EV_STACK;
  ev->tgid = task->tgid;
  ev->fn = fn;
  ev->stop = stop;
  ev->ns_tgid = ns_tgid_of(leader);
  ev->id = mix(w->id, stop);
  ev->cgroup = bpf_get_current_cgroup_id();
  ev->start_ns = leader->start_time;
  ev->exec_id = leader->self_exec_id;
  bpf_probe_read_kernel_str(ev->comm, sizeof(ev->comm), leader->comm);
  AS_PART(AS_PART_WALK_END);
  return w;
}

/* A walk that stopped for want of a table, sent with the stopped frame's
 * registers and the stack above them (up to AS_DEFER_STACK_BYTES), so that
 * userspace finishes it. Its id is its own: another stack may share the
 * frames found so far. A program's first calls after exec, before its
 * table is in, all defer (exact mode: every one), so records come in three
 * sizes: most walks need a few KiB of stack, and a full-size record for
 * each would fill the ring buffer ten times sooner. */
struct deferred_event {
  struct as_stack_event ev;
  struct as_deferred_walk walk;
  __u8 stack[AS_DEFER_STACK_BYTES + 4096]; /* slack: bounds each page copy for the verifier */
};
#define DEFER_SMALL 4096
#define DEFER_MEDIUM 16384
struct deferred_small {
  struct as_stack_event ev;
  struct as_deferred_walk walk;
  __u8 stack[DEFER_SMALL];
};
struct deferred_medium {
  struct as_stack_event ev;
  struct as_deferred_walk walk;
  __u8 stack[DEFER_MEDIUM];
};

static __always_inline void fill_deferred(struct as_stack_event *to, struct as_deferred_walk *walk,
                                          struct walk_scratch *w) {
  bpf_probe_read_kernel(to, sizeof(*to), &w->ev); /* too big to copy inline */
  walk->ip = w->regs.ip;
  walk->sp = w->regs.sp;
  walk->bp = w->regs.bp;
  walk->bp_lost = w->regs.bp_lost;
  walk->ip_exact = w->regs.ip_exact;
  walk->skip = w->skip;
  walk->until = w->until;
  walk->until_end = w->until_end;
  walk->also = w->also;
  walk->also_end = w->also_end;
  walk->own_found = w->own_found;
  walk->steps = w->steps;
  walk->stack_end = w->stack_limit;
}

/* A record of a small size with the `need` bytes above sp (1 to SIZE) read
 * at once: 1 sent, 0 no room in the ring buffer, -1 the read failed (a page
 * not present: the full-size record copies page by page). */
#define SEND_DEFERRED_SIZED(name, type, size)                                               \
  static __always_inline int name(struct walk_scratch *w, __u64 need) {                     \
    struct type *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);                           \
    if (!d) return 0;                                                                       \
    fill_deferred(&d->ev, &d->walk, w);                                                     \
    __u64 len = ((need - 1) & ((size)-1)) + 1; /* need is in [1, size]: for the verifier */ \
    if (bpf_probe_read_user(d->stack, len, (void *)w->regs.sp) != 0) {                      \
      bpf_ringbuf_discard(d, 0);                                                            \
      return -1;                                                                            \
    }                                                                                       \
    d->walk.len = len;                                                                      \
    bpf_ringbuf_submit(d, BPF_RB_FORCE_WAKEUP);                                             \
    return 1;                                                                               \
  }
SEND_DEFERRED_SIZED(send_deferred_small, deferred_small, DEFER_SMALL)
SEND_DEFERRED_SIZED(send_deferred_medium, deferred_medium, DEFER_MEDIUM)

/* Copies the stack from sp + *copied up to the next page boundary (or max);
 * false when done, or when that page could not be read. */
static __always_inline bool copy_stack_page(struct deferred_event *d, __u64 sp, __u64 max, __u64 *copied) {
  __u64 done = *copied;
  if (done >= max) return false;
  __u64 from = sp + done, chunk = 4096 - (from & 4095);
  if (chunk > max - done) chunk = max - done;
  /* done < max <= AS_DEFER_STACK_BYTES, a power of two, and chunk is in
   * [1, 4096]: the masks only tell the verifier so (6.1's loses the bounds). */
  chunk = ((chunk - 1) & 4095) + 1;
  if (bpf_probe_read_user(d->stack + (done & (AS_DEFER_STACK_BYTES - 1)), chunk, (void *)from) != 0)
    return false;
  *copied = done + chunk;
  return true;
}

/* The full-size record, its stack copied a page at a time (a read crossing
 * the end of the stack mapping, or a missing page, would fail whole). */
static __always_inline bool send_deferred_full(struct walk_scratch *w, __u64 max) {
  struct deferred_event *d = bpf_ringbuf_reserve(&events, sizeof(*d), 0);
  if (!d) return false;
  fill_deferred(&d->ev, &d->walk, w);
  __u64 copied = 0, sp = w->regs.sp;
  /* A loop by hand (the 6.1 verifier refused the compiler's layout of it):
   * the first page may be partial, so one more than the whole pages. */
  _Static_assert(AS_DEFER_STACK_BYTES / 4096 + 1 == 9, "pages copied below");
  copy_stack_page(d, sp, max, &copied) && copy_stack_page(d, sp, max, &copied) &&
      copy_stack_page(d, sp, max, &copied) && copy_stack_page(d, sp, max, &copied) &&
      copy_stack_page(d, sp, max, &copied) && copy_stack_page(d, sp, max, &copied) &&
      copy_stack_page(d, sp, max, &copied) && copy_stack_page(d, sp, max, &copied) &&
      copy_stack_page(d, sp, max, &copied);
  d->walk.len = copied;
  bpf_ringbuf_submit(d, BPF_RB_FORCE_WAKEUP);
  return true;
}

/* Whether a walk short of a table may be deferred: its record copies up to
 * 32 KiB of stack, so only while the ring buffer is at most half full.
 * Past that the stack is sent cut short (and counted): a burst of such
 * walks (an unheld program's first calls, each a new stack in exact mode)
 * then costs frames, never samples. */
static __always_inline bool may_defer(void) {
  if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) <= bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2)
    return true;
  count(AS_CNT_NOT_DEFERRED);
  return false;
}

static __always_inline bool send_deferred(struct walk_scratch *w) {
  w->ev.id = mix(w->ev.id, bpf_ktime_get_ns());
  __u64 need = AS_DEFER_STACK_BYTES, sp = w->regs.sp, stack_end = w->stack_limit;
  if (stack_end > sp && stack_end - sp < need) need = stack_end - sp;
  int sent = -1;
  if (need > 0 && need <= DEFER_SMALL)
    sent = send_deferred_small(w, need);
  else if (need > 0 && need <= DEFER_MEDIUM)
    sent = send_deferred_medium(w, need);
  if (sent < 0 && send_deferred_full(w, need)) sent = 1;
  if (sent <= 0) count(AS_CNT_STACK_DROPS);
  return sent > 0;
}

/* Sends the stack unless userspace has it: it is queued before any event
 * that names its id (the ring buffer keeps the order of reservations, and
 * the id is marked sent only once the stack is in). */
static __always_inline bool send_stack(struct as_stack_event *ev) {
  __u64 id = ev->id;
  if (bpf_map_lookup_elem(&sent_stacks, &id)) return true;
  /* Only the Python frames it has: most stacks have none. */
  __u64 npy = ev->npy & 127; /* bounds the verifier keeps */
  if (npy > AS_MAX_PY_FRAMES) npy = AS_MAX_PY_FRAMES;
  __u64 size = __builtin_offsetof(struct as_stack_event, py) + npy * sizeof(struct as_py_frame);
  if (bpf_ringbuf_output(&events, ev, size, BPF_RB_FORCE_WAKEUP) != 0) {
    count(AS_CNT_STACK_DROPS);
    return false;
  }
  __u8 one = 1;
  bpf_map_update_elem(&sent_stacks, &id, &one, BPF_ANY);
  return true;
}
