#include "probe/session/programs.h"

#include "probe/uprobe_links.h"

namespace allocscope {

std::vector<ProgramUse> program_uses(allocscope_bpf* skel, const SessionConfig& c, ProbeMode mode) {
  auto& p = skel->progs;
  bool session = mode == ProbeMode::Session;
  bool probes = !c.null_probes;  // the floor (--null-probes) measures the allocator probes alone
  constexpr auto kBySession = AttachedBy::Session, kAtOpen = AttachedBy::Open;
  std::vector<ProgramUse> uses = {
      // The allocator probes: uprobe sessions (an entry and its return in one
      // program), or classic uprobes with a return program.
      {p.alloc_session, session && probes, kTraceUprobeSession, kBySession},
      {p.malloc_session, session && probes, kTraceUprobeSession, kBySession},
      {p.null_session, session && !probes, kTraceUprobeSession, kBySession},
      {p.free_multi, session && probes && !c.no_free, kTraceUprobeMulti, kBySession},
      {p.null_multi, session && !probes, kTraceUprobeMulti, kBySession},  // Go's probes' null too
      {p.go_malloc_multi, session && probes, kTraceUprobeMulti, kBySession},
      {p.go_profile_multi, session && probes, kTraceUprobeMulti, kBySession},
      {p.go_free_multi, session && probes, kTraceUprobeMulti, kBySession},
      {p.null_classic, !session && !probes, 0, kBySession},
      {p.alloc_return, !session && probes, 0, kBySession},
      {p.list_code_vmas, true, 0, kBySession},
      {p.sweep_live, c.rate == 1 && !c.no_free && probes, 0, kBySession},
      // In-process sampling's USDT notes.
      {p.usdt_alloc, probes, 0, kBySession},
      {p.usdt_free, probes && !c.no_free, 0, kBySession},
      {p.usdt_entered, probes && c.filter_processes, 0, kBySession},
      // The lifecycle: processes, held files, filters, cgroups' names.
      {p.on_fork, probes, 0, kAtOpen},
      {p.on_exec, probes, 0, kAtOpen},
      {p.on_exit, probes, 0, kAtOpen},
      {p.on_signal_generate, probes && c.hold_new_files, 0, kAtOpen},
      {p.on_syscall_exit, probes && c.filter_processes, 0, kAtOpen},
      {p.on_cgroup_mkdir, probes && c.cgroup_names, 0, kAtOpen},
      {p.on_cgroup_rmdir, probes && c.cgroup_names, 0, kAtOpen},
  };
  for (int fn = 0; fn < AS_FN_COUNT; ++fn)  // classic: a program per entry kind
    uses.push_back(
        {entry_program(skel, as_fn(fn)),
         !session && probes && (fn != AS_FN_FREE || !c.no_free) && (fn != AS_FN_EXIT || c.hold_new_files), 0,
         kBySession});
  return uses;
}

bpf_program* entry_program(allocscope_bpf* s, as_fn fn) {
  switch (fn) {
    case AS_FN_MALLOC:
      return s->progs.malloc_enter;
    case AS_FN_CALLOC:
      return s->progs.calloc_enter;
    case AS_FN_REALLOC:
      return s->progs.realloc_enter_classic;
    case AS_FN_REALLOCARRAY:
      return s->progs.reallocarray_enter;
    case AS_FN_POSIX_MEMALIGN:
      return s->progs.posix_memalign_enter;
    case AS_FN_ALIGNED_ALLOC:
      return s->progs.aligned_alloc_enter;
    case AS_FN_MEMALIGN:
      return s->progs.memalign_enter;
    case AS_FN_VALLOC:
      return s->progs.valloc_enter;
    case AS_FN_PVALLOC:
      return s->progs.pvalloc_enter;
    case AS_FN_FREE:
      return s->progs.free_enter;
    case AS_FN_EXIT:
      return s->progs.exit_enter;
    case AS_FN_GO_MALLOC:
      return s->progs.go_malloc_classic;
    case AS_FN_GO_PROFILE:
      return s->progs.go_profile_classic;
    case AS_FN_GO_FREE:
      return s->progs.go_free_classic;
    case AS_FN_COUNT:
      break;
  }
  return nullptr;
}

void select_programs(allocscope_bpf* skel, const SessionConfig& c, ProbeMode mode, bool go) {
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, false);
  for (const ProgramUse& use : program_uses(skel, c, mode)) {
    if (!use.used || is_go_program(skel, use.program) != go) continue;
    bpf_program__set_autoload(use.program, true);
    if (use.attach_type)
      bpf_program__set_expected_attach_type(use.program, static_cast<bpf_attach_type>(use.attach_type));
  }
}

bool is_go_program(allocscope_bpf* s, const bpf_program* program) {
  const auto& p = s->progs;
  for (const bpf_program* go : {p.go_malloc_classic, p.go_profile_classic, p.go_free_classic,
                                p.go_malloc_multi, p.go_profile_multi, p.go_free_multi})
    if (program == go) return true;
  return false;
}

}  // namespace allocscope
