// Under system-wide probes (--all, the agent, -p with --children) every
// process that maps a probed allocator traps at each of its calls, entered
// or not. An entered process has the probes' int3s taken out of its copies
// of the allocators' code (inject/breakpoints.h), so that only its sampled
// allocations reach the kernel; the other processes keep them. The kernel
// counts each recorded process's calls (count_busy), and every quarter of a
// second the processes whose traps cost them more than busy_threshold() in
// that quarter and the one before are entered, as -p enters its processes:
// a short busy program (a load generator, a compiler) pays its traps for
// half a second at most, not two (agent: redis-benchmark 1.44x when it was
// a second).
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "base/clocks.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "probe/features/kernel_features.h"
#include "probe/session/bpf_session.h"
#include "record/discovery/injections.h"
#include "record/messages.h"
#include "record/session/recorder.h"

namespace allocscope {
namespace {

constexpr uint64_t kBusyPeriodMs = 250;
// The longest an entry waits for an event still being written (its
// writer preempted) when it reads the events placed so far.
constexpr uint64_t kCatchUpWaitMs = 20;
constexpr auto kLiftBudget = std::chrono::milliseconds(3000);
constexpr size_t kRuntimeEntriesPerLook = 4;

}  // namespace

void Recorder::enter_busy(uint64_t now) {
  if (!last_busy_ms_) last_busy_ms_ = now;
  if (now - last_busy_ms_ < kBusyPeriodMs) return;
  double seconds = double(now - last_busy_ms_) / 1e3;
  last_busy_ms_ = now;
  SessionParts& p = *r_.parts;
  p.injections.forget_ended();
  p.libraries.release_unmapped_copies();  // -p's too: an entered process may end before the recording
  p.runtimes.recheck(now);
  if (!enters_busy(config_)) return;
  double trap_ns = p.session->kernel().trap_ns;
  for (uint32_t tgid : busy_.note(p.session->processes().take_busy(), seconds, busy_threshold(trap_ns),
                                  entry_worth(trap_ns))) {
    pid_t pid = pid_t(tgid);
    if (p.injections.entered_now(pid))
      lift_probes(pid);  // its probes came back
    else if (p.injections.refused_before(pid))
      continue;
    else if (!p.session->processes().in_process(tgid))
      enter_running(pid);
    else if (!lift_probes(pid))
      p.injections.pass_over(pid);  // it samples itself and traps for nothing: tried once
  }
  // The processes a runtime asks for: a JVM, whose agent the library
  // starts (its heap is not the C heap: its calls never make it busy).
  // A few a look (each may take its budget): the rest wait for the next.
  for (pid_t pid : p.runtimes.processes_to_enter(kRuntimeEntriesPerLook))
    if (!p.injections.entered_now(pid) && !p.injections.refused_before(pid) &&
        !p.session->processes().in_process(uint32_t(pid)))
      enter_running(pid);
  // Allocator files probed since: their probes out of every entered process.
  if (size_t files = p.libraries.files_probed_system_wide(); files != files_lifted_) {
    files_lifted_ = files;
    for (pid_t pid : p.injections.entered_pids()) lift_probes(pid);
  }
}

// The library's probes are attached once it is loaded, and the process is
// marked as sampling itself (the allocator probes sample it no more) by the
// library, once it took the allocator's slots (its probe allocscope:
// entered), so that its allocations are counted by one or the other at
// every moment. The live samples the probes took are handed to the library
// (seeds), whose free path sends their frees from then on, as it sends its
// own samples'. Those the probes take between the hand-over and the mark
// (the library's attach call lies between) stay live, their frees unseen
// once the probes are out: counted, as in use may be high by their bytes.
void Recorder::enter_running(pid_t pid) {
  SessionParts& p = *r_.parts;
  uint32_t tgid = uint32_t(pid);
  std::vector<uint64_t> handed;
  uint64_t handed_ns = 0;
  // The library's own table is in before it samples: its walks start in
  // its code, and would wait behind the builds queued (a compiler's took
  // 0.6 s), their records filling the ring buffer until they are cut short.
  bool tables = config_.unwind == UnwindMode::Dwarf;
  auto probes = [&p, pid, tables](int library) {
    auto ok = p.libraries.attach_entered(pid, library);
    if (ok && tables) p.tables.load_paths({"/proc/self/fd/" + std::to_string(library)});
    return ok;
  };
  // The events waiting are read before the process is stopped (a first
  // sample's stack is symbolized as it is read: that may take long, and
  // an entry has a budget), and those that came since at the hand-over:
  // all of them, or a sample left unread then is neither handed over nor
  // seen freed (a backlog on a loaded machine left freed blocks in use).
  auto catch_up = [this] {
    if (auto read = r_.catch_up(kCatchUpWaitMs); !read) print_error(read.error());
  };
  catch_up();
  auto seeds = [&p, tgid, &handed, &handed_ns, &catch_up] {
    catch_up();
    handed_ns = monotonic_ns();
    handed = p.sink.hand_over_live(tgid);
    return handed;
  };
  // The probes come out while the thread is held: a kernel may write into
  // the process's code only for its tracer.
  auto held = [this, pid](pid_t tid) { lift_probes(pid, tid); };
  const inject::Injection* in = p.injections.enter(pid, r_.free_channel.get(), {probes, seeds, held});
  uint64_t entered_ns = monotonic_ns();
  p.sink.end_hand_over(tgid, handed, in && in->answer.seeded);
  if (!in) {
    p.session->processes().unmark_in_process(tgid);
    return;
  }
  // Marked here too, where the library's mark was not seen (its probe not
  // attached); then the probes' samples that were on their way are read.
  if (auto marked = p.session->processes().mark_in_process(tgid); !marked) print_error(marked.error());
  catch_up();
  size_t late = handed_ns ? p.sink.count_probed_between(tgid, handed_ns, entered_ns) : 0;
  if (!handed.empty() && !in->answer.seeded) p.sink.forget_probed_live(tgid);  // their frees will not be seen
  if (config_.verbose && (!handed.empty() || late))
    std::fprintf(stderr,
                 "allocscope: process %d: %u of the %zu blocks its probes sampled handed to the library, "
                 "%zu sampled during the entry, their frees unseen\n",
                 int(pid), in->answer.seeded, handed.size(), late);
}

// Process `pid`'s executable file mappings as the kernel names their files
// (its walks' view: an overlay's file is the one below it).
static std::vector<Mapping> kernel_named(const BpfSession& session, pid_t pid) {
  std::vector<Mapping> out;
  for (const as_vma& v : session.code_mappings(pid).value_or(std::vector<as_vma>{})) {
    Mapping m;
    m.start = v.start;
    m.end = v.end;
    m.offset = v.pgoff;
    m.dev_major = v.dev >> 20;
    m.dev_minor = v.dev & 0xfffff;
    m.inode = v.ino;
    m.readable = m.executable = true;
    m.path = "/";  // a file, by the kernel's name
    out.push_back(std::move(m));
  }
  return out;
}

bool Recorder::lift_probes(pid_t pid, pid_t traced) {
  SessionParts& p = *r_.parts;
  auto lift = [&](pid_t tid) {
    return inject::lift_breakpoints(pid, p.libraries.probed_files(), kernel_named(*p.session, pid), tid);
  };
  auto lifted = lift(traced);
  // Refused but to its tracer: through one of its threads, held as an entry holds it.
  if (!lifted && lifted.error().code == EIO && !traced)
    if (const inject::Injection* in = p.injections.find(pid))
      if (auto held = inject::with_held_thread(
              *in, [&](pid_t tid) { lifted = lift(tid); }, kLiftBudget);
          !held)
        lifted = fail(held.error());
  // Said of a process entered; of one that samples itself, with -v.
  bool say = p.injections.find(pid) || traced ? !config_.quiet : config_.verbose;
  if (!lifted && process_exists(pid) && say)
    print_error("warning: process " + std::to_string(pid) + " keeps its probes: " + lifted.error().message);
  else if (lifted && *lifted && config_.verbose)
    std::fprintf(stderr, "allocscope: process %d (%s): %zu probes taken out\n", int(pid),
                 read_comm(pid).c_str(), *lifted);
  return bool(lifted);
}

}  // namespace allocscope
