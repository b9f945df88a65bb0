// What the recorder shows an observer (the agent) while it runs.
#include "record/session/recorder_view.h"

#include <algorithm>
#include <unordered_map>

#include "base/clocks.h"
#include "record/messages.h"
#include "record/scope.h"
#include "record/view/recording_builder.h"

namespace allocscope {

// Totals only: the ages of live blocks (a read of the whole live map) are
// for outputs.
std::vector<ProcessTotals> RecorderView::processes() {
  r_.absorb_exact(false);
  const ProcessTable& table = r_.parts->sink.processes();
  std::unordered_map<uint32_t, size_t> index;  // instance -> its place in the result
  std::vector<ProcessTotals> all;
  for (const StackRecord& s : r_.profile.stacks()) {
    auto [it, made] = index.try_emplace(s.pid, all.size());
    if (made) all.push_back({s.pid, table.instance(s.pid), {}});
    all[it->second].totals.merge(s.totals);
  }
  return all;
}

// A request of the observer's sees the events placed before it: one still
// being written (its writer preempted on a loaded machine) is waited for a
// tenth of a second at most.
void RecorderView::catch_up() {
  constexpr uint64_t kMaxWaitMs = 100;
  if (auto ok = r_.catch_up(kMaxWaitMs); !ok) print_error(ok.error());
}

NamedCounters RecorderView::table_sizes() const {
  const ProcessTable& table = r_.parts->sink.processes();
  return {{"stacks", r_.profile.stacks().size()},
          {"live_samples", r_.profile.live_count()},
          {"process_ids", table.slots()},
          {"running_processes", table.running()},
          {"resolved_mappings", r_.symbolizer.resolved_mappings()},
          {"open_binaries", r_.symbolizer.modules()},
          {"cgroup_names", r_.cgroup_names.size()},
          {"folded_instances", r_.folds.size()},
          {"fold_journal", r_.folds.journal_size()}};
}

std::vector<Folded> RecorderView::fold_ended(uint64_t ended_before_ms, const FoldGrouping& group,
                                             uint64_t window_ms) {
  uint64_t now = now_ms();
  if (now > window_ms) r_.folds.prune(now - window_ms);
  EventSink& sink = r_.parts->sink;
  const ProcessTable& table = sink.processes();
  auto foldable = [&](const ProcessInstance& p, uint32_t instance) {
    return p.ended && !p.folded && p.ended_ms < ended_before_ms &&
           !(exact_mode(r_.config) && sink.has_kernel_totals(instance));
  };
  std::vector<Folded> folded;
  std::unordered_map<uint32_t, uint32_t> into;
  for (ProcessTotals& p : processes()) {
    if (!foldable(p.process, p.instance)) continue;
    FoldKey key = group(p.instance, p.process);
    auto id = r_.folds.find(key, table);
    bool made = !id;
    if (made) {
      id = sink.add_folded(key.comm);
      r_.folds.add(key, *id, table.instance(*id).serial);
    }
    into.emplace(p.instance, *id);
    folded.push_back({std::move(p), *id, std::move(key), made});
  }
  if (folded.empty()) return folded;
  std::vector<uint64_t> moved;  // serials of the stacks that move, by old index (0: stays)
  for (const StackRecord& s : r_.profile.stacks()) moved.push_back(into.contains(s.pid) ? s.serial : 0);
  std::vector<uint32_t> remap = sink.fold_stacks(into);
  for (size_t i = 0; i < moved.size(); ++i)
    if (moved[i]) r_.folds.journal(moved[i], r_.profile.stacks()[remap[i]].serial, now);
  return folded;
}

std::vector<uint32_t> RecorderView::stacks_of(const InstanceSelector& keep) const {
  const ProcessTable& table = r_.parts->sink.processes();
  std::unordered_map<uint32_t, bool> kept;  // instance -> keep's verdict
  std::vector<uint32_t> stacks;
  for (uint32_t i = 0; i < r_.profile.stacks().size(); ++i) {
    uint32_t instance = r_.profile.stacks()[i].pid;
    auto [it, made] = kept.try_emplace(instance, false);
    if (made) it->second = keep(instance, table.instance(instance));
    if (it->second) stacks.push_back(i);
  }
  return stacks;
}

Baseline RecorderView::baseline(const InstanceSelector& keep) {
  r_.absorb_exact(false);
  Baseline base;
  for (uint32_t i : stacks_of(keep))
    base.emplace(r_.profile.stacks()[i].serial, window_base(r_.profile.stacks()[i].totals));
  return base;
}

Recording RecorderView::snapshot(const InstanceSelector& keep, const Baseline* since) {
  r_.absorb_exact();
  Baseline through;
  if (since) through = r_.folds.through(*since);
  StackChoice choice{stacks_of(keep), since ? &through : nullptr};
  uint64_t elapsed_ms = uint64_t(std::max<int64_t>(0, wall_ns() - r_.start_wall_ns) / 1000000);
  return build_recording(r_.profile, r_.symbolizer, r_.meta(elapsed_ms), r_.parts->sink.origins(), &choice);
}

}  // namespace allocscope
