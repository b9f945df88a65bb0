// The capability report's facts and its text, apart from finding them out.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "host/privileges.h"
#include "probe/features/kernel_features.h"
#include "probe/libbpf_log.h"
#include "probe/modes.h"

namespace allocscope {

// One configuration of the real BPF programs, loaded and verified.
struct LoadTrial {
  std::string what;  // "record, sampled"
  bool ok = false;
  std::string error;  // why not (the verifier's last word, or the refusal)
  double ms = 0;      // how long the load took
  // Each program the verifier accepted: instructions processed, and the
  // stack of each of its functions (shown with -v).
  std::vector<std::pair<std::string, VerifierStats>> programs;
};

struct CheckReport {
  KernelFeatures kernel;
  Privileges privileges;
  std::optional<std::string> lockdown;
  std::optional<uint64_t> memlock;  // bytes; nullopt: unlimited
  std::optional<int> perf_event_paranoid;
  ProbeMode mode = ProbeMode::Classic;  // what auto picks here
  std::vector<LoadTrial> trials;
  // The preload library, for `record -- CMD` without BPF: its path, or why
  // it cannot be used.
  std::string preload_library, preload_refusal;
};

// Whether every trial loaded: record and agent can run.
bool can_record(const CheckReport& r);
std::string render_check(const CheckReport& r, bool verbose);
// The same facts for programs: kernel, user, each feature by key, the
// trials, and the verdicts.
std::string render_check_json(const CheckReport& r);

}  // namespace allocscope
