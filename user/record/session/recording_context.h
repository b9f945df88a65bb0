// What every job of a BPF recording shares: its settings, the profile and
// its symbols, and, once the kernel's session is open, the parts that feed
// them. The Recorder runs the recording (recorder.cpp, recorder_loop.cpp),
// the RecorderView shows it to an observer while it runs (recorder_view.h),
// and recording_outputs.cpp writes it; each holds this context.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "host/answered_channel.h"
#include "model/profile.h"
#include "model/timeline.h"
#include "probe/session/bpf_session.h"
#include "probe/tables/table_loader.h"
#include "record/discovery/filter_verdicts.h"
#include "record/discovery/injections.h"
#include "record/discovery/library_discovery.h"
#include "record/events/agent_records.h"
#include "record/events/event_sink.h"
#include "record/events/ring_frees.h"
#include "record/events/session_hooks.h"
#include "record/record.h"
#include "record/session/launch_plan.h"
#include "record/view/folds.h"
#include "record/view/recording_builder.h"
#include "record/view/summary.h"
#include "runtime/registry.h"
#include "symbols/symbolizer.h"

namespace allocscope {

// The recording's choices the language runtimes follow.
RuntimeSettings runtime_settings(const RecordConfig& c);

// What exists once the BPF session is open, in the order it is made (and
// unmade in reverse): each part holds references to those above it.
struct SessionParts {
  SessionParts(const RecordConfig& c, InProcessUse use, std::unique_ptr<BpfSession> s, Profile& profile,
               Symbolizer& symbolizer, CgroupNames& cgroup_names)
      : session(std::move(s)),
        tables(*session, c.max_unwind_rows, c.verbose, runtime_tables_readers()),
        verdicts(c, *session, cgroup_names),
        kernel(*session),
        unwind(tables, symbolizer, c.unwind == UnwindMode::Dwarf),
        runtimes({symbolizer, session.get(), runtime_settings(c)}),
        libraries(c, use, *session, symbolizer, runtimes),
        injections(c, runtimes),
        sink(profile, symbolizer, {verdicts, kernel, libraries, unwind}, c.max_stacks, c.per_process) {
    sink.use_runtimes(&runtimes);
    sink.use_cgroup_names(&cgroup_names);
  }

  std::unique_ptr<BpfSession> session;
  TableLoader tables;
  FilterVerdicts verdicts;
  BpfKernelState kernel;
  SessionUnwind unwind;
  Runtimes runtimes;
  LibraryDiscovery libraries;
  Injections injections;
  EventSink sink;
};

// What the loop did that the counters and the summary report.
struct LoopTallies {
  uint64_t held_too_long = 0;  // held processes continued by the bound, not by their file's settling
  std::vector<std::string> held_too_long_names;  // the first of them: "PID (comm)"
  uint64_t live_swept = 0;  // exact mode: live entries of ended programs the kernel deleted
  uint64_t duty_windows = 0, duty_lost = 0;
};

struct RecordingContext {
  explicit RecordingContext(const RecordConfig& c) : config(c), profile(c.rate, c.max_stacks, c.max_live) {
    if (c.peak) profile.keep_peak();
    if (!c.timeline.empty()) timeline.emplace();
  }

  // A launched command: how its processes were sampled, as far as they ended.
  std::string sampling() const;
  // The figures the summary, the progress line and the counters read.
  RecordingState state() const;
  // Exact mode: the kernel's totals, as of now, and (for outputs) the ages
  // of the blocks still live, which takes a read of the whole live map.
  void absorb_exact(bool with_ages = true);
  // Exact mode: the kernel deletes the live entries ended processes left
  // (sweep_live), if there are any.
  void sweep_stale_live();
  NamedCounters counters();
  RecordingMeta meta(uint64_t duration_ms);

  // A launched command sampled in process: the frees of its sampled blocks
  // come through the rings of a channel (ring_frees.h) rather than traps.
  Result<void> open_free_channel();
  // An event of the kernel's, to the sink after the ring frees it follows;
  // false: stop delivering (the sink's word, or an event kept for the next
  // pass).
  bool take_event(Event event);
  // Waits up to timeout_ms for the kernel's events, then delivers them,
  // the rings' frees among them; returns how many events the kernel sent.
  // `last`: the probes are gone, every event goes (none is kept for later).
  Result<int> deliver_events(int timeout_ms, bool last = false);
  // Every event the kernel placed before now delivered (one still being
  // written waited for, `max_wait_ms` at most): what an observer reads
  // next includes all that happened before it asked.
  Result<void> catch_up(uint64_t max_wait_ms);
  // The rings' frees read (into ring_frees); returns the time before which
  // every free was read (`now`, or earlier).
  uint64_t read_ring_frees(uint64_t now);
  // The recording ends, its probes gone and the kernel's events read: the
  // frees left in the rings go to the sink, and the channel closes.
  void flush_ring_frees();
  // The channel's figures, open or closed; none without one.
  std::optional<PreloadChannel::Counts> ring_counts() const;

  const RecordConfig& config;
  Profile profile;
  Symbolizer symbolizer{runtime_tables_readers()};
  CgroupNames cgroup_names;
  std::unique_ptr<SessionParts> parts;  // once the session is open
  LaunchPlan plan;                      // a launched command: how its processes are sampled
  std::optional<Timeline> timeline;     // --timeline
  Folds folds{1 << 20};                 // ended processes' stacks, folded for an observer
  LoopTallies tallies;
  int64_t start_wall_ns = 0;                         // of the recording, or of its current --interval
  const uint64_t recording_id = new_recording_id();  // in each of its profiles
  bool targets_ended = false;  // the last outputs are written after the traced programs ended
  std::unique_ptr<AnsweredChannel> free_channel;              // open_free_channel's, until flush_ring_frees
  std::optional<PreloadChannel::Counts> free_channel_counts;  // its figures once closed
  RingFrees ring_frees;
  // The records of runtimes' agents in the rings (the JVM's sampled objects).
  AgentRecords agent_records{config.rate};
  const std::string& agent_comm(uint32_t tgid);
  std::unordered_map<uint32_t, std::string> agent_comms_;  // this pass's
  // The rings' frees to the sink: made once, not per event.
  const RingFrees::Emit to_sink = [this](Event e) { parts->sink.take(std::move(e)); };
};

// The outputs (recording_outputs.cpp): the profile's (numbered with
// --interval), --peak's in-use profile at its highest, and --timeline's chart.
Result<void> write_outputs(RecordingContext& r, unsigned number, uint64_t duration_ms);
Result<void> write_peak(RecordingContext& r, uint64_t start_ms);
Result<void> write_timeline(RecordingContext& r, uint64_t duration_ms);

}  // namespace allocscope
