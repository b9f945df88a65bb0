// The orchestrator of `allocscope record`: opens the session, attaches to or
// launches the targets, polls until the end (writing numbered outputs every
// --interval), then writes the outputs and the summary.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "host/process.h"
#include "host/target.h"
#include "model/timeline.h"
#include "output/outputs.h"
#include "output/timeline.h"
#include "probe/bpf_session.h"
#include "probe/table_loader.h"
#include "record/clocks.h"
#include "record/event_sink.h"
#include "record/launch_plan.h"
#include "record/library_discovery.h"
#include "record/messages.h"
#include "record/output_writer.h"
#include "record/process_filter.h"
#include "record/progress.h"
#include "record/record.h"
#include "record/scope.h"
#include "record/session_hooks.h"
#include "record/stop_signals.h"
#include "record/summary.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

// --all records processes nobody named: none of them may take more than a
// quarter of the live table from the others. Named processes (-p, -- CMD)
// are what the user asked for and share it freely.
uint32_t live_share(const RecordConfig& c) {
  if (c.max_live_per_process) return *c.max_live_per_process;
  return members_only(c) ? 0 : std::max<uint32_t>(1, c.max_live / 4);
}

SessionConfig session_config(const RecordConfig& c) {
  return {.rate = c.rate,
          .max_live = c.max_live,
          .live_share = live_share(c),
          .ringbuf_bytes = c.ringbuf_bytes,
          .mode = c.probe_mode,
          .null_probes = c.null_probes,
          .no_free = c.no_free,
          .unwind_tables = c.unwind == UnwindMode::Dwarf,
          .max_stacks = c.max_stacks,
          .verbose = c.verbose,
          .filter_processes = system_wide(c),
          .trace_unknown = !members_only(c),
          .follow_children = follows_children(c),
          .max_processes = c.max_processes,
          .pausable = c.duty_period_ms > 0,
          .hold_new_files = c.hold_new_files && system_wide(c),
          .judge_names = system_wide(c) && !members_only(c) && (!c.comm.empty() || !c.unit.empty()),
          .judge_cgroups = !c.unit.empty()};
}

// What exists once the BPF session is open, in the order it is made (and
// unmade in reverse): each part holds references to those above it.
struct SessionParts {
  SessionParts(const RecordConfig& c, InProcessUse use, std::unique_ptr<BpfSession> s, Profile& profile,
               Symbolizer& symbolizer)
      : session(std::move(s)),
        tables(*session, c.max_unwind_rows, c.verbose),
        verdicts(c, *session),
        kernel(*session),
        unwind(tables, symbolizer, c.unwind == UnwindMode::Dwarf),
        libraries(c, use, *session, symbolizer),
        sink(profile, symbolizer, {verdicts, kernel, libraries, unwind}, c.max_stacks, c.per_process) {}

  std::unique_ptr<BpfSession> session;
  TableLoader tables;
  ProcessFilter verdicts;
  SessionState kernel;
  SessionUnwind unwind;
  LibraryDiscovery libraries;
  EventSink sink;
};

// Where a recording's loop ended, in CLOCK_MONOTONIC milliseconds.
// The longest a process that maps a new file is held (its event lost or
// behind a backlog): then it runs on, and may be probed late.
constexpr uint64_t kMaxHoldNs = 1'000'000'000;
// The longest for one whose tables are being built: that wait makes progress
// (a large program's table takes a second on a loaded machine, and a queue of
// new C libraries adds up), and running on early would cut its stacks short.
constexpr uint64_t kMaxBuildHoldNs = 10'000'000'000;

struct LoopEnd {
  uint64_t start = 0, end = 0, interval_start = 0;
  unsigned interval = 0;     // numbered outputs written so far
  bool target_gone = false;  // every target exited (rather than a signal or --duration)
};

class Recorder final : public LiveView {
 public:
  Recorder(const RecordConfig& c, RecordObserver* observer)
      : config_(c), observer_(observer), profile_(c.rate, c.max_stacks, c.max_live) {
    if (c.peak) profile_.keep_peak();
    if (!c.timeline.empty()) timeline_.emplace();
  }
  // Before the session goes: the observer must not wake it any more.
  ~Recorder() override {
    if (observer_) observer_->set_wake(nullptr);
  }
  int run();

  // LiveView, for the observer.
  std::vector<ProcessTotals> processes() override;
  const ProcessTable& process_table() const override { return parts_->sink.processes(); }
  Baseline baseline(const InstanceSelector& keep) override;
  Recording snapshot(const InstanceSelector& keep, const Baseline* since) override;
  NamedCounters counters() override;
  std::pair<size_t, size_t> stack_table() const override {
    return {profile_.stacks().size(), config_.max_stacks};
  }
  std::vector<ProcessTotals> forget_ended() override;
  NamedCounters table_sizes() const override;

 private:
  Result<void> open_session();
  Result<std::vector<Target>> make_targets();
  Result<void> prepare(std::vector<Target>& targets);
  void prepare_tables(const std::vector<Target>& targets, const std::vector<std::string>& launched);
  InProcessUse in_process_use() const;
  std::string sampling() const;
  void announce(std::vector<Target>& targets);
  Result<LoopEnd> loop(std::vector<Target>& targets);
  void sweep_exact_live(uint64_t now);
  void duty_step(uint64_t elapsed_ms);
  RecordingState state() const;
  void absorb_exact(bool with_ages = true);
  RecordingMeta meta(uint64_t duration_ms);
  std::vector<uint32_t> stacks_of(const InstanceSelector& keep) const;
  Result<void> write(unsigned number, uint64_t duration_ms);
  void watch_live(uint64_t start_ms);
  Result<void> write_peak(uint64_t start_ms);
  Result<void> write_timeline(uint64_t duration_ms);
  int finish(std::vector<Target>& targets, const LoopEnd& loop);

  const RecordConfig& config_;
  RecordObserver* observer_;
  Profile profile_;
  Symbolizer symbolizer_;
  std::unique_ptr<SessionParts> parts_;
  uint64_t last_sweep_ms_ = 0;
  uint64_t held_too_long_ = 0;  // held processes continued by the bound, not by their file's settling
  uint64_t duty_windows_ = 0, duty_lost_ = 0;
  bool above_ = false;  // live bytes crossed --snapshot-above, and have not fallen back
  uint64_t snapshots_ = 0, snapshots_missed_ = 0;
  std::optional<Timeline> timeline_;  // --timeline
  int64_t start_wall_ns_ = 0;
  LaunchPlan plan_;  // a launched command: how its processes are sampled
};

Result<void> Recorder::open_session() {
  SessionConfig sc = session_config(config_);
  if (!config_.cgroup.empty()) {
    auto cg = find_cgroup(config_.cgroup);
    if (!cg) return fail(cg.error());
    sc.cgroup_id = cg->id;
    sc.cgroup_level = cg->level;
  }
  // Events arrive only from poll(), once the parts below are made.
  auto session = BpfSession::open(sc, [this](std::span<const uint8_t> data) { return parts_->sink(data); });
  if (!session) return fail(session.error());
  parts_ =
      std::make_unique<SessionParts>(config_, in_process_use(), std::move(*session), profile_, symbolizer_);
  // allocscope's own allocations are never sampled (system-wide probes see them).
  return parts_->session->set_verdict(uint32_t(getpid()), AS_PROC_IGNORED);
}

Result<std::vector<Target>> Recorder::make_targets() {
  std::vector<Target> targets;
  if (!config_.command.empty()) {
    auto t = Target::launch(launch_command(plan_, config_.command), launch_environment(plan_, config_.rate));
    if (!t) return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (pid_t pid : config_.pids) {
    auto t = Target::attach(pid);
    if (!t) return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (Target& t : targets)
    if (auto ok = parts_->verdicts.add_root(uint32_t(t.pid())); !ok) return fail(ok.error());
  // Children forked before recording began: followed too (new ones are
  // marked by the kernel at fork).
  if (follows_children(config_) && !config_.pids.empty())
    for (pid_t child : descendants_of(config_.pids))
      if (auto ok = parts_->verdicts.follow(uint32_t(child)); !ok) return fail(ok.error());
  return targets;
}

// The session, the targets, their allocators probed and unwind tables loaded.
// What can be checked before the kernel is touched: the processes named and
// the outputs' directories. A bad pid or an unwritable output fails at once,
// not after BPF is loaded, nor (an output) after a long recording.
Result<void> check_before_attach(const RecordConfig& c) {
  for (pid_t pid : c.pids)
    if (pid <= 0 || !process_exists(pid)) return fail("no such process: " + std::to_string(pid), ESRCH);
  std::vector<std::string> paths;
  for (const OutputSpec& o : c.outputs) paths.push_back(o.path);
  if (!c.timeline.empty()) paths.push_back(c.timeline);
  for (const std::string& path : paths) {
    if (path == "-") continue;
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (access(dir.c_str(), W_OK | X_OK) != 0) return fail_errno("write " + path, errno);
  }
  return {};
}

Result<void> Recorder::prepare(std::vector<Target>& targets) {
  if (auto ok = check_before_attach(config_); !ok) return ok;
  if (!config_.command.empty()) {
    auto plan = plan_launch(config_);
    if (!plan) return fail(plan.error());
    plan_ = std::move(*plan);
  }
  if (auto ok = open_session(); !ok) return ok;
  if (observer_) observer_->set_wake([session = parts_->session.get()] { session->wake(); });
  auto made = make_targets();
  if (!made) return fail(made.error());
  targets = std::move(*made);
  if (config_.all)
    if (auto ok = parts_->libraries.attach_every_process(); !ok) return ok;
  // The launched command's files (found by running the loader): probed
  // before it runs.
  for (Target& t : targets) {
    if (t.launched()) parts_->libraries.attach_paths(t.pid(), plan_.files, plan_.root_in_process);
    // The preload library is not mapped before exec: its path alone tells.
    if (t.launched() && plan_.in_process) {
      if (!parts_->libraries.in_process_probed())
        return fail("the preload library's probes could not be attached (" + plan_.preload_library + ")");
      continue;
    }
    if (auto ok = parts_->libraries.attach_process(t.pid()); !ok) return ok;
  }
  if (config_.unwind == UnwindMode::Dwarf) prepare_tables(targets, plan_.files);
  return {};
}

// Unwind tables of what the targets run, built before recording begins:
// samples taken before a file's table is in cannot be unwound past it.
void Recorder::prepare_tables(const std::vector<Target>& targets, const std::vector<std::string>& launched) {
  for (const Target& t : targets)
    if (t.launched())
      parts_->tables.load_paths(launched);
    else
      parts_->tables.load_process(t.pid());
}

InProcessUse Recorder::in_process_use() const {
  if (!plan_.in_process) return InProcessUse::Alongside;
  return plan_.probes ? InProcessUse::Preferred : InProcessUse::Only;
}

// A launched command: how its processes were sampled, as far as they ended.
std::string Recorder::sampling() const {
  if (config_.command.empty() || !parts_) return "";
  const ProcessTable& table = parts_->sink.processes();
  return describe_sampling(plan_, table.ended_in_process(), table.ended_through_probes());
}

void Recorder::announce(std::vector<Target>& targets) {
  std::string names;
  for (Target& t : targets) {
    symbolizer_.track(t.pid());  // after exec: the command's maps
    names += (names.empty() ? "" : ", ") + std::to_string(t.pid()) + " (" + read_comm(t.pid()) + ")";
  }
  if (config_.quiet) return;
  if (config_.all && targets.empty()) {
    size_t n = parts_->libraries.libraries_probed();
    std::fprintf(stderr, "allocscope: recording every process (%zu allocator file%s); Ctrl-C to stop\n", n,
                 n == 1 ? "" : "s");
  } else {
    std::fprintf(stderr, "allocscope: recording process%s %s%s; Ctrl-C to stop\n",
                 targets.size() > 1 ? "es" : "", names.c_str(),
                 follows_children(config_) ? " and its descendants" : "");
  }
}

Result<LoopEnd> Recorder::loop(std::vector<Target>& targets) {
  start_wall_ns_ = wall_ns();
  LoopEnd l;
  l.start = l.interval_start = now_ms();
  ProgressReporter progress(!config_.quiet);
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
    parts_->tables.collect();  // tables built meanwhile: in, and their held processes continued
    watch_live(l.start);
    if (parts_->libraries.has_pending()) parts_->libraries.retry_pending(now_ms());
    // A held process whose event was lost, or waits behind a backlog, goes on.
    uint64_t mono = monotonic_ns();
    held_too_long_ += parts_->session->release_held_before(
        mono - kMaxHoldNs, parts_->tables.waiting_processes(), mono - kMaxBuildHoldNs);
    sweep_exact_live(now_ms());
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
// then (finding them means reading the whole live map).
void Recorder::sweep_exact_live(uint64_t now) {
  if (!exact_mode(config_) || !parts_->sink.has_stale_live() || now - last_sweep_ms_ < 1000) return;
  last_sweep_ms_ = now;
  auto live = parts_->session->live_entries();
  parts_->session->forget_live(parts_->sink.stale_live(live));
  parts_->sink.forget_stale_ids();
}

RecordingState Recorder::state() const {
  return {*parts_->session,
          profile_,
          parts_->sink,
          parts_->tables,
          parts_->libraries.libraries_missed(),
          parts_->verdicts.verdicts_refused(),
          parts_->libraries.without_allocator(),
          parts_->libraries.without_allocator_names(),
          parts_->libraries.missed_names(),
          held_too_long_,
          parts_->verdicts.rejected_loss(),
          sampling()};
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
  return {config_.rate,   start_wall_ns_,  int64_t(duration_ms) * 1000000, config_.metric, counters(),
          monotonic_ns(), std::move(paths)};
}

Result<void> Recorder::write(unsigned number, uint64_t duration_ms) {
  if (config_.outputs.empty()) return {};
  absorb_exact();
  return write_record_outputs(
      saved_recording(profile_, symbolizer_, meta(duration_ms), parts_->sink.origins()), config_, number);
}

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
          {"open_binaries", symbolizer_.modules()}};
}

std::vector<ProcessTotals> Recorder::forget_ended() {
  if (exact_mode(config_)) return {};
  std::vector<ProcessTotals> ended = processes();
  std::erase_if(ended, [](const ProcessTotals& p) { return !p.process.ended; });
  if (ended.empty()) return ended;
  const ProcessTable& table = parts_->sink.processes();
  parts_->sink.forget_stacks(
      profile_.forget([&](const StackRecord& s) { return table.instance(s.pid).ended; }));
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

// Detaches, reads what is left, writes the outputs and the summary; returns
// the exit status.
int Recorder::finish(std::vector<Target>& targets, const LoopEnd& l) {
  bool launched = !targets.empty() && targets.front().launched();
  parts_->session->detach();
  while (parts_->session->poll(0).value_or(0) > 0) {
  }
  // The observer is shown the final state, probes gone, before it stops.
  if (observer_) {
    observer_->on_tick(*this);
    observer_->on_stop();
  }
  if (!config_.quiet && l.target_gone && !launched)
    std::fprintf(stderr, "allocscope: the traced processes exited; inuse shows what they held at exit\n");
  auto written = write(config_.interval_ms ? l.interval + 1 : 0, l.end - l.interval_start);
  if (!written) print_error(written.error());
  auto peak = write_peak(l.start);
  if (!peak) print_error(peak.error());
  auto chart = write_timeline(l.end - l.start);
  if (!chart) print_error(chart.error());
  if (!config_.quiet) {
    print_summary(state(), config_, l.end - l.start);
    print_live_peaks(state(), config_, l.start, snapshots_, snapshots_missed_);
  }
  // A signal is passed on to a launched command; after --duration it runs on
  // untraced and allocscope waits for it.
  int status = launched ? targets.front().finish(l.target_gone ? 0 : stop_signal()) : 0;
  if (!written || !peak || !chart) return 1;
  return status;
}

int Recorder::run() {
  std::vector<Target> targets;
  if (auto ok = prepare(targets); !ok) {
    print_error(ok.error());
    return 1;
  }
  install_stop_handlers(config_.hangup_stops);
  if (!targets.empty() && targets.front().launched()) {
    if (auto ok = targets.front().start(); !ok) {
      print_error(ok.error());
      return 127;
    }
  }
  announce(targets);
  auto ended = loop(targets);
  if (!ended) {
    print_error(ended.error());
    return 1;
  }
  return finish(targets, *ended);
}

}  // namespace

int record(const RecordConfig& config, RecordObserver* observer) { return Recorder(config, observer).run(); }

}  // namespace allocscope
