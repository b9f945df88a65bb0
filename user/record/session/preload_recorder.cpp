#include "record/session/preload_recorder.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "abi/preload/channel.h"
#include "abi/preload/trial_record.h"
#include "base/clocks.h"
#include "base/units.h"
#include "host/preload_channel.h"
#include "host/process.h"
#include "host/target.h"
#include "model/profile.h"
#include "model/recording.h"
#include "output/text_format.h"
#include "probe/tables/table_host.h"
#include "probe/tables/table_loader.h"
#include "record/events/event_sink.h"
#include "record/events/preload_events.h"
#include "record/events/session_hooks.h"
#include "record/events/untraced_processes.h"
#include "record/messages.h"
#include "record/session/launch_plan.h"
#include "record/session/recorder.h"
#include "record/session/stop_signals.h"
#include "record/view/output_writer.h"
#include "record/view/progress.h"
#include "record/view/summary.h"
#include "runtime/registry.h"
#include "symbols/elf_file.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

// No kernel holds samples, files or held processes.
struct NoKernelState final : KernelState {
  void forget_live(uint32_t, std::span<const uint64_t>) override {}
  std::vector<ExactEntry> exact_totals(std::span<const uint64_t>) override { return {}; }
  void forget_exact(std::span<const uint64_t>) override {}
  void release_held(uint32_t, uint64_t) override {}
  void forget_file(uint32_t, uint64_t) override {}
};

// No allocator is probed: the preload library interposes them all.
struct NoProbes final : LibraryWatch {
  void new_library(const as_proc_event&) override {}
  void on_exec(uint32_t) override {}
  uint64_t allocator_address(uint32_t, int) override { return 0; }
};

// Every process of the launched tree is recorded; the command's own keeps
// at its exit what it never freed (as a root does on the kernel's path).
struct LaunchedTreeVerdicts final : ProcessVerdicts {
  uint32_t root = 0;
  bool accept(uint32_t, const std::string&, uint64_t) override { return true; }
  void reject(uint32_t) override {}
  void unreject(uint32_t, bool) override {}
  bool keeps_live_at_exit(uint32_t tgid) const override { return tgid == root; }
};

// A ring per process: records of up to 32 KiB of stack each, read every few
// milliseconds. Never above what --ringbuf-bytes allows the kernel's.
uint64_t ring_bytes(const RecordConfig& c) {
  constexpr uint64_t kDefault = 8 << 20;
  return std::max<uint64_t>(1 << 20, std::bit_floor(std::min<uint64_t>(kDefault, c.ringbuf_bytes)));
}

constexpr int kPollMs = 10;  // the rings do not wake poll(): read this often

class PreloadRecorder {
 public:
  PreloadRecorder(const RecordConfig& c, std::string why, std::vector<std::string> set_aside)
      : config_(c),
        why_(std::move(why)),
        profile_(c.rate, c.max_stacks, c.max_live),
        events_(c.rate),
        set_aside_(std::move(set_aside)) {}
  int run();

 private:
  struct LoopEnd {
    uint64_t start = 0, end = 0;
    bool target_gone = false;
  };
  Result<void> prepare();
  LoopEnd loop();
  void read_rings(bool final = false);
  SourceFigures figures() const;
  RecordingState state() const;
  RecordingMeta meta(uint64_t duration_ms);
  int finish(const LoopEnd& l);
  void print_losses() const;

  const RecordConfig& config_;
  std::string why_;
  LaunchPlan plan_;
  std::optional<PreloadChannel> channel_;
  Profile profile_;
  Symbolizer symbolizer_{runtime_tables_readers()};
  UserspaceTableHost host_;
  TableLoader tables_{host_, config_.max_unwind_rows, config_.verbose};
  LaunchedTreeVerdicts verdicts_;
  NoKernelState kernel_;
  NoProbes probes_;
  SessionUnwind unwind_{tables_, symbolizer_, true};
  EventSink sink_{
      profile_, symbolizer_, {verdicts_, kernel_, probes_, unwind_}, config_.max_stacks, config_.per_process};
  PreloadEvents events_;
  UntracedProcesses untraced_;
  std::vector<std::string> set_aside_;  // default outputs of an earlier run, now .old
  std::optional<Target> target_;
  int64_t start_wall_ns_ = 0;
  const uint64_t recording_id_ = new_recording_id();  // in each of its profiles
  bool targets_ended_ = false;
  // The runtimes told of each process with a ring: without BPF, Go's heap
  // is not read, and said so.
  Runtimes runtimes_{RuntimeServices{symbolizer_}};
};

Result<void> PreloadRecorder::prepare() {
  if (auto ok = check_before_recording(config_, set_aside_); !ok) return ok;
  auto plan = plan_launch_in_process_only(config_);
  if (!plan) return fail(plan.error());
  plan_ = std::move(*plan);
  auto channel = PreloadChannel::open(ring_bytes(config_));
  if (!channel) return fail(channel.error());
  channel_.emplace(std::move(*channel));
  std::vector<std::string> env = launch_environment(plan_, config_.rate);
  env.push_back(std::string(AS_CHANNEL_ENV) + "=" + channel_->socket_path());
  if (config_.no_java_heap) env.push_back(std::string(AS_NO_JAVA_AGENT_ENV) + "=1");
  auto t = Target::launch(launch_command(plan_, config_.command), env);
  if (!t) return fail(t.error());
  target_.emplace(std::move(*t));
  verdicts_.root = uint32_t(target_->pid());
  sink_.exact_as_samples();
  sink_.use_runtimes(&runtimes_);  // what they say of the stacks
  sink_.one_shot_stacks_from(PreloadEvents::kFirstStack);
  // Tables of what the command runs, built before it does: its first
  // stacks are walked without waiting.
  if (config_.unwind == UnwindMode::Dwarf) tables_.load_paths(plan_.files);
  return {};
}

// Reads every ring. A process that connects (a program starting: the
// command, or one its tree runs) is told to the sink as an exec, after every
// record its earlier program wrote, while it waits for its ring: its
// mappings are read then, and its files' tables begin to build. Processes
// found gone before the rings were read end after them.
void PreloadRecorder::read_rings(bool final) {
  std::vector<uint32_t> gone;
  for (auto [tgid, id] : sink_.processes().running_instances())
    if (!process_exists(pid_t(tgid)) || (tgid == verdicts_.root && target_->exited())) gone.push_back(tgid);
  auto to_sink = [this](Event e) { sink_.take(std::move(e)); };
  auto feed = [&](const PreloadChannel::RingId& ring, uint32_t tgid, std::span<const uint8_t> record) {
    // A forked child (it says so at fork; or, that record lost, at its first
    // record once gone) runs its parent's code, mapped where the parent's is.
    uint32_t kind = 0;
    if (record.size() >= sizeof kind) std::memcpy(&kind, record.data(), sizeof kind);
    bool announced = kind == AS_TRIAL_FORK;
    if (tgid != uint32_t(ring.owner) &&
        (announced || (!sink_.processes().find(tgid) && !process_exists(pid_t(tgid))))) {
      symbolizer_.add_mappings(pid_t(tgid), symbolizer_.maps(ring.owner));
      events_.forked_and_gone(tgid, uint32_t(ring.owner), ring.number);
    }
    events_.translate(tgid, ring.number, record, to_sink);
  };
  channel_->drain(feed);
  channel_->accept_waiting([&](const PreloadChannel::RingId& ring) {
    channel_->drain(feed, SIZE_MAX);  // what its earlier program wrote comes first
    events_.connected(uint32_t(ring.owner), ring.number, to_sink);
    runtimes_.on_process(pid_t(ring.owner));
    if (config_.unwind == UnwindMode::Dwarf) unwind_.prepare_process(uint32_t(ring.owner), [] {});
  });
  channel_->drain(feed, final ? SIZE_MAX : PreloadChannel::kMaxPerPass);
  // A ring stopped at a record still being written may hold more of theirs:
  // their exits wait (but not past the end).
  if (channel_->drained_all() || final)
    for (uint32_t tgid : gone) events_.exited(tgid, to_sink);
  bool tables_in = tables_.collect() > 0;
  sink_.retry_waiting(monotonic_ns(), tables_in);
}

PreloadRecorder::LoopEnd PreloadRecorder::loop() {
  start_wall_ns_ = wall_ns();
  LoopEnd l;
  l.start = now_ms();
  ProgressReporter progress(!config_.quiet);
  while (!stop_signal()) {
    uint64_t now = now_ms();
    if (config_.duration_ms && now - l.start >= config_.duration_ms) break;
    pollfd fds[2] = {{channel_->fd(), POLLIN, 0}, {target_->exit_fd(), POLLIN, 0}};
    poll(fds, target_->exit_fd() >= 0 ? 2 : 1, kPollMs);
    read_rings();
    untraced_.look(target_->pid(), plan_.preload_library, now_ms());
    channel_->release_finished(now_ms());
    if (double elapsed = (now_ms() - l.start) / 1000.0; progress.due(elapsed))
      progress.update(progress_figures(state(), elapsed));
    if (target_->exited()) {
      l.target_gone = true;
      break;
    }
  }
  progress.finish();
  l.end = now_ms();
  return l;
}

SourceFigures PreloadRecorder::figures() const {
  SourceFigures f;
  PreloadChannel::Counts c = channel_ ? channel_->counts() : PreloadChannel::Counts{};
  f.counters[AS_CNT_SAMPLES] = events_.trials();
  f.counters[AS_CNT_FREES] = events_.frees();
  f.counters[AS_CNT_RINGBUF_DROPS] = c.lost + c.abandoned + c.unplaced;  // trials and frees alike
  f.counters[AS_CNT_USDT_RATE] = events_.other_rate();
  for (size_t stop = AS_STOP_NO_INFO; stop < EventSink::kStops; ++stop)  // every walk is finished here
    f.counters[AS_CNT_STOP_FIRST + stop] = sink_.walk_stops()[stop];
  f.paths = {{"kernel", "not used (" + why_ + ")"}, {"unwinder", "dwarf, in userspace"}};
  return f;
}

RecordingState PreloadRecorder::state() const {
  std::string sampling = describe_sampling(plan_, sink_.processes().ended_in_process(),
                                           sink_.processes().ended_through_probes());
  return {figures(), profile_, sink_, tables_, 0, 0, 0, {}, {}, 0, {}, 0, {}, sampling, nullptr};
}

RecordingMeta PreloadRecorder::meta(uint64_t duration_ms) {
  auto paths = figures().paths;
  paths.emplace_back("sampling", state().sampling);
  for (RuntimePath& p : runtimes_.paths()) paths.emplace_back(std::move(p.key), std::move(p.value));
  if (targets_ended_) paths.emplace_back("taken", kTakenAfterExit);
  NamedCounters c = recording_counters(state());
  c.emplace_back("recording_id", recording_id_);
  return {config_.rate,   start_wall_ns_,  int64_t(duration_ms) * 1000000, config_.metric, std::move(c),
          monotonic_ns(), std::move(paths)};
}

// What the summary's figures do not say: processes not recorded, and what
// the rings' writers left unfinished.
void PreloadRecorder::print_losses() const {
  if (std::string line = untraced_.summary(); !line.empty())
    std::fprintf(stderr, "allocscope: %s\n", line.c_str());
  PreloadChannel::Counts c = channel_->counts();
  if (c.refused)
    std::fprintf(stderr, "allocscope: %llu process%s got no ring (%zu at once at most): not recorded\n",
                 (unsigned long long)c.refused, c.refused == 1 ? "" : "es", PreloadChannel::kMaxRings);
  if (c.small)
    std::fprintf(stderr,
                 "allocscope: %llu process%s got a ring of %s: %s of rings were in use (a full ring makes "
                 "its writers wait, or lose records, counted)\n",
                 (unsigned long long)c.small, c.small == 1 ? "" : "es",
                 format_bytes(double(PreloadChannel::kSmallRingBytes)).c_str(),
                 format_bytes(double(PreloadChannel::kMaxRingBytes)).c_str());
  Counters none{};
  for (const std::string& line : runtimes_.warnings(none)) print_error(line);
  if (c.unplaced)
    std::fprintf(stderr,
                 "allocscope: %llu record(s) of processes in a PID namespace of their own that could not say "
                 "which they are (their hello refused): dropped\n",
                 (unsigned long long)c.unplaced);
  if (c.abandoned || c.broken_locks || c.corrupt || events_.malformed())
    std::fprintf(stderr,
                 "allocscope: in the rings: %llu record(s) their writer died in, %llu lock(s) a writer died "
                 "holding, %llu ring(s) written past their bounds (not read further), %llu record(s) of no "
                 "known kind\n",
                 (unsigned long long)c.abandoned, (unsigned long long)c.broken_locks,
                 (unsigned long long)c.corrupt, (unsigned long long)events_.malformed());
}

// Reads what is left, writes the outputs and the summary; returns the exit
// status (the command's).
int PreloadRecorder::finish(const LoopEnd& l) {
  read_rings();
  if (sink_.has_waiting()) {  // walks that wait for tables being built
    constexpr uint64_t kMaxBuildWaitMs = 10'000;
    tables_.wait_for_builds(kMaxBuildWaitMs);
    sink_.release_all_waiting();
  }
  read_rings(true);  // the exits of those that ended with the rest
  targets_ended_ = l.target_gone;
  Result<void> written = {};
  if (!config_.outputs.empty())
    written = write_record_outputs(
        saved_recording(profile_, symbolizer_, meta(l.end - l.start), sink_.origins()), config_, 0);
  if (!written) print_error(written.error());
  if (!config_.quiet) {
    print_summary(state(), config_, l.end - l.start);
    print_losses();
    if (written) print_written(config_, 0, false);
  }
  int sig = l.target_gone ? 0 : stop_signal();
  int status = target_->finish(sig, say_still_running(*target_, sig, config_.quiet));
  return written ? status : 1;
}

int PreloadRecorder::run() {
  if (auto ok = prepare(); !ok) {
    print_error(ok.error());
    put_back_set_aside(set_aside_);
    return 1;
  }
  install_stop_handlers(config_.hangup_stops);
  if (stop_signal()) return stopped_before_start(stop_signal(), set_aside_);
  if (auto ok = target_->start(); !ok) {
    print_error(ok.error());
    put_back_set_aside(set_aside_);
    return 127;
  }
  symbolizer_.track(target_->pid());
  if (!config_.quiet)
    std::fprintf(
        stderr, "allocscope: recording process %d (%s) and its descendants in process, without BPF; %s\n",
        int(target_->pid()), read_comm(target_->pid()).c_str(),
        config_.duration_ms
            ? ("for " + format_duration_ns(double(config_.duration_ms) * 1e6) + " (Ctrl-C stops sooner)")
                  .c_str()
            : "Ctrl-C to stop");
  return finish(loop());
}

}  // namespace

int record_without_bpf(const RecordConfig& config, const std::string& why,
                       const std::vector<std::string>& set_aside) {
  return PreloadRecorder(config, why, set_aside).run();
}

}  // namespace allocscope
