// Which processes a recording samples: the roots it was given (-p, -- CMD),
// the --comm filter, and the verdicts that tell the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/result.h"
#include "probe/bpf_session.h"
#include "record/record.h"
#include "record/sink_hooks.h"

namespace allocscope {

// Whether a cgroup v2 path (as /proc/PID/cgroup gives it) lies in the
// systemd unit (or slice, or scope) `unit`: one of its components is it.
bool cgroup_in_unit(std::string_view path, std::string_view unit);

class ProcessFilter : public ProcessVerdicts {
 public:
  ProcessFilter(const RecordConfig& config, BpfSession& session);

  // A process recorded until it exits, whatever its name: a member of the
  // kernel's table that keeps its live samples at exit.
  Result<void> add_root(uint32_t tgid);
  // A descendant of a root, forked before recording began.
  Result<void> follow(uint32_t tgid);

  bool accept(uint32_t tgid, const std::string& comm, uint64_t cgroup) override;
  void reject(uint32_t tgid) override;
  void unreject(uint32_t tgid, bool exited) override;
  bool keeps_live_at_exit(uint32_t tgid) const override { return roots_.contains(tgid); }
  // Verdicts the kernel's full process table refused: processes it samples
  // or skips against the filter's judgement.
  uint64_t verdicts_refused() const { return verdicts_refused_; }

 private:
  bool in_unit(uint32_t tgid, uint64_t cgroup);

  BpfSession& session_;
  bool system_wide_, members_only_;
  std::optional<std::regex> comm_filter_;
  std::string unit_;
  std::unordered_map<uint64_t, bool> in_unit_;  // by cgroup id (bounded: cleared when full)
  std::unordered_set<uint32_t> roots_;
  uint64_t verdicts_refused_ = 0;
};

}  // namespace allocscope
