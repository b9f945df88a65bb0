// Under system-wide probes (--all, the agent, -p with --children) every
// process that maps a probed allocator traps at each of its calls, entered
// or not. An entered process has the probes' int3s taken out of its copies
// of the allocators' code (inject/breakpoints.h), so that only its sampled
// allocations reach the kernel; the other processes keep them. With
// --enter-busy, the kernel counts each recorded process's calls
// (count_busy), and once a second the processes whose traps cost them more
// than busy_threshold() are entered, as -p enters its processes.
#include <cstdio>

#include "host/process.h"
#include "record/clocks.h"
#include "record/discovery/injections.h"
#include "record/messages.h"
#include "record/session/recorder.h"

namespace allocscope {
namespace {

constexpr uint64_t kBusyPeriodMs = 1000;

}  // namespace

void Recorder::enter_busy(uint64_t now) {
  if (!lifts_probes(config_)) return;
  if (!last_busy_ms_) last_busy_ms_ = now;
  if (now - last_busy_ms_ < kBusyPeriodMs) return;
  double seconds = double(now - last_busy_ms_) / 1e3;
  last_busy_ms_ = now;
  SessionParts& p = *r_.parts;
  p.injections.forget_ended();
  double threshold = busy_threshold(p.session->kernel().trap_ns);
  for (auto [tgid, calls] : p.session->take_busy()) {
    if (double(calls) / seconds < threshold) continue;
    pid_t pid = pid_t(tgid);
    if (p.injections.entered_now(pid) || p.session->in_process(tgid))
      lift_probes(pid);  // its probes came back, or it samples itself and traps for nothing
    else if (!p.injections.refused_before(pid))
      enter_running(pid);
  }
  // Allocator files probed since: their probes out of every entered process.
  if (size_t files = p.libraries.files_probed_system_wide(); files != files_lifted_) {
    files_lifted_ = files;
    for (pid_t pid : p.injections.entered_pids()) lift_probes(pid);
  }
}

// The library's probes are attached, and the process marked as sampling
// itself (the allocator probes sample it no more), once it is loaded and
// before it samples: no allocation is counted twice, and few none. The
// live samples the probes took before are forgotten: their frees will pass
// no probe once the probes are out.
void Recorder::enter_running(pid_t pid) {
  SessionParts& p = *r_.parts;
  uint32_t tgid = uint32_t(pid);
  auto probes = [&p, pid](int library) { return p.libraries.attach_entered(pid, library); };
  if (!p.injections.enter(pid, r_.free_channel.get(), probes)) {
    p.session->unmark_in_process(tgid);
    return;
  }
  if (auto read = r_.deliver_events(0); !read) print_error(read.error());
  p.sink.forget_probed_live(tgid);
  lift_probes(pid);
}

void Recorder::lift_probes(pid_t pid) {
  auto lifted = inject::lift_breakpoints(pid, r_.parts->libraries.probed_files());
  if (!lifted && process_exists(pid) && !config_.quiet)
    print_error("warning: process " + std::to_string(pid) + " keeps its probes: " + lifted.error().message);
  else if (lifted && *lifted && config_.verbose)
    std::fprintf(stderr, "allocscope: process %d (%s): %zu probes taken out\n", int(pid),
                 read_comm(pid).c_str(), *lifted);
}

}  // namespace allocscope
