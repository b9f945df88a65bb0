// The recorder's loop (poll, intervals, holds, duty cycle, snapshots) and
// what it writes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/units.h"
#include "host/process.h"
#include "output/outputs.h"
#include "output/timeline.h"
#include "record/clocks.h"
#include "record/messages.h"
#include "record/scope.h"
#include "record/session/recorder.h"
#include "record/session/stop_signals.h"
#include "record/view/output_writer.h"
#include "record/view/progress.h"
#include "record/view/recording_builder.h"
#include "record/view/summary.h"

namespace allocscope {
namespace {

// The longest a process that maps a new file is held (its event lost or
// behind a backlog): then it runs on, and may be probed late.
constexpr uint64_t kMaxHoldNs = 1'000'000'000;
// The longest for one whose tables are being built: that wait makes progress
// (a large program's table takes a second on a loaded machine, and a queue of
// new C libraries adds up), and running on early would cut its stacks short.
constexpr uint64_t kMaxBuildHoldNs = 10'000'000'000;

}  // namespace

Result<LoopEnd> Recorder::loop(std::vector<Target>& targets) {
  start_wall_ns_ = wall_ns();
  LoopEnd l;
  l.start = l.interval_start = now_ms();
  // --top on a terminal redraws the screen: no progress line beside it.
  ProgressReporter progress(!config_.quiet && !(config_.top_every_ms && isatty(STDOUT_FILENO) == 1));
  for (Target& t : targets)
    if (t.exit_fd() >= 0)
      if (auto ok = parts_->session->wake_once_readable(t.exit_fd()); !ok) return fail(ok.error());
  while (!stop_signal()) {
    uint64_t now = now_ms();
    if (config_.duration_ms && now - l.start >= config_.duration_ms) break;
    if (config_.interval_ms && now - l.interval_start >= config_.interval_ms) {
      progress.finish();
      if (auto ok = write(++l.interval, now - l.interval_start); !ok) print_error(ok.error());
      if (timeline_) timeline_->observe(now - l.start, profile_, true);  // before the totals go
      profile_.reset_alloc_totals();                                     // the live set carries over
      l.interval_start = now;
      start_wall_ns_ = wall_ns();
    }
    uint64_t next_interval = config_.interval_ms ? l.interval_start + config_.interval_ms : UINT64_MAX;
    uint64_t next_stop = config_.duration_ms ? l.start + config_.duration_ms : UINT64_MAX;
    parts_->sink.yield_at(std::min({next_interval, next_stop, now + 1000}));
    if (auto n = parts_->session->poll(100); !n) return fail(n.error());
    // Tables built meanwhile: in, their held processes continued, and the
    // walks that waited for them finished.
    bool tables_in = parts_->tables.collect() > 0;
    parts_->sink.retry_waiting(monotonic_ns(), tables_in);
    watch_live(l.start);
    if (parts_->libraries.has_pending()) parts_->libraries.retry_pending(now_ms());
    // A held process whose event was lost, or waits behind a backlog, goes on.
    uint64_t mono = monotonic_ns();
    held_too_long_ += parts_->session->release_held_before(
        mono - kMaxHoldNs, parts_->tables.waiting_processes(), mono - kMaxBuildHoldNs);
    sweep_exact_live(now_ms());
    end_vanished(now_ms());
    if (config_.duty_period_ms) duty_step(now_ms() - l.start);
    if (observer_) observer_->on_tick(*this);
    if (double elapsed = (now_ms() - l.start) / 1000.0; progress.due(elapsed))
      progress.update(progress_figures(state(), elapsed));  // the kernel's counters read only then
    if (!targets.empty() &&
        std::all_of(targets.begin(), targets.end(), [](Target& t) { return t.exited(); })) {
      l.target_gone = true;
      break;
    }
  }
  progress.finish();
  l.end = now_ms();
  return l;
}

// The duty cycle: probes off for the rest of each period after its first
// duty_on_ms. Frees are not seen while they are off, so a window starts
// with no live sample: in-use figures cover what the windows allocated.
void Recorder::duty_step(uint64_t elapsed_ms) {
  BpfSession& s = *parts_->session;
  bool on = elapsed_ms % config_.duty_period_ms < config_.duty_on_ms;
  if (!on && !s.paused()) {
    s.pause_probes();
  } else if (on && s.paused()) {
    profile_.drop_all_live();
    std::vector<as_live_key> keys;
    for (const auto& [key, value] : s.live_entries()) keys.push_back(key);
    s.forget_live(keys);
    duty_lost_ += s.resume_probes();
    ++duty_windows_;
  }
}

// Exact mode: the kernel's live entries of ended processes, deleted now and
// then (finding them means reading the whole live map), unless they freed
// all they allocated. (Sweeping less often reads no fewer entries: in the
// agent's soak nearly every entry read is one to delete.)
void Recorder::sweep_exact_live(uint64_t now) {
  if (!exact_mode(config_) || !parts_->sink.has_stale_live()) return;
  if (parts_->sink.stale_live_entries() == 0) {
    parts_->sink.forget_stale_ids();
    return;
  }
  if (now - last_sweep_ms_ < 1000) return;
  last_sweep_ms_ = now;
  auto live = parts_->session->live_entries();
  parts_->session->forget_live(parts_->sink.stale_live(live));
  parts_->sink.forget_stale_ids();
}

// Once process events were lost, an exit among them would leave its
// process running here for good, its live bytes with it: every few seconds,
// processes still running here that /proc no longer has are ended.
void Recorder::end_vanished(uint64_t now, bool drained) {
  constexpr uint64_t kPeriodMs = 5000;
  if (!drained && now - last_vanish_check_ms_ < kPeriodMs) return;
  last_vanish_check_ms_ = now;
  if (parts_->session->counters()[AS_CNT_PROC_DROPS] == 0) return;
  parts_->sink.end_vanished([](uint32_t tgid) { return process_exists(pid_t(tgid)); }, drained);
}

RecordingState Recorder::state() const {
  return {figures_of(*parts_->session),
          profile_,
          parts_->sink,
          parts_->tables,
          parts_->libraries.libraries_missed(),
          parts_->verdicts.verdicts_refused(),
          parts_->libraries.without_allocator(),
          parts_->libraries.without_allocator_names(),
          parts_->libraries.go_unsampled().count,
          parts_->libraries.go_unsampled().names,
          parts_->libraries.go_profiled().count,
          parts_->libraries.go_profiled().names,
          parts_->libraries.go_unsampled_by_runtime().count,
          parts_->libraries.go_unsampled_by_runtime().names,
          parts_->libraries.go_sampled().count,
          parts_->libraries.go_sampled().names,
          parts_->libraries.missed_names(),
          held_too_long_,
          parts_->verdicts.rejected_loss(),
          sampling(),
          &parts_->python};
}

// Exact mode: the kernel's totals, as of now, and (for outputs) the ages
// of the blocks still live, which takes a read of the whole live map.
void Recorder::absorb_exact(bool with_ages) {
  if (!exact_mode(config_)) return;
  parts_->sink.absorb_exact(parts_->session->exact_totals());
  profile_.settle_peak(monotonic_ns());
  if (with_ages && !config_.no_free) parts_->sink.set_live_times(parts_->session->live_entries());
}

// After each poll: --snapshot-above's trigger. The sink returns to the loop
// as soon as live bytes reach the threshold, so the snapshot is of that
// moment, not of the next deadline. Once taken, the next one waits until
// live bytes fall below 90 % of the threshold and cross it again.
void Recorder::watch_live(uint64_t start_ms) {
  if (config_.peak || config_.snapshot_above || timeline_) absorb_exact(false);
  if (timeline_) timeline_->observe(now_ms() - start_ms, profile_);
  if (!config_.snapshot_above) return;
  double threshold = double(config_.snapshot_above), live = profile_.live_bytes();
  if (above_ && live < 0.9 * threshold) above_ = false;
  if (!above_ && live >= threshold) {
    above_ = true;
    if (snapshots_ >= config_.max_snapshots) {
      ++snapshots_missed_;
    } else {
      RecordingMeta m = meta(now_ms() - start_ms);
      if (config_.metric != Metric::InuseObjects) m.metric = Metric::InuseSpace;
      std::string tag = "above-" + std::to_string(++snapshots_);
      auto ok = write_tagged_outputs(saved_recording(profile_, symbolizer_, m, parts_->sink.origins()),
                                     config_, tag);
      if (!ok) print_error(ok.error());
      if (!config_.quiet)
        std::fprintf(stderr, "\nallocscope: %s live (above %s): wrote the %s in-use profile\n",
                     format_bytes(live).c_str(), format_bytes(threshold).c_str(), tag.c_str());
    }
  }
  parts_->sink.yield_above(above_ ? INFINITY : threshold);
}

// --peak: the in-use profile at the highest live estimate of the recording.
Result<void> Recorder::write_peak(uint64_t start_ms) {
  const PeakKeeper& peak = profile_.peak();
  if (!config_.peak || !peak.seen() || config_.outputs.empty()) return {};
  uint64_t since_start_ms = peak.ts_ns() / 1000000 > start_ms ? peak.ts_ns() / 1000000 - start_ms : 0;
  RecordingMeta m = meta(since_start_ms);
  m.time_nanos = start_wall_ns_;
  if (config_.metric != Metric::InuseObjects) m.metric = Metric::InuseSpace;
  m.counters.emplace_back("peak_live_bytes", uint64_t(std::max(0.0, peak.bytes())));
  m.counters.emplace_back("peak_at_ms", since_start_ms);
  return write_tagged_outputs(build_peak_recording(profile_, symbolizer_, m, parts_->sink.origins()), config_,
                              "peak");
}

NamedCounters Recorder::counters() {
  NamedCounters c = recording_counters(state());
  c.emplace_back("cgroups_forgotten", cgroup_names_.forgotten());
  c.emplace_back("python_frames_table_full", symbolizer_.python_frames_full());
  c.emplace_back("debug_files_refused", Symbolizer::debug_files_refused());
  if (folds_.size()) c.emplace_back("fold_journal_dropped", folds_.journal_dropped());
  if (config_.duty_period_ms) {
    c.emplace_back("duty_windows", duty_windows_ + 1);  // the first window began attached
    c.emplace_back("duty_probes_paused", parts_->session->paused());
    c.emplace_back("duty_probes_lost", duty_lost_);
  }
  return c;
}

RecordingMeta Recorder::meta(uint64_t duration_ms) {
  auto paths = parts_->session->paths();
  if (std::string how = sampling(); !how.empty()) paths.emplace_back("sampling", how);
  for (auto& p : parts_->python.paths()) paths.push_back(std::move(p));
  if (config_.no_free) paths.emplace_back("frees", kFreesNotProbed);
  if (targets_ended_) paths.emplace_back("taken", kTakenAfterExit);
  return {config_.rate,   start_wall_ns_,  int64_t(duration_ms) * 1000000, config_.metric, counters(),
          monotonic_ns(), std::move(paths)};
}

Result<void> Recorder::write(unsigned number, uint64_t duration_ms) {
  if (config_.outputs.empty()) return {};
  absorb_exact();
  return write_record_outputs(
      saved_recording(profile_, symbolizer_, meta(duration_ms), parts_->sink.origins()), config_, number);
}

// --timeline: the chart, with what was live at the end as its last point.
Result<void> Recorder::write_timeline(uint64_t duration_ms) {
  if (!timeline_) return {};
  absorb_exact();
  timeline_->observe(duration_ms, profile_, true);
  Recording r = build_recording(profile_, symbolizer_, meta(duration_ms), parts_->sink.origins());
  std::vector<std::vector<std::string>> names;  // build_recording keeps every stack, in order
  for (const RecSample& s : r.samples) names.push_back(frame_names(r, s, config_.render.lines));
  TimelineOptions o;
  o.subtitle = exact_mode(config_) ? "exact (--rate 1)" : "rate " + format_bytes(double(config_.rate));
  o.subtitle +=
      ", " + std::to_string(duration_ms / 1000) + "." + std::to_string(duration_ms % 1000 / 100) + " s";
  return write_file_atomically(config_.timeline, render_timeline(*timeline_, names, o),
                               config_.outputs.empty() ? std::nullopt : config_.outputs[0].mode);
}

}  // namespace allocscope
