// The orchestrator of `allocscope record`: opens the session, attaches to or
// launches the targets, runs the loop (recorder_loop.cpp) until the end, then
// writes the outputs and the summary.
#include "record/session/recorder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abi/preload/channel.h"
#include "base/clocks.h"
#include "base/units.h"
#include "host/privileges.h"
#include "host/process.h"
#include "host/target.h"
#include "output/outputs.h"
#include "output/text_format.h"
#include "probe/features/kernel_features.h"
#include "probe/session/bpf_session.h"
#include "probe/tables/table_loader.h"
#include "record/discovery/filter_verdicts.h"
#include "record/discovery/library_discovery.h"
#include "record/events/event_sink.h"
#include "record/events/session_hooks.h"
#include "record/messages.h"
#include "record/record.h"
#include "record/scope.h"
#include "record/session/launch_plan.h"
#include "record/session/preload_recorder.h"
#include "record/session/stop_signals.h"
#include "record/view/live_top.h"
#include "record/view/output_writer.h"
#include "record/view/progress.h"
#include "record/view/summary.h"
#include "symbols/symbolizer.h"

namespace allocscope {
namespace {

// The targets' processes and, when they are followed, their descendants.
std::vector<pid_t> target_processes(const std::vector<Target>& targets, bool children) {
  std::vector<pid_t> pids;
  for (const Target& t : targets) pids.push_back(t.pid());
  if (children)
    for (pid_t child : descendants_of(pids)) pids.push_back(child);
  return pids;
}

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
          .judge_cgroups = !c.unit.empty(),
          .cgroup_names = system_wide(c),
          .count_busy = enters_busy(c)};
}

}  // namespace

Result<void> Recorder::open_session() {
  SessionConfig sc = session_config(config_);
  r_.profile.set_live_share(sc.live_share);  // for the samples the kernel does not hold
  if (!config_.cgroup.empty()) {
    auto cg = find_cgroup(config_.cgroup);
    if (!cg) return fail(cg.error());
    sc.cgroup_id = cg->id;
    sc.cgroup_level = cg->level;
  }
  // Events arrive only from poll(), once the parts below are made.
  // Decoded here, at the edge: past it, events are typed (events.h).
  auto session = BpfSession::open(sc, [this](std::span<const uint8_t> record) {
    auto event = decode_kernel_event(record);
    return !event || r_.take_event(std::move(*event));
  });
  if (!session) return fail(session.error());
  r_.parts = std::make_unique<SessionParts>(config_, in_process_use(), std::move(*session), r_.profile,
                                            r_.symbolizer, r_.cgroup_names);
  // allocscope's own allocations are never sampled (system-wide probes see them).
  return r_.parts->session->processes().set_verdict(uint32_t(getpid()), AS_PROC_IGNORED);
}

Result<std::vector<Target>> Recorder::make_targets() {
  std::vector<Target> targets;
  if (!config_.command.empty()) {
    std::vector<std::string> env = launch_environment(r_.plan, config_.rate);
    if (r_.free_channel)
      env.push_back(std::string(AS_FREES_CHANNEL_ENV) + "=" + r_.free_channel->socket_path());
    if (config_.no_java_heap) env.push_back(std::string(AS_NO_JAVA_AGENT_ENV) + "=1");
    auto t = Target::launch(launch_command(r_.plan, config_.command), env);
    if (!t) return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (pid_t pid : config_.pids) {
    auto t = Target::attach(pid);
    if (!t) return fail(t.error());
    targets.push_back(std::move(*t));
  }
  for (Target& t : targets)
    if (auto ok = r_.parts->verdicts.add_root(uint32_t(t.pid())); !ok) return fail(ok.error());
  // Children forked before recording began: followed too (new ones are
  // marked by the kernel at fork).
  if (follows_children(config_) && !config_.pids.empty())
    for (pid_t child : descendants_of(config_.pids))
      if (auto ok = r_.parts->verdicts.follow(uint32_t(child)); !ok) return fail(ok.error());
  return targets;
}

// The session, the targets, their allocators probed and unwind tables loaded.
// What can be checked before the kernel is touched: the processes named and
// the outputs' directories. A bad pid or an unwritable output fails at once,
// not after BPF is loaded, nor (an output) after a long recording.
Result<void> check_before_recording(const RecordConfig& c, std::vector<std::string>& set_aside) {
  for (pid_t pid : c.pids) {
    if (pid <= 0 || !process_exists(pid)) return fail("no such process: " + std::to_string(pid), ESRCH);
    if (is_kernel_thread(pid))
      return fail("process " + std::to_string(pid) + " (" + read_comm(pid) +
                      ") is a kernel thread: it has no user memory, so no heap to sample",
                  EINVAL);
  }
  std::vector<std::string> paths;
  for (const OutputSpec& o : c.outputs) paths.push_back(o.path);
  if (!c.timeline.empty()) paths.push_back(c.timeline);
  for (const std::string& path : paths)
    if (auto ok = check_output(path); !ok) return ok;
  // A suffix that names no format: folded stacks, said before the run.
  for (const OutputSpec& o : c.outputs)
    if (std::string note = unnamed_format_note(o); !note.empty() && !c.quiet) print_error("note: " + note);
  // The default output of an earlier run is kept: a second run would
  // overwrite it unasked.
  if (c.keep_previous && !c.interval_ms)
    for (const OutputSpec& o : c.outputs)
      if (set_aside_previous(o.path)) {
        set_aside.push_back(o.path);
        if (!c.quiet) print_error("the earlier " + o.path + " is now " + o.path + ".old");
      }
#ifdef ALLOCSCOPE_TEST_HOOKS
  // ALLOCSCOPE_TEST_PAUSE_BEFORE_RECORDING=MS: a Ctrl-C in this pause finds
  // the recording not yet begun, as it would while BPF loads.
  if (const char* ms = std::getenv("ALLOCSCOPE_TEST_PAUSE_BEFORE_RECORDING"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
#endif
  return {};
}

std::function<void()> say_still_running(const Target& target, int sig, bool quiet) {
  if (quiet) return {};
  return [pid = target.pid(), sig] {
    std::fprintf(
        stderr,
        "allocscope: the recording is over; %s (pid %d) runs on%s%s, and allocscope waits for it to exit\n",
        read_comm(pid).c_str(), int(pid), sig ? " after SIG" : ", untraced", sig ? sigabbrev_np(sig) : "");
  };
}

void put_back_set_aside(const std::vector<std::string>& set_aside) {
  for (const std::string& path : set_aside) put_back_previous(path);
}

int stopped_before_start(int sig, const std::vector<std::string>& set_aside) {
  put_back_set_aside(set_aside);
  std::fprintf(stderr, "allocscope: interrupted (SIG%s) before the recording began: nothing was written%s\n",
               sigabbrev_np(sig), set_aside.empty() ? "" : ", and the earlier output is back in its place");
  return 128 + sig;
}

Result<void> Recorder::prepare(std::vector<Target>& targets) {
  if (auto ok = check_before_recording(config_, set_aside_); !ok) return ok;
  if (!config_.command.empty()) {
    auto plan = plan_launch(config_);
    if (!plan) return fail(plan.error());
    r_.plan = std::move(*plan);
  }
  if (auto ok = open_session(); !ok) {
    bpf_refused_ = ok.error().code == EPERM || ok.error().code == EACCES;
    return ok;
  }
  if (observer_) observer_->set_wake([session = r_.parts->session.get()] { session->wake(); });
  if (frees_through_rings())
    if (auto ok = r_.open_free_channel(); !ok) return ok;
  auto made = make_targets();
  if (!made) return fail(made.error());
  targets = std::move(*made);
  if (config_.all)
    if (auto ok = r_.parts->libraries.attach_every_process(); !ok) return ok;
  // Runtimes' programs already running: their frames are named from now on
  // (a new one is read at its exec).
  for (pid_t pid : config_.all ? list_processes() : target_processes(targets, follows_children(config_)))
    r_.parts->runtimes.on_process(pid);
  if (!r_.plan.files.empty()) r_.parts->runtimes.on_files(r_.plan.files);  // a launched command's libpython
  // The launched command's files (found by running the loader): probed
  // before it runs.
  if (auto ok = enter_descendants(); !ok) return ok;
  for (Target& t : targets) {
    if (t.launched()) r_.parts->libraries.attach_paths(t.pid(), r_.plan.files, r_.plan.root_in_process);
    // The preload library is not mapped before exec: its path alone tells.
    if (t.launched() && r_.plan.in_process) {
      if (!r_.parts->libraries.in_process_probed())
        return fail("the preload library's probes could not be attached (" + r_.plan.preload_library + ")");
      continue;
    }
    if (auto ok = r_.parts->libraries.attach_process(t.pid(), enter(t.pid())); !ok) return ok;
  }
  if (config_.unwind == UnwindMode::Dwarf) prepare_tables(targets, r_.plan.files);
  return {};
}

// Whether process `pid` samples in process now, allocscope's library
// loaded into it.
bool Recorder::enter(pid_t pid) {
  return injects(config_) && !r_.parts->libraries.samples_in_process(pid) &&
         r_.parts->injections.enter(pid, r_.free_channel.get());
}

// With --children, the children the -p processes have now are entered too
// (those they fork later inherit the library), their own probes attached
// to the library each was given; one that cannot be is probed.
Result<void> Recorder::enter_descendants() {
  if (!injects(config_) || !follows_children(config_)) return {};
  for (pid_t child : descendants_of(config_.pids))
    if (auto ok = r_.parts->libraries.attach_process(child, enter(child)); !ok && process_exists(child))
      return ok;
  return {};
}

// Unwind tables of what the targets run, built before recording begins:
// samples taken before a file's table is in cannot be unwound past it.
void Recorder::prepare_tables(const std::vector<Target>& targets, const std::vector<std::string>& launched) {
  for (const Target& t : targets)
    if (t.launched())
      r_.parts->tables.load_paths(launched);
    else
      r_.parts->tables.load_process(t.pid());
}

// A launched command sampled in process: each process sends the frees of
// its sampled blocks through a ring, not a trap. Not in exact mode (the
// kernel counts every free there), nor with frees unseen (--no-free), nor
// with the probes paused now and then (--duty: frees then are not seen).
bool Recorder::frees_through_rings() const {
  bool in_process =
      (r_.plan.in_process && !config_.command.empty()) || injects(config_) || enters_busy(config_);
  return in_process && config_.rate > 1 && !config_.no_free && !config_.duty_period_ms && !config_.frees_trap;
}

InProcessUse Recorder::in_process_use() const {
  if (!r_.plan.in_process) return InProcessUse::Alongside;
  return r_.plan.probes ? InProcessUse::Preferred : InProcessUse::Only;
}

void Recorder::announce(std::vector<Target>& targets) {
  std::string names;
  for (Target& t : targets) {
    r_.symbolizer.track(t.pid());  // after exec: the command's maps
    names += (names.empty() ? "" : ", ") + std::to_string(t.pid()) + " (" + read_comm(t.pid()) + ")";
  }
  if (config_.quiet) return;
  std::string until = config_.duration_ms ? "for " + format_duration_ns(double(config_.duration_ms) * 1e6) +
                                                " (Ctrl-C stops sooner)"
                                          : "Ctrl-C to stop";
  if (config_.all && targets.empty()) {
    size_t n = r_.parts->libraries.libraries_probed();
    std::fprintf(stderr, "allocscope: recording every process (%zu allocator file%s); %s\n", n,
                 n == 1 ? "" : "s", until.c_str());
  } else {
    std::fprintf(stderr, "allocscope: recording process%s %s%s; %s\n", targets.size() > 1 ? "es" : "",
                 names.c_str(), follows_children(config_) ? " and its descendants" : "", until.c_str());
  }
  if (std::string note = hold_note(config_); !note.empty()) print_error(note);
}

// Detaches, reads what is left, writes the outputs and the summary; returns
// the exit status.
int Recorder::finish(std::vector<Target>& targets, const LoopEnd& l) {
  bool launched = !targets.empty() && targets.front().launched();
  r_.parts->injections.eject_all();  // their allocators back before the probes go
  r_.parts->runtimes.restore();      // what the runtimes set in processes (Go rates) back, too
  r_.parts->session->detach();
  drain_events();
  r_.flush_ring_frees();
  if (r_.parts->sink.has_waiting()) {  // walks that wait for tables being built
    constexpr uint64_t kMaxBuildWaitMs = 10'000;
    r_.parts->tables.wait_for_builds(kMaxBuildWaitMs);
    r_.parts->sink.release_all_waiting();
  }
  end_vanished(now_ms(), true);  // every event is read: a process gone now has ended
  // The observer is shown the final state, probes gone, before it stops.
  if (observer_) {
    observer_->on_tick(view_);
    observer_->on_stop();
  }
  if (!config_.quiet && l.target_gone && !launched)
    std::fprintf(stderr, "allocscope: the traced processes exited; inuse shows what they held at exit\n");
  unsigned number = config_.interval_ms ? l.interval + 1 : 0;
  r_.targets_ended = l.target_gone;
  auto written = write_outputs(r_, number, l.end - l.interval_start);
  if (!written) print_error(written.error());
  auto peak = write_peak(r_, l.start);
  if (!peak) print_error(peak.error());
  auto chart = write_timeline(r_, l.end - l.start);
  if (!chart) print_error(chart.error());
  if (!config_.quiet) {
    print_summary(r_.state(), config_, l.end - l.start);
    print_live_peaks(r_.state(), config_, l.start, snapshots_, snapshots_missed_);
    if (written) print_written(config_, number, config_.peak && r_.profile.peak().seen());
  }
  // A signal is passed on to a launched command; after --duration it runs on
  // untraced and allocscope waits for it.
  int sig = l.target_gone ? 0 : stop_signal();
  int status =
      launched ? targets.front().finish(sig, say_still_running(targets.front(), sig, config_.quiet)) : 0;
  if (!written || !peak || !chart) return 1;
  return status;
}

int Recorder::run() {
  std::vector<Target> targets;
  // Before anything is entered: a signal then ends the recording, and what
  // was entered is given back.
  install_stop_handlers(config_.hangup_stops);
  auto prepared = prepare(targets);
  // What was entered is given back as `targets` go; a launched command never runs.
  if (stop_signal()) return stopped_before_start(stop_signal(), set_aside_);
  if (auto& ok = prepared; !ok) {
    if (bpf_refused_ && may_fall_back_) return kBpfRefused;
    print_error(ok.error());
    put_back_set_aside(set_aside_);
    return 1;
  }
  if (!targets.empty() && targets.front().launched()) {
    if (auto ok = targets.front().start(); !ok) {
      print_error(ok.error());
      put_back_set_aside(set_aside_);
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

// What a recording without BPF cannot do for `c`; "" when nothing.
static std::string without_bpf_refusal(const RecordConfig& c, RecordObserver* observer) {
  if (c.command.empty()) return "only a launched command (-- CMD) can be recorded: -p and --all need BPF";
  if (c.launch == LaunchPath::Probes) return "--probes are kernel probes";
  if (c.top_every_ms || observer) return "--top and the agent need BPF";
  if (c.interval_ms || c.peak || c.snapshot_above || !c.timeline.empty() || c.duty_period_ms)
    return "--interval, --peak, --snapshot-above and --timeline need BPF (for now)";
  return "";
}

// Loading BPF needs CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON.
static bool may_load_bpf() {
  Privileges p = current_privileges();
  return !p.capabilities || p.has(kCapSysAdmin) || (p.has(kCapBpf) && p.has(kCapPerfmon));
}

// Without BPF: the path a command takes, or why it cannot; `why` the summary's.
// `set_aside`: the default outputs a refused run with BPF set aside.
static int record_in_process(const RecordConfig& config, RecordObserver* observer, const std::string& why,
                             const std::vector<std::string>& set_aside = {}) {
  if (std::string refusal = without_bpf_refusal(config, observer); !refusal.empty()) {
    print_error(
        (config.no_bpf ? "--no-bpf: " : "loading BPF needs root, or CAP_BPF and CAP_PERFMON; without it ") +
        refusal);
    put_back_set_aside(set_aside);
    return 1;
  }
  if (!config.no_bpf && !config.quiet)
    std::fprintf(stderr,
                 "allocscope: %s (root, or CAP_BPF and CAP_PERFMON): the command samples in process, "
                 "its stacks unwound here (--no-bpf)\n",
                 why.c_str());
  return record_without_bpf(config, why, set_aside);
}

void hold_stop_signals_for_record() { install_stop_handlers(false); }

std::string hold_note(const RecordConfig& c) {
  if (!c.all || !c.hold_new_files) return "";
  return "a process that maps an allocator file not seen before is stopped for milliseconds while it is "
         "probed (--no-hold: never)";
}

int record(const RecordConfig& config, RecordObserver* observer) {
  // From the first moment: a Ctrl-C while BPF loads is answered, not fatal.
  install_stop_handlers(config.hangup_stops);
  if (auto forced = set_forced_fallbacks(config.force_fallback); !forced) {
    print_error(forced.error());
    return 2;
  }
  if (config.no_bpf) return record_in_process(config, observer, "--no-bpf");
  bool may_fall_back = !config.command.empty() && without_bpf_refusal(config, observer).empty();
  if (!config.command.empty() && !may_load_bpf())
    return record_in_process(config, observer, "no privilege to load BPF");
  std::optional<LiveTop> top;
  if (config.top_every_ms && !observer) observer = &top.emplace(config.top_every_ms, config.render);
  Recorder recorder(config, observer, may_fall_back);
  int status = recorder.run();
  // Refused with capabilities that looked enough (a user namespace's, a
  // seccomp filter, a lockdown): the command is not launched yet.
  if (status == Recorder::kBpfRefused)
    return record_in_process(config, observer, "loading BPF was refused", recorder.set_aside());
  return status;
}

}  // namespace allocscope
