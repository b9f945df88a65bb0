// A recording's counters (saved in the profile), the progress line's
// figures, and the summary printed at the end with its warnings.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/profile.h"
#include "probe/session/bpf_session.h"
#include "probe/tables/table_loader.h"
#include "record/discovery/filter_verdicts.h"
#include "record/events/event_sink.h"
#include "record/live_view.h"
#include "record/record.h"
#include "record/view/progress.h"

namespace allocscope {

class Runtimes;

using NamedCounters = std::vector<std::pair<std::string, uint64_t>>;

// What the source of the events counted: the kernel's session, or the
// preload library's rings in a recording without BPF.
struct SourceFigures {
  Counters counters{};
  std::vector<std::pair<uint32_t, uint64_t>> process_drops;  // samples lost per process (the busiest)
  HoldTimes holds;
  std::vector<std::pair<std::string, std::string>> paths;  // how it recorded: probes, unwinder, ...
  double trap_ns = 0;  // what a trap into an (emulated) probe costs here; 0 unknown or none
};
SourceFigures figures_of(const BpfSession& session);

// Where the figures come from.
struct RecordingState {
  SourceFigures session;
  const Profile& profile;
  const EventSink& sink;
  const TableLoader& tables;
  uint64_t libraries_missed = 0;
  uint64_t verdicts_refused = 0;   // process verdicts the full kernel table refused
  uint64_t without_allocator = 0;  // static programs run with no allocator allocscope knows
  std::vector<std::string> without_allocator_names;
  std::vector<std::string> missed_names;         // the first files not probed, each with its reason
  uint64_t held_too_long = 0;                    // held processes continued by the bound on the wait
  std::vector<std::string> held_too_long_names;  // the first of them, "PID (comm)"
  uint64_t live_swept = 0;                       // exact mode: ended programs' live entries deleted
  RejectedLoss rejected_loss;                    // ring buffer losses of processes the filter then rejected
  std::string sampling;                          // a launched command: how its processes were sampled
  const Runtimes* runtimes = nullptr;            // language runtimes: their frames walked, read, refused
  uint64_t ring_frees_lost = 0;                  // of dropped_frees, those lost in their process's ring
};

HoldTimes hold_figures(const RecentDurations& holds);

// Every counter, by the name it has in the saved profile.
NamedCounters recording_counters(const RecordingState& s);
ProgressFigures progress_figures(const RecordingState& s, double elapsed_s);
// Totals, drops (and the processes that lost the most), and what to raise.
void print_summary(const RecordingState& s, const RecordConfig& config, uint64_t elapsed_ms);
// --peak's high point and --snapshot-above's files (start_ms: CLOCK_MONOTONIC).
void print_live_peaks(const RecordingState& s, const RecordConfig& config, uint64_t start_ms,
                      uint64_t snapshots, uint64_t missed);

}  // namespace allocscope
