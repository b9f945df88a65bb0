#include "probe/features/probe_choice.h"

namespace allocscope {

Result<ProbeMode> choose_probe_mode(const KernelFeatures& k, ProbeMode wanted) {
  // The frees of a session's library go through a uprobe_multi link.
  bool sessions = k.has(Feature::UprobeSession) && k.has(Feature::UprobeMulti);
  if (wanted == ProbeMode::Auto) return sessions ? ProbeMode::Session : ProbeMode::Classic;
  if (wanted == ProbeMode::Session && !sessions) {
    Feature lacking = k.has(Feature::UprobeSession) ? Feature::UprobeMulti : Feature::UprobeSession;
    return fail("--probe-mode session needs " + std::string(spec_of(lacking).name) + " (Linux " +
                spec_of(lacking).first_kernel + "), which this kernel (" + k.release +
                ") lacks: " + k.state(lacking).detail + "; use --probe-mode auto or classic");
  }
  return wanted;
}

std::vector<std::pair<std::string, std::string>> kernel_paths(const KernelFeatures& k, ProbeMode chosen,
                                                              ProbeMode wanted, bool unwind_tables) {
  auto lacking = [&](Feature f) {
    const FeatureState& s = k.state(f);
    return s.detail.starts_with("forced")
               ? std::string(spec_of(f).name) + " forced off"
               : "no " + std::string(spec_of(f).name) + " before Linux " + spec_of(f).first_kernel;
  };
  std::string probes = chosen == ProbeMode::Session ? "uprobe sessions" : "classic uprobes and uretprobes";
  if (chosen == ProbeMode::Classic && wanted == ProbeMode::Auto)
    probes +=
        " (" + lacking(k.has(Feature::UprobeSession) ? Feature::UprobeMulti : Feature::UprobeSession) + ")";
  std::vector<std::pair<std::string, std::string>> p{
      {"kernel", k.release},
      {"probes", probes},
      {"unwind", unwind_tables ? "dwarf tables in the kernel" : "frame pointers"}};
  if (!k.has(Feature::NopEmulation))
    p.emplace_back("placement", "nops single-step (" + lacking(Feature::NopEmulation) + ")");
  if (!k.has(Feature::PushEmulation))
    p.emplace_back("placement", "pushes single-step (" + lacking(Feature::PushEmulation) + ")");
  return p;
}

const char* probe_mode_name(ProbeMode m) {
  switch (m) {
    case ProbeMode::Auto:
      return "auto";
    case ProbeMode::Session:
      return "session";
    case ProbeMode::Classic:
      return "classic";
  }
  return "?";
}

}  // namespace allocscope
