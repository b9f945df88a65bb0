// What the recorder shows an observer (the agent) while it runs: totals by
// process, window baselines and snapshots, what ended processes held.
#include <algorithm>
#include <unordered_map>

#include "record/clocks.h"
#include "record/recorder.h"
#include "record/recording_builder.h"
#include "record/scope.h"

namespace allocscope {

std::vector<ProcessTotals> Recorder::processes() {
  absorb_exact();
  const ProcessTable& table = parts_->sink.processes();
  std::unordered_map<uint32_t, size_t> index;  // instance -> its place in the result
  std::vector<ProcessTotals> all;
  for (const StackRecord& s : profile_.stacks()) {
    auto [it, made] = index.try_emplace(s.pid, all.size());
    if (made) all.push_back({s.pid, table.instance(s.pid), {}});
    all[it->second].totals.merge(s.totals);
  }
  return all;
}

NamedCounters Recorder::table_sizes() const {
  const ProcessTable& table = parts_->sink.processes();
  return {{"stacks", profile_.stacks().size()},
          {"live_samples", profile_.live_count()},
          {"process_ids", table.slots()},
          {"running_processes", table.running()},
          {"resolved_mappings", symbolizer_.resolved_mappings()},
          {"open_binaries", symbolizer_.modules()},
          {"cgroup_names", cgroup_names_.size()}};
}

std::vector<ProcessTotals> Recorder::forget_ended(uint64_t ended_before_ms) {
  const EventSink& sink = parts_->sink;
  const ProcessTable& table = sink.processes();
  auto forgettable = [&](uint32_t instance) {
    const ProcessInstance& p = table.instance(instance);
    return p.ended && p.ended_ms < ended_before_ms &&
           !(exact_mode(config_) && sink.has_kernel_totals(instance));
  };
  std::vector<ProcessTotals> ended = processes();
  std::erase_if(ended, [&](const ProcessTotals& p) { return !forgettable(p.instance); });
  if (ended.empty()) return ended;
  parts_->sink.forget_stacks(profile_.forget([&](const StackRecord& s) { return forgettable(s.pid); }));
  return ended;
}

std::vector<uint32_t> Recorder::stacks_of(const InstanceSelector& keep) const {
  const ProcessTable& table = parts_->sink.processes();
  std::unordered_map<uint32_t, bool> kept;  // instance -> keep's verdict
  std::vector<uint32_t> stacks;
  for (uint32_t i = 0; i < profile_.stacks().size(); ++i) {
    uint32_t instance = profile_.stacks()[i].pid;
    auto [it, made] = kept.try_emplace(instance, false);
    if (made) it->second = keep(instance, table.instance(instance));
    if (it->second) stacks.push_back(i);
  }
  return stacks;
}

Baseline Recorder::baseline(const InstanceSelector& keep) {
  absorb_exact();
  Baseline base;
  for (uint32_t i : stacks_of(keep))
    base.emplace(profile_.stacks()[i].serial, window_base(profile_.stacks()[i].totals));
  return base;
}

Recording Recorder::snapshot(const InstanceSelector& keep, const Baseline* since) {
  absorb_exact();
  StackChoice choice{stacks_of(keep), since};
  uint64_t elapsed_ms = uint64_t(std::max<int64_t>(0, wall_ns() - start_wall_ns_) / 1000000);
  return build_recording(profile_, symbolizer_, meta(elapsed_ms), parts_->sink.origins(), &choice);
}

}  // namespace allocscope
