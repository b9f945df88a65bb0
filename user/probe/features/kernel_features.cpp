// The features allocscope asks of the kernel, and what their absence means.
// The probing itself is in feature_probes.cpp.
#include "probe/features/kernel_features.h"

#include <algorithm>
#include <cerrno>
#include <sstream>

namespace allocscope {

const std::array<FeatureSpec, kFeatureCount>& feature_specs() {
  static const std::array<FeatureSpec, kFeatureCount> specs = {{
      {Feature::Btf, "btf", "kernel BTF", "5.5", true,
       "programs that read kernel structures on any kernel (CO-RE), typed tracepoints", ""},
      {Feature::RingBuffer, "ring_buffer", "BPF ring buffer", "5.8", true, "events to userspace", ""},
      {Feature::TaskStorage, "task_storage", "task storage in tracing programs", "5.11", true,
       "each thread's countdown and stack walk", ""},
      {Feature::Cookies, "cookies", "BPF cookies on uprobes", "5.15", true,
       "telling allocator entry points apart; USDT probes", ""},
      {Feature::Loop, "bpf_loop", "bpf_loop", "5.17", true, "stack walks in the kernel", ""},
      {Feature::FindVma, "bpf_find_vma", "bpf_find_vma", "5.17", true, "naming the file of each frame", ""},
      {Feature::AncestorCgroup, "ancestor_cgroup", "cgroup ancestors in tracing programs", "5.14", false,
       "--cgroup filtering in the kernel", "--cgroup is refused"},
      {Feature::UprobeMulti, "uprobe_multi", "uprobe_multi links", "6.6", false,
       "one link for every entry point of a library",
       "one classic uprobe per entry point (slower to attach, same cost per call)"},
      {Feature::UprobeSession, "uprobe_session", "uprobe sessions", "6.13", false,
       "malloc's return probe only on sampled calls",
       "classic uprobes and uretprobes: a return probe on every allocating call"},
      {Feature::NopEmulation, "nop_emulation", "multi-byte nop emulation", "6.13-6.16", false,
       "probes on 0f 1f nops without single-stepping",
       "probes placed on other emulated instructions, or single-stepped"},
      {Feature::PushEmulation, "push_emulation", "push emulation", "4.15", false,
       "probes on push instructions without single-stepping", "probes on push instructions single-step"},
      {Feature::OptimizedUprobes, "optimized_uprobes", "optimized uprobes on 10-byte nops", "6.19-7.3", false,
       "sampled calls of the preload library reach BPF through a call and a system call",
       "sampled calls of the preload library trap (int3)"},
  }};
  return specs;
}

const FeatureSpec& spec_of(Feature f) { return feature_specs()[size_t(f)]; }

std::vector<Feature> KernelFeatures::missing_required() const {
  std::vector<Feature> out;
  for (const FeatureSpec& s : feature_specs())
    if (s.required && state(s.feature).presence == Presence::Missing) out.push_back(s.feature);
  return out;
}

bool KernelFeatures::unprivileged() const {
  return std::any_of(states.begin(), states.end(), [](const FeatureState& s) {
    return s.presence == Presence::Unknown && (s.error == EPERM || s.error == EACCES);
  });
}

std::vector<std::string> force_fallbacks(KernelFeatures& k, const std::string& list) {
  std::vector<std::string> unknown;
  std::stringstream in(list);
  std::string key;
  while (std::getline(in, key, ',')) {
    if (key.empty()) continue;
    auto it = std::find_if(feature_specs().begin(), feature_specs().end(),
                           [&](const FeatureSpec& s) { return key == s.key && !s.required; });
    if (it == feature_specs().end()) {
      unknown.push_back(key);
      continue;
    }
    k.states[size_t(it->feature)] = {Presence::Missing, "forced by --force-fallback"};
  }
  return unknown;
}

namespace {

// "5.17" < "6.1": release numbers compared field by field.
bool older(const std::string& a, const std::string& b) {
  int a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  std::sscanf(a.c_str(), "%d.%d", &a1, &a2);
  std::sscanf(b.c_str(), "%d.%d", &b1, &b2);
  return a1 != b1 ? a1 < b1 : a2 < b2;
}

}  // namespace

std::string missing_features_message(const KernelFeatures& k) {
  if (k.unprivileged())
    return "loading BPF programs was refused: allocscope needs root, or CAP_BPF and CAP_PERFMON "
           "(`allocscope check` tells what is missing)";
  std::vector<Feature> missing = k.missing_required();
  if (missing.empty()) return "";
  std::string names, first = "0.0";
  for (Feature f : missing) {
    const FeatureSpec& s = spec_of(f);
    names += (names.empty() ? "" : ", ") + std::string(s.name) + " (" + s.first_kernel + ")";
    if (older(first, s.first_kernel)) first = s.first_kernel;
  }
  for (const FeatureSpec& s : feature_specs())
    if (s.required && older(first, s.first_kernel)) first = s.first_kernel;
  return "this kernel (" + k.release + ") lacks " + names + "; allocscope needs Linux " + first +
         " or newer (Debian 12's 6.1 has everything it needs)";
}

Emulation emulation_of(const KernelFeatures& k) {
  return {.push = k.has(Feature::PushEmulation), .nops = k.has(Feature::NopEmulation)};
}

}  // namespace allocscope
