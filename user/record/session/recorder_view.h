// What a recording shows an observer (the agent) while it runs: totals by
// process, window baselines and snapshots, what ended processes held, and
// the folds of their stacks. Used from the recording's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "record/live_view.h"
#include "record/session/recording_context.h"

namespace allocscope {

class RecorderView final : public LiveView {
 public:
  explicit RecorderView(RecordingContext& r) : r_(r) {}

  std::vector<ProcessTotals> processes() override;
  const ProcessTable& process_table() const override { return r_.parts->sink.processes(); }
  const std::string& cgroup_path(uint64_t id) override { return r_.cgroup_names.path_of(id); }
  size_t forget_removed_cgroups(uint64_t before_ms) override {
    return r_.cgroup_names.forget_removed(before_ms);
  }
  void catch_up() override;
  Baseline baseline(const InstanceSelector& keep) override;
  Recording snapshot(const InstanceSelector& keep, const Baseline* since) override;
  NamedCounters counters() override { return r_.counters(); }
  std::pair<size_t, size_t> stack_table() const override {
    return {r_.profile.stacks().size(), r_.config.max_stacks};
  }
  std::vector<Folded> fold_ended(uint64_t ended_before_ms, const FoldGrouping& group,
                                 uint64_t window_ms) override;
  NamedCounters table_sizes() const override;
  HoldTimes hold_times() const override { return hold_figures(r_.parts->session->hold_times()); }

 private:
  std::vector<uint32_t> stacks_of(const InstanceSelector& keep) const;

  RecordingContext& r_;
};

}  // namespace allocscope
