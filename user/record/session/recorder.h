// The recorder of `allocscope record` with BPF: it opens the session,
// attaches to or launches the targets and ends the recording (recorder.cpp),
// and runs its loop (recorder_loop.cpp). What it records is its context
// (recording_context.h), which its view shows an observer and
// recording_outputs.cpp writes. Internal to this layer: record.h is its
// interface.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "host/target.h"
#include "record/record.h"
#include "record/session/recorder_view.h"
#include "record/session/recording_context.h"

namespace allocscope {

// What can be checked before the kernel is touched or a command launched:
// the processes named and the outputs' directories.
// The default outputs an earlier run left are set aside (`set_aside`
// receives their paths).
Result<void> check_before_recording(const RecordConfig& c, std::vector<std::string>& set_aside);
// Ended by `sig` before the recording began: says so, puts back what was
// set aside (nothing was written) and returns the shell's status for it.
int stopped_before_start(int sig, const std::vector<std::string>& set_aside);
// A run that ends before writing anything puts back what it set aside.
void put_back_set_aside(const std::vector<std::string>& set_aside);
// The line for a launched command that outlives its recording (it was
// passed `sig`, or --duration ended) while allocscope waits for it.
std::function<void()> say_still_running(const Target& target, int sig, bool quiet);

// Where a recording's loop ended, in CLOCK_MONOTONIC milliseconds.
struct LoopEnd {
  uint64_t start = 0, end = 0, interval_start = 0;
  unsigned interval = 0;     // numbered outputs written so far
  bool target_gone = false;  // every target exited (rather than a signal or --duration)
};

class Recorder final {
 public:
  // may_fall_back: a refusal to load BPF is not printed, and run() returns
  // kBpfRefused (before anything is launched) for the caller to record
  // without BPF.
  Recorder(const RecordConfig& c, RecordObserver* observer, bool may_fall_back = false)
      : config_(c), observer_(observer), may_fall_back_(may_fall_back), r_(c), view_(r_) {}
  // Before the session goes: the observer must not wake it any more.
  ~Recorder() {
    if (observer_) observer_->set_wake(nullptr);
  }
  static constexpr int kBpfRefused = -1;
  int run();
  // The earlier default outputs it set aside (now .old): after kBpfRefused,
  // the run without BPF takes them over.
  const std::vector<std::string>& set_aside() const { return set_aside_; }

 private:
  Result<void> open_session();
  Result<std::vector<Target>> make_targets();
  Result<void> prepare(std::vector<Target>& targets);
  void prepare_tables(const std::vector<Target>& targets, const std::vector<std::string>& launched);
  InProcessUse in_process_use() const;
  bool frees_through_rings() const;
  bool enter(pid_t pid);
  Result<void> enter_descendants();
  // Under system-wide probes (busy_entries.cpp): busy processes entered,
  // and the probes taken out of those entered. Once a second; then too the
  // library copies of entered processes that ended are let go, and the Go
  // rates set at exec checked.
  void enter_busy(uint64_t now);
  void enter_running(pid_t pid);
  // `traced`: a thread of it held now (an entry's). Whether the probes
  // could be looked for and written back.
  bool lift_probes(pid_t pid, pid_t traced = 0);
  void announce(std::vector<Target>& targets);
  Result<LoopEnd> loop(std::vector<Target>& targets);
  void sweep_exact_live(uint64_t now);
  void drain_events();
  void end_vanished(uint64_t now, bool drained = false);
  void duty_step(uint64_t elapsed_ms);
  void note_held_too_long(const std::vector<uint32_t>& pids);
  void watch_live(uint64_t start_ms);
  int finish(std::vector<Target>& targets, const LoopEnd& loop);

  const RecordConfig& config_;
  RecordObserver* observer_;
  bool may_fall_back_ = false, bpf_refused_ = false;
  std::vector<std::string> set_aside_;  // default outputs of an earlier run, now .old
  RecordingContext r_;
  RecorderView view_;
  uint64_t last_sweep_ms_ = 0, last_vanish_check_ms_ = 0, last_busy_ms_ = 0;
  size_t files_lifted_ = 0;  // allocator files probed system-wide when entered processes were last lifted
  BusyStreaks busy_;
  bool above_ = false;  // live bytes crossed --snapshot-above, and have not fallen back
  uint64_t snapshots_ = 0, snapshots_missed_ = 0;
};

}  // namespace allocscope
