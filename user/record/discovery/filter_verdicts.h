// Which processes a recording samples: the roots it was given (-p, -- CMD),
// the --comm filter, and the verdicts that tell the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "base/pattern.h"
#include "base/result.h"
#include "host/cgroup_names.h"
#include "probe/session/bpf_session.h"
#include "record/events/sink_hooks.h"
#include "record/record.h"

namespace allocscope {

// Whether a cgroup v2 path (as /proc/PID/cgroup gives it) lies in the
// systemd unit (or slice, or scope) `unit`: one of its components is it.
bool cgroup_in_unit(std::string_view path, std::string_view unit);

// Samples lost to a full ring buffer, and their bytes, by processes the
// filter rejected once it judged them: not the recording's loss.
struct RejectedLoss {
  uint64_t samples = 0, bytes = 0;
};

class FilterVerdicts : public ProcessVerdicts {
 public:
  FilterVerdicts(const RecordConfig& config, BpfSession& session, CgroupNames& cgroup_names);

  // A process recorded until it exits, whatever its name: a member of the
  // kernel's table that keeps its live samples at exit.
  Result<void> add_root(uint32_t tgid);
  // A descendant of a root, forked before recording began.
  Result<void> follow(uint32_t tgid);

  bool accept(uint32_t tgid, const std::string& comm, uint64_t cgroup) override;
  void reject(uint32_t tgid) override;
  void unreject(uint32_t tgid, bool exited) override;
  void unaccept(uint32_t tgid, bool exited) override;
  bool judge_name(uint32_t tgid, const std::string& comm) override;
  bool keeps_live_at_exit(uint32_t tgid) const override { return roots_.contains(tgid); }
  // Verdicts the kernel's full process table refused: processes it samples
  // or skips against the filter's judgement.
  uint64_t verdicts_refused() const { return verdicts_refused_; }
  // Whether the filter rejected the latest program of process `tgid`.
  bool rejected(uint32_t tgid) const { return rejected_.contains(tgid); }
  // What the kernel lost of processes not judged yet that were then rejected.
  RejectedLoss rejected_loss() const;

 private:
  bool in_unit(uint32_t tgid, uint64_t cgroup);

  BpfSession& session_;
  CgroupNames& cgroup_names_;
  bool system_wide_, members_only_;
  bool judge_names_;  // judgements are also the kernel's, by name (SessionConfig::judge_names)
  std::optional<Pattern> comm_filter_;
  std::string unit_;
  std::unordered_map<uint64_t, bool> in_unit_;  // by cgroup id (bounded: cleared when full)
  std::unordered_set<uint32_t> roots_;
  static constexpr size_t kMaxRemembered = 1 << 16;
  std::unordered_set<uint32_t> rejected_;
  // Names judged at an exec (and told to the kernel): whether accepted.
  // Bounded: forgotten when full, and judged again.
  std::unordered_map<std::string, bool> judged_names_;

  uint64_t verdicts_refused_ = 0;
};

}  // namespace allocscope
