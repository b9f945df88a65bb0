// The Go runtime's probe programs, loaded when a session first probes a Go
// program. Most recordings probe none, and their verification was a quarter
// of the kernel time a recording's start took (0.2 of 0.7 s here): they
// wait in a second instance of the session's object, whose maps are the
// session's own, so that its programs see and fill the same state.
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "allocscope.skel.h"
#include "allocscope_ctx.skel.h"
#include "probe/features/kernel_features.h"
#include "probe/libbpf_log.h"
#include "probe/placement/allocator_entries.h"
#include "probe/session/bpf_session.h"
#include "probe/session/programs.h"
#include "probe/skeleton_variant.h"

namespace allocscope {

Result<allocscope_bpf*> BpfSession::go_programs_for(const std::vector<ProbeTarget>& targets) {
  bool go = std::any_of(targets.begin(), targets.end(),
                        [](const ProbeTarget& t) { return is_go_entry(as_fn_kind(t.fn)); });
  // Loaded at open (check's statistics), or not needed: the null programs
  // stand in for Go's too.
  if (!go || config_.null_probes || bpf_program__fd(skel_->progs.go_malloc_classic) >= 0 ||
      bpf_program__fd(skel_->progs.go_malloc_multi) >= 0)
    return skel_.get();
  if (go_skel_) return go_skel_.get();
  std::unique_ptr<allocscope_bpf, SkeletonCloser> made(
      open_skeleton(allocscope_bpf__create_skeleton, allocscope_bpf__destroy,
                    kernel_->session_kfunc_takes_ctx ? allocscope_ctx_bpf__elf_bytes : nullptr));
  if (!made) return fail_errno("open the Go programs", errno);
  bpf_program* prog;
  bpf_object__for_each_program(prog, made->obj) bpf_program__set_autoload(prog, false);
  for (const ProgramUse& use : program_uses(made.get(), config_, mode_)) {
    if (!use.used || !is_go_program(made.get(), use.program)) continue;
    bpf_program__set_autoload(use.program, true);
    if (use.attach_type)
      bpf_program__set_expected_attach_type(use.program, static_cast<bpf_attach_type>(use.attach_type));
  }
  // Every map is the session's: its constants (frozen, so the verifier
  // judges these programs as it judged the others), tables and counters.
  bpf_map* map;
  bpf_object__for_each_map(map, made->obj) {
    const bpf_map* own = bpf_object__find_map_by_name(skel_->obj, bpf_map__name(map));
    if (!own || bpf_map__fd(own) < 0)
      return fail(std::string("the Go programs' map ") + bpf_map__name(map) + " is not the session's");
    if (int err = bpf_map__reuse_fd(map, bpf_map__fd(own)); err != 0)
      return fail_errno(std::string("share map ") + bpf_map__name(map) + " with the Go programs", -err);
  }
  LibbpfCapture capture;  // the verifier's refusal, told in one line
  if (int err = allocscope_bpf__load(made.get()); err != 0) {
    VerifierRefusal r = verifier_refusal(capture.text());
    if (r.program.empty()) return fail_errno("load the Go programs", -err);
    return fail("the kernel (" + kernel_->release + ") refused allocscope's BPF program " + r.program + ": " +
                    (r.reason.empty() ? std::strerror(-err) : r.reason),
                -err);
  }
  go_skel_ = std::move(made);
  return go_skel_.get();
}

}  // namespace allocscope
