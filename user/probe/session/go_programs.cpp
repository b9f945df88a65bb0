// The Go runtime's probe programs, loaded when a session first probes a Go
// program. Most recordings probe none, and their verification was a quarter
// of the kernel time a recording's start took (0.2 of 0.7 s here): they
// wait in a second instance of the session's object, whose maps are the
// session's own, so that its programs see and fill the same state.
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>

#include "allocscope.h"
#include "allocscope.skel.h"
#include "allocscope_ctx.skel.h"
#include "probe/features/kernel_features.h"
#include "probe/placement/allocator_entries.h"
#include "probe/session/bpf_session.h"
#include "probe/session/object_load.h"
#include "probe/session/programs.h"
#include "probe/skeleton_variant.h"

namespace allocscope {
namespace {

using Skeleton = std::unique_ptr<allocscope_bpf, void (*)(allocscope_bpf*)>;

// Every map of `go` made the session's: its constants (frozen, so the
// verifier judges these programs as it judged the others), tables and
// counters.
Result<void> share_maps(bpf_object* session, bpf_object* go) {
  bpf_map* map;
  bpf_object__for_each_map(map, go) {
    const bpf_map* own = bpf_object__find_map_by_name(session, bpf_map__name(map));
    if (!own || bpf_map__fd(own) < 0)
      return fail(std::string("the Go programs' map ") + bpf_map__name(map) + " is not the session's");
    if (int err = bpf_map__reuse_fd(map, bpf_map__fd(own)); err != 0)
      return fail_errno(std::string("share map ") + bpf_map__name(map) + " with the Go programs", -err);
  }
  return {};
}

// A new instance of the object, with only this mode's Go programs, loaded
// over the maps of `session`.
Result<Skeleton> loaded_go_programs(const KernelFeatures& kernel, const SessionConfig& config, ProbeMode mode,
                                    bpf_object* session, ProgramStats* stats) {
  Skeleton made(open_skeleton(allocscope_bpf__create_skeleton, allocscope_bpf__destroy,
                              kernel.session_kfunc_takes_ctx ? allocscope_ctx_bpf__elf_bytes : nullptr),
                allocscope_bpf__destroy);
  if (!made) return fail_errno("open the Go programs", errno);
  select_programs(made.get(), config, mode, true);
  if (auto shared = share_maps(session, made->obj); !shared) return fail(shared.error());
  if (auto loaded = load_object(made.get(), kernel.release, stats); !loaded) return fail(loaded.error());
  return made;
}

}  // namespace

Result<allocscope_bpf*> BpfSession::go_programs_for(const std::vector<ProbeTarget>& targets) {
  bool go = std::any_of(targets.begin(), targets.end(),
                        [](const ProbeTarget& t) { return is_go_entry(as_fn_kind(t.fn)); });
  if (!go || config_.null_probes) return skel_.get();  // the null programs stand in for Go's too
  return load_go_programs();
}

Result<allocscope_bpf*> BpfSession::load_go_programs() {
  if (go_skel_) return go_skel_.get();
  if (go_refusal_) return fail(*go_refusal_);
  auto made =
      loaded_go_programs(*kernel_, config_, mode_, skel_->obj, config_.verifier_stats ? &stats_ : nullptr);
  if (!made) {
    go_refusal_ = made.error();
    return fail(made.error());
  }
  go_skel_.reset(made->release());
  return go_skel_.get();
}

}  // namespace allocscope
