// The recorder's loop: poll, intervals, holds, duty cycle, snapshots.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/clocks.h"
#include "base/units.h"
#include "host/process.h"
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
  r_.start_wall_ns = wall_ns();
  LoopEnd l;
  l.start = l.interval_start = now_ms();
  // --top on a terminal redraws the screen: no progress line beside it.
  ProgressReporter progress(!config_.quiet && !(config_.top_every_ms && isatty(STDOUT_FILENO) == 1));
  for (Target& t : targets)
    if (t.exit_fd() >= 0)
      if (auto ok = r_.parts->session->wake_once_readable(t.exit_fd()); !ok) return fail(ok.error());
  while (!stop_signal()) {
    uint64_t now = now_ms();
    if (config_.duration_ms && now - l.start >= config_.duration_ms) break;
    if (config_.interval_ms && now - l.interval_start >= config_.interval_ms) {
      // The next interval starts where this one ends, not once it is written
      // (a first write reads every binary's DWARF): one series, end to end.
      uint64_t boundary_wall_ns = wall_ns();
      progress.finish();
      if (auto ok = write_outputs(r_, ++l.interval, now - l.interval_start); !ok) print_error(ok.error());
      if (r_.timeline) r_.timeline->observe(now - l.start, r_.profile, true);  // before the totals go
      r_.profile.reset_alloc_totals();                                         // the live set carries over
      l.interval_start = now;
      r_.start_wall_ns = boundary_wall_ns;
    }
    uint64_t next_interval = config_.interval_ms ? l.interval_start + config_.interval_ms : UINT64_MAX;
    uint64_t next_stop = config_.duration_ms ? l.start + config_.duration_ms : UINT64_MAX;
    r_.parts->sink.yield_at(std::min({next_interval, next_stop, now + 1000}));
    if (auto n = r_.deliver_events(100); !n) return fail(n.error());
    // Tables built meanwhile: in, their held processes continued, and the
    // walks that waited for them finished.
    bool tables_in = r_.parts->tables.collect() > 0;
    r_.parts->sink.retry_waiting(monotonic_ns(), tables_in);
    watch_live(l.start);
    if (r_.parts->libraries.has_pending()) r_.parts->libraries.retry_pending(now_ms());
    enter_busy(now_ms());
    // A held process whose event was lost, or waits behind a backlog, goes on.
    uint64_t mono = monotonic_ns();
    std::vector<uint32_t> ran_on;
    r_.tallies.held_too_long += r_.parts->session->release_held_before(
        mono - kMaxHoldNs, r_.parts->tables.waiting_processes(), mono - kMaxBuildHoldNs, &ran_on);
    note_held_too_long(ran_on);
    sweep_exact_live(now_ms());
    end_vanished(now_ms());
    if (config_.duty_period_ms) duty_step(now_ms() - l.start);
    if (observer_) observer_->on_tick(view_);
    if (double elapsed = (now_ms() - l.start) / 1000.0; progress.due(elapsed))
      progress.update(progress_figures(r_.state(), elapsed));  // the kernel's counters read only then
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

// The first few processes continued by the bound are named in the summary.
void Recorder::note_held_too_long(const std::vector<uint32_t>& pids) {
  constexpr size_t kNamed = 8;
  for (uint32_t pid : pids) {
    if (r_.tallies.held_too_long_names.size() >= kNamed) return;
    std::string comm = read_comm(pid_t(pid));  // read once it runs on: it may have ended since
    r_.tallies.held_too_long_names.push_back(std::to_string(pid) + " (" + (comm.empty() ? "ended" : comm) +
                                             ")");
  }
}

// The duty cycle: probes off for the rest of each period after its first
// duty_on_ms. Frees are not seen while they are off, so a window starts
// with no live sample: in-use figures cover what the windows allocated.
void Recorder::duty_step(uint64_t elapsed_ms) {
  BpfSession& s = *r_.parts->session;
  bool on = elapsed_ms % config_.duty_period_ms < config_.duty_on_ms;
  if (!on && !s.paused()) {
    s.pause_probes();
  } else if (on && s.paused()) {
    r_.profile.drop_all_live();
    std::vector<as_live_key> keys;
    for (const auto& [key, value] : s.live().entries()) keys.push_back(key);
    s.live().forget(keys);
    r_.tallies.duty_lost += s.resume_probes();
    ++r_.tallies.duty_windows;
  }
}

// After the probes went: every event placed before is read. The sink's
// deadlines are lifted (a pass it cut short would have ended the drain
// with events unread: a slow detach easily outlasts the last deadline),
// and an event still being written is waited for, 100 ms at most.
void Recorder::drain_events() {
  EventSink& sink = r_.parts->sink;
  BpfSession& session = *r_.parts->session;
  sink.yield_at(UINT64_MAX);
  sink.yield_above(INFINITY);
  for (int waits = 0; waits < 100;) {
    auto n = r_.deliver_events(0, true);
    if (!n) break;
    if (*n > 0) continue;
    if (session.events_read() >= session.events_placed()) break;
    ++waits;
    usleep(1000);
  }
}

// Exact mode: the kernel's live entries of ended processes, deleted by the
// kernel itself (sweep_live), unless they freed all they allocated. A sweep
// walks every bucket of the live map (4M with --rate 1: tens of ms), so it
// waits for a sixteenth of the map or 10 s (or a read of the live blocks'
// ages: absorb_exact).
void Recorder::sweep_exact_live(uint64_t now) {
  EventSink& sink = r_.parts->sink;
  uint64_t stale = sink.stale_live_entries();
  if (!exact_mode(config_) || stale == 0) return;
  if (stale < config_.max_live / 16 && now - last_sweep_ms_ < 10000) return;
  last_sweep_ms_ = now;
  r_.sweep_stale_live();
}

// Once process events were lost, an exit among them would leave its
// process running here for good, its live bytes with it: every few seconds,
// processes still running here that /proc no longer has are ended.
void Recorder::end_vanished(uint64_t now, bool drained) {
  constexpr uint64_t kPeriodMs = 5000;
  if (!drained && now - last_vanish_check_ms_ < kPeriodMs) return;
  last_vanish_check_ms_ = now;
  if (r_.parts->session->counters()[AS_CNT_PROC_DROPS] == 0) return;
  r_.parts->sink.end_vanished([](uint32_t tgid) { return process_exists(pid_t(tgid)); }, drained);
}

// After each poll: --snapshot-above's trigger. The sink returns to the loop
// as soon as live bytes reach the threshold, so the snapshot is of that
// moment, not of the next deadline. Once taken, the next one waits until
// live bytes fall below 90 % of the threshold and cross it again.
void Recorder::watch_live(uint64_t start_ms) {
  if (config_.peak || config_.snapshot_above || r_.timeline) r_.absorb_exact(false);
  if (r_.timeline) r_.timeline->observe(now_ms() - start_ms, r_.profile);
  if (!config_.snapshot_above) return;
  double threshold = double(config_.snapshot_above), live = r_.profile.live_bytes();
  if (above_ && live < 0.9 * threshold) above_ = false;
  if (!above_ && live >= threshold) {
    above_ = true;
    if (snapshots_ >= config_.max_snapshots) {
      ++snapshots_missed_;
    } else {
      RecordingMeta m = r_.meta(now_ms() - start_ms);
      if (config_.metric != Metric::InuseObjects) m.metric = Metric::InuseSpace;
      std::string tag = "above-" + std::to_string(++snapshots_);
      auto ok = write_tagged_outputs(saved_recording(r_.profile, r_.symbolizer, m, r_.parts->sink.origins()),
                                     config_, tag);
      if (!ok) print_error(ok.error());
      if (!config_.quiet)
        std::fprintf(stderr, "\nallocscope: %s live (above %s): wrote the %s in-use profile\n",
                     format_bytes(live).c_str(), format_bytes(threshold).c_str(), tag.c_str());
    }
  }
  r_.parts->sink.yield_above(above_ ? INFINITY : threshold);
}

}  // namespace allocscope
