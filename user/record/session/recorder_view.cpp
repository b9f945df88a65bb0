// What the recorder shows an observer (the agent) while it runs: totals by
// process, window baselines and snapshots, what ended processes held.
#include <algorithm>
#include <unordered_map>

#include "record/clocks.h"
#include "record/scope.h"
#include "record/session/recorder.h"
#include "record/view/recording_builder.h"

namespace allocscope {

// Totals only: the ages of live blocks (a read of the whole live map) are
// for outputs.
std::vector<ProcessTotals> Recorder::processes() {
  absorb_exact(false);
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
          {"cgroup_names", cgroup_names_.size()},
          {"folded_instances", folds_.size()},
          {"fold_journal", folds_.journal_size()}};
}

std::vector<Folded> Recorder::fold_ended(uint64_t ended_before_ms, const FoldGrouping& group,
                                         uint64_t window_ms) {
  uint64_t now = now_ms();
  if (now > window_ms) folds_.prune(now - window_ms);
  EventSink& sink = parts_->sink;
  const ProcessTable& table = sink.processes();
  auto foldable = [&](const ProcessInstance& p, uint32_t instance) {
    return p.ended && !p.folded && p.ended_ms < ended_before_ms &&
           !(exact_mode(config_) && sink.has_kernel_totals(instance));
  };
  std::vector<Folded> folded;
  std::unordered_map<uint32_t, uint32_t> into;
  for (ProcessTotals& p : processes()) {
    if (!foldable(p.process, p.instance)) continue;
    FoldKey key = group(p.instance, p.process);
    auto id = folds_.find(key, table);
    bool made = !id;
    if (made) {
      id = sink.add_folded(key.comm);
      folds_.add(key, *id, table.instance(*id).serial);
    }
    into.emplace(p.instance, *id);
    folded.push_back({std::move(p), *id, std::move(key), made});
  }
  if (folded.empty()) return folded;
  std::vector<uint64_t> moved;  // serials of the stacks that move, by old index (0: stays)
  for (const StackRecord& s : profile_.stacks()) moved.push_back(into.contains(s.pid) ? s.serial : 0);
  std::vector<uint32_t> remap = sink.fold_stacks(into);
  for (size_t i = 0; i < moved.size(); ++i)
    if (moved[i]) folds_.journal(moved[i], profile_.stacks()[remap[i]].serial, now);
  return folded;
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
  absorb_exact(false);
  Baseline base;
  for (uint32_t i : stacks_of(keep))
    base.emplace(profile_.stacks()[i].serial, window_base(profile_.stacks()[i].totals));
  return base;
}

Recording Recorder::snapshot(const InstanceSelector& keep, const Baseline* since) {
  absorb_exact();
  Baseline through;
  if (since) through = folds_.through(*since);
  StackChoice choice{stacks_of(keep), since ? &through : nullptr};
  uint64_t elapsed_ms = uint64_t(std::max<int64_t>(0, wall_ns() - start_wall_ns_) / 1000000);
  return build_recording(profile_, symbolizer_, meta(elapsed_ms), parts_->sink.origins(), &choice);
}

}  // namespace allocscope
