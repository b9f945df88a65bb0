// What the running kernel can do for allocscope, found by trying each thing
// (a tiny program loaded, a probe attached to a function of allocscope's
// own), never from its version: distributions backport, and a kfunc's
// presence does not say which programs may call it (6.12 has
// bpf_session_is_return for kprobe sessions only).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "probe/placement/probe_placement.h"

namespace allocscope {

enum class Feature {
  Btf,               // the kernel's own BTF: CO-RE and typed tracepoints
  RingBuffer,        // BPF ring buffer
  TaskStorage,       // task-local storage from tracing programs, bpf_get_current_task_btf
  Cookies,           // BPF cookies on uprobes (bpf_get_attach_cookie)
  Loop,              // bpf_loop
  FindVma,           // bpf_find_vma
  AncestorCgroup,    // bpf_get_current_ancestor_cgroup_id from tracing programs
  UprobeMulti,       // uprobe_multi links
  UprobeSession,     // uprobe sessions: the entry decides whether the return is seen
  NopEmulation,      // multi-byte nops (0f 1f) emulated in the trap, not single-stepped
  PushEmulation,     // push %reg emulated in the trap
  OptimizedUprobes,  // a uprobe on a 10-byte nop rewritten into a call, kept by forked children
  kCount,
};
constexpr size_t kFeatureCount = size_t(Feature::kCount);

struct FeatureSpec {
  Feature feature;
  const char* key;           // for --force-fallback and reports: "uprobe_session"
  const char* name;          // "uprobe sessions"
  const char* first_kernel;  // the first mainline release that has it: "6.13" (a range where not known)
  bool required;             // allocscope cannot record without it
  const char* gives;         // what allocscope uses it for
  const char* without;       // what allocscope does instead ("" when required)
};
const std::array<FeatureSpec, kFeatureCount>& feature_specs();
const FeatureSpec& spec_of(Feature f);

enum class Presence { Present, Missing, Unknown };

struct FeatureState {
  Presence presence = Presence::Unknown;
  std::string detail;  // why missing or unknown: the error, or "forced"
  int error = 0;       // errno of a probe that could not tell (EPERM: no privileges)
};

struct KernelFeatures {
  std::string release;  // uname -r
  std::array<FeatureState, kFeatureCount> states;
  // bpf_session_is_return takes the program's context (allocscope.h): the
  // BPF objects built for that are the ones this kernel loads.
  bool session_kfunc_takes_ctx = false;
  // What a trap into a uprobe costs on this machine (its program doing
  // nothing), where the kernel emulates the probed instruction and where
  // it single-steps it; 0 when not timed.
  double trap_ns = 0, stepped_trap_ns = 0;

  bool has(Feature f) const { return states[size_t(f)].presence == Presence::Present; }
  const FeatureState& state(Feature f) const { return states[size_t(f)]; }
  // Required features the kernel lacks (not those a probe could not tell).
  std::vector<Feature> missing_required() const;
  // Whether a probe could not run for want of privileges (every probe then
  // says nothing of the kernel).
  bool unprivileged() const;
};

// Marks the features named in `list` ("uprobe_session,nop_emulation",
// --force-fallback's value) missing, as if the kernel lacked them:
// the fallback paths run on a kernel that has them, for tests and
// benchmarks. Required features cannot be forced. Returns the names it did
// not know.
std::vector<std::string> force_fallbacks(KernelFeatures& k, const std::string& list);

// One line for a kernel that lacks required features (which, and the first
// kernel that has them all), or where the probes were refused for want of
// privileges. "" when nothing stands in the way.
std::string missing_features_message(const KernelFeatures& k);

// What the kernel's uprobes run without single-stepping, for placement.
Emulation emulation_of(const KernelFeatures& k);

// The features kernel_features() and fresh_kernel_features() take as
// missing from now on (--force-fallback: "uprobe_session,nop_emulation").
// Set before the first kernel_features(). Fails naming what is not an
// optional feature, and the ones that are.
Result<void> set_forced_fallbacks(const std::string& list);

// The running kernel's features, the forced fallbacks applied: probed once
// per boot (feature_cache.h), read once per process (later calls return the
// same answer).
const KernelFeatures& kernel_features();
// Probes afresh (and keeps the answer for this boot), forcing applied: what
// `allocscope check` shows.
KernelFeatures fresh_kernel_features();
// Probes afresh, without the environment's forcing.
KernelFeatures probe_kernel_features();

}  // namespace allocscope
