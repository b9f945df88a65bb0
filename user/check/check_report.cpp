#include "check/check_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace allocscope {
namespace {

std::string user_line(const Privileges& p) {
  if (!p.euid) return "unknown";
  std::string line = *p.euid == 0 ? "root" : "uid " + std::to_string(*p.euid);
  if (!p.capabilities) return line + "; capabilities unknown";
  std::string caps;
  for (auto [cap, name] :
       {std::pair{kCapBpf, "CAP_BPF"}, std::pair{kCapPerfmon, "CAP_PERFMON"},
        std::pair{kCapSysAdmin, "CAP_SYS_ADMIN"}, std::pair{kCapSysPtrace, "CAP_SYS_PTRACE"}})
    caps += std::string(caps.empty() ? "" : ", ") + name + (p.has(cap) ? " yes" : " no");
  return line + "; " + caps;
}

// What the privileges allow, and what to do when they do not.
std::string privilege_advice(const Privileges& p) {
  bool bpf = p.has(kCapBpf) || p.has(kCapSysAdmin), perfmon = p.has(kCapPerfmon) || p.has(kCapSysAdmin);
  if (!bpf || !perfmon)
    return "loading BPF needs root, or CAP_BPF and CAP_PERFMON (sudo allocscope ..., or setcap on the "
           "binary)";
  if (!p.has(kCapSysPtrace))
    return "other users' processes (-p, --all) also need CAP_SYS_PTRACE to read their mappings";
  return "";
}

std::string memlock_line(const std::optional<uint64_t>& m) {
  if (!m) return "unlimited";
  return std::to_string(*m / 1024) +
         " KiB (kernels before 5.11 charge BPF maps to it; allocscope raises it when it can)";
}

const char* mark(Presence p) {
  switch (p) {
    case Presence::Present:
      return "yes";
    case Presence::Missing:
      return "no ";
    case Presence::Unknown:
      return "?  ";
  }
  return "?  ";
}

void features_section(std::string& out, const KernelFeatures& k, bool verbose) {
  if (std::all_of(k.states.begin(), k.states.end(),
                  [](const FeatureState& s) { return s.presence == Presence::Unknown; })) {
    out += "\nkernel features: not probed (" + k.states[0].detail + ")\n";
    return;
  }
  out += "\nkernel features (first mainline kernel with each):\n";
  for (const FeatureSpec& s : feature_specs()) {
    const FeatureState& st = k.state(s.feature);
    out += std::string("  ") + mark(st.presence) + "  " + s.name + " (" + s.first_kernel + "): " + s.gives;
    out += s.required ? ", required\n" : "\n";
    if (st.presence != Presence::Present && !s.required)
      out += std::string("       instead: ") + s.without + "\n";
    if (st.presence != Presence::Present && (verbose || st.presence == Presence::Unknown) &&
        !st.detail.empty())
      out += "       found: " + st.detail + "\n";
  }
}

// "walk_frame 1234 insns, stack 48+0": the verifier's figures of a program.
std::string program_line(const std::string& name, const VerifierStats& s) {
  std::string depths;
  for (uint32_t d : s.stack_depths) depths += (depths.empty() ? "" : "+") + std::to_string(d);
  return "        " + name + ": " + std::to_string(s.insns) + " instructions processed, stack " + depths +
         "\n";
}

void trials_section(std::string& out, const std::vector<LoadTrial>& trials, bool verbose) {
  if (trials.empty()) return;
  out += "\nBPF programs, loaded and verified now:\n";
  for (const LoadTrial& t : trials) {
    char ms[32];
    std::snprintf(ms, sizeof ms, " (%.0f ms)", t.ms);
    out += std::string(t.ok ? "  ok    " : "  FAIL  ") + t.what + (t.ok ? ms : ": " + t.error) + "\n";
    if (verbose)
      for (const auto& [name, stats] : t.programs) out += program_line(name, stats);
  }
}

// What a trap into a probe costs here, and who pays it in each mode.
void traps_section(std::string& out, const KernelFeatures& k) {
  if (k.trap_ns <= 0) return;
  char line[160];
  std::snprintf(line, sizeof line,
                "\nuprobe trap   %.2f us where the kernel emulates the probed instruction, %.2f us where it "
                "single-steps it\n",
                k.trap_ns / 1e3, k.stepped_trap_ns / 1e3);
  out += line;
  out +=
      "              record -p enters the process: only its sampled allocations trap (about one per --rate "
      "bytes)\n"
      "              --all, the agent and -- CMD's probed processes: every malloc and free of every process "
      "that maps a probed allocator traps\n";
}

// "with uprobe sessions and ..." : the paths record takes here.
std::string paths_line(const CheckReport& r) {
  std::string s = r.mode == ProbeMode::Session
                      ? "uprobe sessions"
                      : std::string("classic uprobes") +
                            (r.kernel.has(Feature::UprobeSession) ? "" : " (no uprobe sessions here)");
  return s + ", DWARF stack walks in the kernel";
}

// Why record cannot load BPF here, as check says it: the message elsewhere
// points at check itself.
std::string refusal_here(const CheckReport& r) {
  if (r.kernel.unprivileged()) {
    const Privileges& p = r.privileges;
    bool root = p.euid && *p.euid == 0;
    bool capable = (p.has(kCapBpf) || p.has(kCapSysAdmin)) && (p.has(kCapPerfmon) || p.has(kCapSysAdmin));
    if (!root && !capable)
      return "loading BPF needs root, or CAP_BPF and CAP_PERFMON: run `sudo allocscope check` to try all of "
             "it";
    return "the kernel refused BPF to a privileged allocscope (a seccomp filter, a user namespace's "
           "capabilities, or lockdown, above)";
  }
  return missing_features_message(r.kernel);
}

}  // namespace

bool can_record(const CheckReport& r) {
  return !r.trials.empty() &&
         std::all_of(r.trials.begin(), r.trials.end(), [](const LoadTrial& t) { return t.ok; });
}

std::string render_check(const CheckReport& r, bool verbose) {
  std::string out = "allocscope check: can allocscope record on this machine?\n\n";
  out += "kernel        " + r.kernel.release + "\n";
  out += "user          " + user_line(r.privileges) + "\n";
  out += "lockdown      " + r.lockdown.value_or("unknown (securityfs not mounted)") + "\n";
  out += "memlock       " + memlock_line(r.memlock) + "\n";
  if (r.perf_event_paranoid) out += "perf_event    paranoid " + std::to_string(*r.perf_event_paranoid) + "\n";
  if (std::string advice = privilege_advice(r.privileges); !advice.empty())
    out += "              " + advice + "\n";
  features_section(out, r.kernel, verbose);
  traps_section(out, r.kernel);
  trials_section(out, r.trials, verbose);
  out += "\n";
  std::string refusal = refusal_here(r);
  if (!refusal.empty()) {
    out += "record: no: " + refusal + "\nagent:  no\n";
  } else if (!can_record(r)) {
    out += "record: no: the kernel refused allocscope's programs (above); `allocscope check -v` shows why\n";
    out += "agent:  no\n";
  } else {
    out += "record: yes, with " + paths_line(r) + "\n";
    out += std::string("agent:  yes") + (r.kernel.has(Feature::AncestorCgroup) ? "" : " (without --cgroup)") +
           "\n";
  }
  out +=
      "record -- CMD without BPF (--no-bpf, the default without privilege): " +
      (r.preload_library.empty() ? "no: " + r.preload_refusal
                                 : "yes, in process through " + r.preload_library +
                                       ", stacks unwound by allocscope (-p, --all and the agent need BPF)") +
      "\n";
  return out;
}

std::string render_check_json(const CheckReport& r) {
  nlohmann::ordered_json doc;
  doc["kernel"] = r.kernel.release;
  if (r.privileges.euid) doc["euid"] = *r.privileges.euid;
  if (r.privileges.capabilities)
    for (auto [cap, name] :
         {std::pair{kCapBpf, "cap_bpf"}, std::pair{kCapPerfmon, "cap_perfmon"},
          std::pair{kCapSysAdmin, "cap_sys_admin"}, std::pair{kCapSysPtrace, "cap_sys_ptrace"}})
      doc["capabilities"][name] = r.privileges.has(cap);
  doc["lockdown"] = r.lockdown ? nlohmann::ordered_json(*r.lockdown) : nlohmann::ordered_json(nullptr);
  for (const FeatureSpec& s : feature_specs()) {
    const FeatureState& st = r.kernel.state(s.feature);
    auto& f = doc["features"][s.key];
    f["present"] = st.presence == Presence::Present   ? nlohmann::ordered_json(true)
                   : st.presence == Presence::Missing ? nlohmann::ordered_json(false)
                                                      : nlohmann::ordered_json(nullptr);
    f["first_kernel"] = s.first_kernel;
    f["required"] = s.required;
    if (!st.detail.empty()) f["detail"] = st.detail;
  }
  if (r.kernel.trap_ns > 0)
    doc["uprobe_trap_ns"] = {{"emulated", r.kernel.trap_ns}, {"single_stepped", r.kernel.stepped_trap_ns}};
  doc["probe_mode"] = probe_mode_name(r.mode);
  doc["trials"] = nlohmann::ordered_json::array();
  for (const LoadTrial& t : r.trials)
    doc["trials"].push_back({{"what", t.what}, {"ok", t.ok}, {"error", t.error}, {"ms", t.ms}});
  std::string refusal = refusal_here(r);
  doc["record"] = can_record(r);
  doc["agent"] = can_record(r);
  if (!refusal.empty()) doc["refusal"] = refusal;
  doc["record_without_bpf"] = !r.preload_library.empty();
  if (!r.preload_library.empty()) doc["preload_library"] = r.preload_library;
  if (!r.preload_refusal.empty()) doc["preload_refusal"] = r.preload_refusal;
  return doc.dump(2) + "\n";
}

}  // namespace allocscope
