// The figures every job of a recording reads: its state, counters and meta.
#include "record/session/recording_context.h"

#include "record/clocks.h"
#include "record/messages.h"
#include "record/scope.h"

namespace allocscope {

std::string RecordingContext::sampling() const {
  if (config.command.empty() || !parts) return "";
  const ProcessTable& table = parts->sink.processes();
  return describe_sampling(plan, table.ended_in_process(), table.ended_through_probes());
}

RecordingState RecordingContext::state() const {
  const LibraryDiscovery& l = parts->libraries;
  return {figures_of(*parts->session),
          profile,
          parts->sink,
          parts->tables,
          l.libraries_missed(),
          parts->verdicts.verdicts_refused(),
          l.without_allocator(),
          l.without_allocator_names(),
          l.go_unsampled().count,
          l.go_unsampled().names,
          l.go_profiled().count,
          l.go_profiled().names,
          l.go_unsampled_by_runtime().count,
          l.go_unsampled_by_runtime().names,
          l.go_sampled().count,
          l.go_sampled().names,
          l.missed_names(),
          tallies.held_too_long,
          parts->verdicts.rejected_loss(),
          sampling(),
          &parts->python};
}

void RecordingContext::absorb_exact(bool with_ages) {
  if (!exact_mode(config)) return;
  parts->sink.absorb_exact(parts->session->exact_totals());
  profile.settle_peak(monotonic_ns());
  if (with_ages && !config.no_free) parts->sink.set_live_times(parts->session->live_entries());
}

NamedCounters RecordingContext::counters() {
  NamedCounters c = recording_counters(state());
  c.emplace_back("cgroups_forgotten", cgroup_names.forgotten());
  c.emplace_back("python_frames_table_full", symbolizer.python_frames_full());
  c.emplace_back("debug_files_refused", Symbolizer::debug_files_refused());
  if (folds.size()) c.emplace_back("fold_journal_dropped", folds.journal_dropped());
  if (config.duty_period_ms) {
    c.emplace_back("duty_windows", tallies.duty_windows + 1);  // the first window began attached
    c.emplace_back("duty_probes_paused", parts->session->paused());
    c.emplace_back("duty_probes_lost", tallies.duty_lost);
  }
  return c;
}

RecordingMeta RecordingContext::meta(uint64_t duration_ms) {
  auto paths = parts->session->paths();
  if (std::string how = sampling(); !how.empty()) paths.emplace_back("sampling", how);
  for (auto& p : parts->python.paths()) paths.push_back(std::move(p));
  if (config.no_free) paths.emplace_back("frees", kFreesNotProbed);
  if (targets_ended) paths.emplace_back("taken", kTakenAfterExit);
  return {config.rate,    start_wall_ns,   int64_t(duration_ms) * 1000000, config.metric, counters(),
          monotonic_ns(), std::move(paths)};
}

}  // namespace allocscope
