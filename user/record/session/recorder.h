// The recorder of `allocscope record`, in three files: its start-up and its
// end (recorder.cpp), its loop and what it writes (recorder_loop.cpp), and
// what it shows an observer while it runs (recorder_view.cpp). Internal to
// this layer: record.h is its interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "host/target.h"
#include "model/timeline.h"
#include "probe/bpf_session.h"
#include "probe/table_loader.h"
#include "record/discovery/filter_verdicts.h"
#include "record/discovery/library_discovery.h"
#include "record/events/event_sink.h"
#include "record/events/python_stacks.h"
#include "record/events/session_hooks.h"
#include "record/live_view.h"
#include "record/record.h"
#include "record/session/launch_plan.h"
#include "record/view/folds.h"
#include "record/view/recording_builder.h"
#include "record/view/summary.h"
#include "symbols/symbolizer.h"

namespace allocscope {

// What can be checked before the kernel is touched or a command launched:
// the processes named and the outputs' directories.
Result<void> check_before_recording(const RecordConfig& c);

// What exists once the BPF session is open, in the order it is made (and
// unmade in reverse): each part holds references to those above it.
struct SessionParts {
  SessionParts(const RecordConfig& c, InProcessUse use, std::unique_ptr<BpfSession> s, Profile& profile,
               Symbolizer& symbolizer, CgroupNames& cgroup_names)
      : session(std::move(s)),
        tables(*session, c.max_unwind_rows, c.verbose),
        verdicts(c, *session, cgroup_names),
        kernel(*session),
        unwind(tables, symbolizer, c.unwind == UnwindMode::Dwarf),
        libraries(c, use, *session, symbolizer),
        python(
            symbolizer,
            [session = session.get()](uint32_t dev, uint64_t ino, const as_py_layout& layout) {
              return session->add_python_file(dev, ino, layout).has_value();
            },
            [session = session.get()](pid_t pid, const as_py_process& process) {
              return session->add_python_process(uint32_t(pid), process).has_value();
            }),
        sink(profile, symbolizer, {verdicts, kernel, libraries, unwind}, c.max_stacks, c.per_process) {
    sink.use_python(&python);
    sink.use_cgroup_names(&cgroup_names);
  }

  std::unique_ptr<BpfSession> session;
  TableLoader tables;
  FilterVerdicts verdicts;
  BpfKernelState kernel;
  SessionUnwind unwind;
  LibraryDiscovery libraries;
  PythonStacks python;
  EventSink sink;
};

// Where a recording's loop ended, in CLOCK_MONOTONIC milliseconds.
struct LoopEnd {
  uint64_t start = 0, end = 0, interval_start = 0;
  unsigned interval = 0;     // numbered outputs written so far
  bool target_gone = false;  // every target exited (rather than a signal or --duration)
};

class Recorder final : public LiveView {
 public:
  // may_fall_back: a refusal to load BPF is not printed, and run() returns
  // kBpfRefused (before anything is launched) for the caller to record
  // without BPF.
  Recorder(const RecordConfig& c, RecordObserver* observer, bool may_fall_back = false)
      : config_(c),
        observer_(observer),
        may_fall_back_(may_fall_back),
        profile_(c.rate, c.max_stacks, c.max_live) {
    if (c.peak) profile_.keep_peak();
    if (!c.timeline.empty()) timeline_.emplace();
  }
  // Before the session goes: the observer must not wake it any more.
  ~Recorder() override {
    if (observer_) observer_->set_wake(nullptr);
  }
  static constexpr int kBpfRefused = -1;
  int run();

  // LiveView, for the observer.
  std::vector<ProcessTotals> processes() override;
  const ProcessTable& process_table() const override { return parts_->sink.processes(); }
  const std::string& cgroup_path(uint64_t id) override { return cgroup_names_.path_of(id); }
  size_t forget_removed_cgroups(uint64_t before_ms) override {
    return cgroup_names_.forget_removed(before_ms);
  }
  Baseline baseline(const InstanceSelector& keep) override;
  Recording snapshot(const InstanceSelector& keep, const Baseline* since) override;
  NamedCounters counters() override;
  std::pair<size_t, size_t> stack_table() const override {
    return {profile_.stacks().size(), config_.max_stacks};
  }
  std::vector<Folded> fold_ended(uint64_t ended_before_ms, const FoldGrouping& group,
                                 uint64_t window_ms) override;
  NamedCounters table_sizes() const override;
  HoldTimes hold_times() const override { return hold_figures(parts_->session->hold_times()); }

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
  void end_vanished(uint64_t now, bool drained = false);
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
  bool may_fall_back_ = false, bpf_refused_ = false;
  Profile profile_;
  Symbolizer symbolizer_;
  CgroupNames cgroup_names_;
  std::unique_ptr<SessionParts> parts_;
  uint64_t last_sweep_ms_ = 0, last_vanish_check_ms_ = 0;
  uint64_t held_too_long_ = 0;  // held processes continued by the bound, not by their file's settling
  uint64_t duty_windows_ = 0, duty_lost_ = 0;
  bool above_ = false;  // live bytes crossed --snapshot-above, and have not fallen back
  uint64_t snapshots_ = 0, snapshots_missed_ = 0;
  bool targets_ended_ = false;        // the last outputs are written after the traced programs ended
  std::optional<Timeline> timeline_;  // --timeline
  int64_t start_wall_ns_ = 0;
  LaunchPlan plan_;  // a launched command: how its processes are sampled
  Folds folds_{1 << 20};
};

}  // namespace allocscope
