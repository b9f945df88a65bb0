/* SPDX-License-Identifier: GPL-2.0 */
/* Process lifecycle: fork, exec, exit, and C libraries mapped. A part of
 * allocscope.bpf.c's one translation unit, included there after
 * state.bpf.h. Events go only for processes userspace may hold samples of:
 * members, or (--all) every process not ignored. */
#pragma once

static __always_inline bool wanted(__u8 *verdict) {
  __u8 b = base_verdict(verdict);
  return b ? b != AS_PROC_IGNORED : trace_unknown;
}

/* A process of no verdict that the filters rule out, by a name judged
 * before or by running outside --cgroup: the kernel samples none of it
 * (process_traced), so none of its files is worth a stop, nor marking seen
 * (the first process that may be sampled is held for it). */
static __always_inline bool ruled_out_by_filters(__u8 *verdict) {
  return !base_verdict(verdict) && (name_verdict() == AS_PROC_IGNORED || outside_cgroup());
}

struct file_id {
  __u64 ino;
  __u32 dev;
  char name[32];
  __u64 start, pgoff; /* of a mapping: its start, and its file offset in pages */
};

static __always_inline void identify(struct file *f, struct file_id *id) {
  id->ino = BPF_CORE_READ(f, f_inode, i_ino);
  id->dev = BPF_CORE_READ(f, f_inode, i_sb, s_dev);
  bpf_probe_read_kernel_str(id->name, sizeof(id->name), BPF_CORE_READ(f, f_path.dentry, d_name.name));
}

#define AS_SIGSTOP 19

/* Whether a parent may be waiting on the process and act on its stop: a
 * job-control shell runs each job in a process group of its own, on a
 * terminal, and reports it stopped; script(1) or sudo, running a program on
 * a terminal of its own in a new session, stop themselves with it. A
 * container runtime's payload (nspawn's, on a terminal of its own) is in a
 * PID namespace below its parent's: held. */
static __always_inline bool may_be_a_shells_job(struct task_struct *t) {
  if (!BPF_CORE_READ(t, signal, tty)) return false; /* no terminal, no job control */
  struct pid *own = BPF_CORE_READ(t, signal, pids[PIDTYPE_PGID]);
  struct pid *parents = BPF_CORE_READ(t, real_parent, signal, pids[PIDTYPE_PGID]);
  if (own == parents) return false;
  return BPF_CORE_READ(t, thread_pid, level) == BPF_CORE_READ(t, real_parent, thread_pid, level);
}

/* Stops the current process until userspace has examined the file it has
 * just mapped (it runs nothing of it before: the stop is taken on the way
 * back to user mode). Never a traced process (its debugger would see the
 * stop) nor a shell's job (the shell would report it stopped); those are
 * probed late instead. `grace_ns` dates the hold later: userspace continues
 * a process held past a bound (its event lost, or far behind a backlog).
 * Returns the hold's stamp (its `held` value, never 0), or 0 when not held:
 * the event carries it, so that a late event never continues a later hold. */
static __always_inline __u64 hold_current(struct task_struct *t, __u32 tgid, __u64 grace_ns) {
  if (!hold_new_files || BPF_CORE_READ(t, ptrace) || may_be_a_shells_job(t)) return 0;
  __u64 since = bpf_ktime_get_ns() + grace_ns;
  if (bpf_map_update_elem(&held, &tgid, &since, BPF_NOEXIST) != 0) {
    /* Already held (another thread mapped a file too): it waits anyway. */
    __u64 *other = bpf_map_lookup_elem(&held, &tgid);
    if (other) return *other;
    count(AS_CNT_HOLD_REFUSED);
    return 0;
  }
  if (bpf_send_signal(AS_SIGSTOP) != 0) {
    bpf_map_delete_elem(&held, &tgid);
    count(AS_CNT_HOLD_REFUSED);
    return 0;
  }
  count(AS_CNT_HOLDS);
  struct hold_watch w = {.child = tgid, .since = since};
  __u32 parent = BPF_CORE_READ(t, real_parent, tgid);
  bpf_map_update_elem(&hold_watches, &parent, &w, BPF_ANY);
  return since;
}

#define AS_SIGTSTP 20
#define AS_SIGTTIN 21
#define AS_SIGTTOU 22
#define AS_RELAY_WINDOW_NS 250000000 /* a stop this soon after its child's hold began is its relay */

/* A process stopping itself while its child is held (or was, a moment ago:
 * it saw the stop before the child went on) passes the hold up: it is held
 * with its child and continued with it (user/probe/hold_guard.cpp), or by
 * the hold's bound, and its own parent is watched in turn. */
SEC("tp_btf/signal_generate")
int BPF_PROG(on_signal_generate, int sig, struct kernel_siginfo *info, struct task_struct *task, int group,
             int result) {
  if (sig != AS_SIGSTOP && sig != AS_SIGTSTP && sig != AS_SIGTTIN && sig != AS_SIGTTOU) return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (task->tgid != tgid || result != 0 /* TRACE_SIGNAL_DELIVERED */) return 0;
  struct hold_watch *w = bpf_map_lookup_elem(&hold_watches, &tgid);
  if (!w) return 0;
  __u32 child = w->child;
  __u64 since = w->since, *still = bpf_map_lookup_elem(&held, &child);
  if (still)
    since = *still;
  else if ((__s64)(bpf_ktime_get_ns() - since) > AS_RELAY_WINDOW_NS)
    return 0;
  if (bpf_map_update_elem(&held, &tgid, &since, BPF_NOEXIST) != 0) return 0;
  bpf_map_update_elem(&hold_relays, &child, &tgid, BPF_ANY);
  struct hold_watch up = {.child = tgid, .since = since};
  __u32 parent = task->real_parent->tgid;
  bpf_map_update_elem(&hold_watches, &parent, &up, BPF_ANY);
  count(AS_CNT_HOLD_RELAYS);
  return 0;
}

static __always_inline void set_hold(struct as_proc_event *e, __u64 stamp) {
  e->held = stamp != 0;
  e->hold = stamp;
}

/* What an exec or exit event says of the program that ended. */
static __always_inline __u32 ended_as(__u8 *verdict) {
  return verdict && (*verdict & AS_PROC_IN_PROCESS) ? AS_ENDED_IN_PROCESS : 0;
}

/* A process event, reserved and filled: 0 when the ring buffer is full. */
static __always_inline struct as_proc_event *proc_event(__u32 kind, __u32 tgid, __u32 parent,
                                                        const char *comm, const struct file_id *file,
                                                        __u64 addr, __u32 ended) {
  struct as_proc_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(AS_CNT_PROC_DROPS);
    return 0;
  }
  __builtin_memset(e, 0, sizeof(*e));
  e->kind = kind;
  e->tgid = tgid;
  e->parent = parent;
  e->ts_ns = bpf_ktime_get_ns();
  e->addr = addr;
  e->ended = ended;
  bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm);
  if (file) {
    e->ino = file->ino;
    e->dev = file->dev;
    __builtin_memcpy(e->name, file->name, sizeof(e->name));
  }
  return e;
}

/* Whether an event wakes the reader at once. Userspace must read a process
 * while it lives when it maps a new file; a command's (-- CMD, -p) always,
 * so that even its shortest processes are read at exec. Recording the whole
 * machine, the other events wait for the reader's next round (100 ms): a
 * process starting or ending pays no wakeup (an irq_work, often another
 * CPU's interrupt) and meets no reader reading its /proc. */
static __always_inline __u64 proc_wake(bool new_file) {
  return new_file || !trace_unknown ? BPF_RB_FORCE_WAKEUP : submit_flags();
}

static __always_inline void emit_proc(__u32 kind, __u32 tgid, __u32 parent, const char *comm,
                                      const struct file_id *file, __u64 addr, __u32 ended, bool new_file) {
  struct as_proc_event *e = proc_event(kind, tgid, parent, comm, file, addr, ended);
  if (e) bpf_ringbuf_submit(e, proc_wake(new_file));
}

/* The C library's _exit in a CPython process: the code objects its stacks
 * name go with its memory, and userspace reads them only as it reaches
 * those stacks in the ring buffer, which may be after a short process has
 * ended (a slow or busy reader). Held here, before the exit (the stop is
 * taken on the way back from the probe), until userspace reaches this
 * event. Other programs go on untouched. */
#define AS_EXIT_HOLD_GRACE_NS 9000000000ULL
static __always_inline void exit_called(void) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  if (!hold_new_files || !wanted(v)) return;
  struct task_struct *t = bpf_get_current_task_btf();
  struct mm_struct *mm = t->mm;
  if (!mm || !runs_python(tgid, mm) || ruled_out_by_filters(v)) return;
  /* Held only with its event on the way (else none would continue it
   * early). Behind a backlog it may wait longer than a new file's hold
   * (userspace's bound plus the grace): it costs only its exit's delay. */
  struct as_proc_event *e = proc_event(AS_EV_EXITING, tgid, 0, t->comm, 0, 0, 0);
  if (!e) return;
  set_hold(e, hold_current(t, tgid, AS_EXIT_HOLD_GRACE_NS));
  bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child) {
  if (child->pid != child->tgid) /* a new thread, not a process */
    return 0;
  __u32 ptgid = parent->tgid, ctgid = child->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &ptgid);
  if (v && (base_verdict(v) != AS_PROC_MEMBER || follow_children)) {
    __u8 copy = *v; /* a child of an ignored process has its name until exec */
    if (bpf_map_update_elem(&processes, &ctgid, &copy, BPF_ANY) != 0) count(AS_CNT_PROC_TABLE_FULL);
  }
  if (wanted(v) && (follow_children || trace_unknown))
    emit_proc(AS_EV_FORK, ctgid, ptgid, child->comm, 0, 0, 0, false);
  /* A child shares its parent's mappings, CPython's library among them. */
  struct as_py_process *py = bpf_map_lookup_elem(&python_processes, &ptgid);
  if (py && bpf_map_update_elem(&python_processes, &ctgid, py, BPF_ANY) != 0) count(AS_CNT_PY_PROCESSES_FULL);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm) {
  __u32 tgid = p->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  /* A new name: judged again; a new program: in process only if it is a
   * sampler itself (below) or maps one (on_syscall_exit). */
  __u8 b = base_verdict(v);
  __u32 ended = ended_as(v);
  if (v && (b == AS_PROC_IGNORED || b == AS_PROC_ACCEPTED || b == 0)) {
    bpf_map_delete_elem(&processes, &tgid);
    v = 0;
  } else if (v) {
    *v = b == AS_PROC_MEMBER_IGNORED ? AS_PROC_MEMBER : b;
  }
  /* A new program: a fresh countdown, no allocator call in progress, no
   * live entry of its own yet. */
  bpf_map_delete_elem(&process_live, &tgid);
  bpf_map_delete_elem(&python_processes, &tgid);
  bpf_task_storage_delete(&threads, p);
  bpf_task_storage_delete(&walks, p); /* its mappings and rows were the old program's */
  bpf_task_storage_delete(&row_caches, p);
  bool want = wanted(v), ruled_out = ruled_out_by_filters(v); /* before mark_in_process may replace v */
  if (!want && !filter_processes) return 0;
  struct file_id id = {};
  identify(bprm->file, &id);
  struct as_file_key key = {.ino = id.ino, .dev = id.dev};
  mark_in_process(tgid, &key);
  if (!want) return 0;
  /* The event goes even for a program ruled out: it ends the instance of
   * the program replaced. Reserved first: a lost event leaves the file
   * unknown, and the next process to run it is held for it. */
  struct as_proc_event *e = proc_event(AS_EV_EXEC, tgid, 0, p->comm, &id, 0, ended);
  if (!e) return 0;
  /* A program not seen before (its own malloc if static; its interpreter,
   * musl's C library, mapped here too without an mmap): held until read. */
  __u8 known = AS_FILE_KNOWN;
  bool fresh = !ruled_out && bpf_map_update_elem(&known_files, &key, &known, BPF_NOEXIST) == 0;
  /* A program userspace prepares in each process before it runs: held too. */
  __u8 *seen = fresh || ruled_out ? 0 : bpf_map_lookup_elem(&known_files, &key);
  bool prepared = seen && *seen == AS_FILE_PREPARED;
  set_hold(e, fresh || prepared ? hold_current(p, tgid, 0) : 0);
  e->ruled_out = ruled_out;
  e->fresh = fresh;
  bpf_ringbuf_submit(e, proc_wake(fresh || prepared));
  return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p) {
  /* The last thread out: do_exit has counted it out of signal->live by now
   * (read here rather than taken as the tracepoint's newer second argument). */
  if (BPF_CORE_READ(p, signal, live.counter) != 0) return 0;
  __u32 tgid = p->tgid;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  /* With --all, an ignored process's exit too: its id may come back. */
  __u8 b = base_verdict(v);
  bool want = b ? (b != AS_PROC_IGNORED || trace_unknown) : trace_unknown;
  __u32 ended = ended_as(v);
  /* The process id may be reused: nothing of this process may carry over. */
  bpf_map_delete_elem(&processes, &tgid);
  bpf_map_delete_elem(&seen_processes, &tgid);
  bpf_map_delete_elem(&process_live, &tgid);
  bpf_map_delete_elem(&python_processes, &tgid);
  bpf_map_delete_elem(&held, &tgid); /* killed while held: nothing to continue */
  if (want) emit_proc(AS_EV_EXIT, tgid, 0, p->comm, 0, 0, ended, false);
  return 0;
}

/* A cgroup of the unified hierarchy (cgroup v2: hierarchy 0; the v1
 * hierarchies number their directories apart) made or removed: its id, and
 * when made its path, sent before any process can run in it. */
static __always_inline void send_cgroup(__u32 kind, struct cgroup *cgrp, const char *path) {
  if (BPF_CORE_READ(cgrp, root, hierarchy_id) != 0) return;
  struct as_cgroup_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
  if (!e) {
    count(AS_CNT_CGROUP_DROPS);
    return;
  }
  e->kind = kind;
  e->id = BPF_CORE_READ(cgrp, kn, id);
  e->len = 0;
  e->path[0] = 0;
  if (path) {
    long n = bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
    e->len = n > 0 ? (__u32)(n - 1) : 0;
  }
  bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/cgroup_mkdir")
int BPF_PROG(on_cgroup_mkdir, struct cgroup *cgrp, const char *path) {
  send_cgroup(AS_EV_CGROUP, cgrp, path);
  return 0;
}

/* Its name may then be forgotten, once samples in flight are named. */
SEC("tp_btf/cgroup_rmdir")
int BPF_PROG(on_cgroup_rmdir, struct cgroup *cgrp, const char *path) {
  send_cgroup(AS_EV_CGROUP_GONE, cgrp, 0);
  return 0;
}

/* Whether userspace must examine a file just mapped: one not seen before,
 * or an allocator left unprobed while every process that mapped it sampled
 * in process, now mapped by one that does not. */
static __always_inline bool to_examine(__u32 tgid, const struct as_file_key *key) {
  /* A lookup first: most mappings are of files already examined, and a
   * lookup takes no bucket lock. */
  __u8 *seen = bpf_map_lookup_elem(&known_files, key);
  if (!seen) {
    __u8 known = AS_FILE_KNOWN;
    return bpf_map_update_elem(&known_files, key, &known, BPF_NOEXIST) == 0;
  }
  if (*seen != AS_FILE_DEFERRED) return false;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  return !(v && (*v & AS_PROC_IN_PROCESS));
}

static long identify_vma(struct task_struct *task, struct vm_area_struct *vma, void *data) {
  struct file_id *id = data;
  if (vma->vm_file) identify(vma->vm_file, id);
  id->start = vma->vm_start;
  id->pgoff = vma->vm_pgoff;
  return 0;
}

/* A process mapping the code of a library that holds a CPython runtime
 * userspace has read (libpython3.X.so): its frames are walked from now on,
 * from its load bias. A file not read yet is examined (held) as any new
 * file, and userspace writes the process's entry itself. */
static __always_inline void note_python_library(__u32 tgid, const struct as_file_key *key,
                                                const struct file_id *id) {
  struct as_py_layout *l = bpf_map_lookup_elem(&python_files, key);
  if (!l) return;
  struct as_py_process p = {.layout = *l};
  p.bias = id->start - (id->pgoff << 12) + l->exec_offset - l->exec_vaddr;
  if (bpf_map_update_elem(&python_processes, &tgid, &p, BPF_ANY) != 0) count(AS_CNT_PY_PROCESSES_FULL);
}

/* A file mapped executable for the first time (a library, a container's C
 * library, a copy run through its own loader): userspace reads its symbols
 * once and probes it if it defines allocator entry points. Seen at the mmap
 * syscall's exit, the one hook this needs that every kernel with BTF has
 * (fentry and LSM programs may be locked down); the first instruction of
 * the program rejects every other system call. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_syscall_exit, struct pt_regs *regs, long ret) {
  if (BPF_CORE_READ(regs, orig_ax) != AS_SYS_MMAP || ret <= 0) /* an address, or -errno */
    return 0;
  if (!(BPF_CORE_READ(regs, dx) & AS_PROT_EXEC)) return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  __u8 *v = bpf_map_lookup_elem(&processes, &tgid);
  if (!wanted(v)) return 0;
  bool ruled_out = ruled_out_by_filters(v); /* before mark_in_process may replace v */
  struct file_id id = {};
  struct task_struct *t = bpf_get_current_task_btf();
  if (bpf_find_vma(t, ret, identify_vma, &id, 0) != 0) {
    /* Its memory map busy (a writer holds the lock): the file may be new,
     * and goes unexamined and unheld. */
    if (!ruled_out) count(AS_CNT_HOLD_REFUSED);
    return 0;
  }
  if (!id.ino) return 0;
  struct as_file_key key = {.ino = id.ino, .dev = id.dev};
  mark_in_process(tgid, &key);
  if (!ruled_out) note_python_library(tgid, &key, &id);
  if (ruled_out || !to_examine(tgid, &key)) return 0;
  /* Held only with its event on the way. A lost event leaves a file just
   * marked unknown again, as on_exec does: the next mapping is examined. */
  struct as_proc_event *e = proc_event(AS_EV_MMAP, tgid, 0, t->comm, &id, ret, 0);
  if (!e) {
    __u8 *seen = bpf_map_lookup_elem(&known_files, &key);
    if (seen && *seen == AS_FILE_KNOWN) bpf_map_delete_elem(&known_files, &key);
    return 0;
  }
  set_hold(e, hold_current(t, tgid, 0));
  bpf_ringbuf_submit(e, proc_wake(true));
  return 0;
}

/* --null-probes: the same probes doing nothing, to measure the floor. */
