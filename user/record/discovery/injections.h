// The processes sampled in process while they run: liballocscope-preload.so
// loaded into each (inject/), attached at the recording's rate with a ring
// for the frees of its sampled blocks, and detached at the recording's end.
// Those named with -p are entered at the start; under system-wide probes
// (--all, the agent, --children) a process is entered once its allocator
// calls trap too often (busy_threshold). Only its sampled allocations then
// reach the kernel, where probing its allocator trapped at every call. A
// process it cannot enter is probed as before, and the reason said in one
// line.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/result.h"
#include "inject/injector.h"
#include "runtime/registry.h"

namespace allocscope {

struct RecordConfig;
class AnsweredChannel;

// Whether the processes of a recording are entered: -p (and the children
// it has, with --children: those it forks later carry the library; a
// program one of them runs is probed), not --all (whose allocator probes
// are system-wide, and trap in an entered process too), sampled (exact
// mode probes: every call traps either way), neither refused (--no-inject)
// nor paused (--duty).
bool injects(const RecordConfig& config);

// Whether busy processes are entered under system-wide probes: --all, the
// agent, -p with --children (not a launched command, whose
// processes load the library at exec), sampled, neither refused nor paused.
bool enters_busy(const RecordConfig& config);

// The allocating calls per second, trapping at `trap_ns` each (0: not
// timed), over which a process is entered: where the traps cost it 1 % of
// a core (two traps a call: the call and the free of its block).
double busy_threshold(double trap_ns);

// The calls whose traps cost a process as much as its entry would (the
// pause of its borrowed thread, 7 to 30 ms here: 20 ms taken).
double entry_worth(double trap_ns);

// The processes busy over the threshold in each of the last two periods:
// one busy for less (a short program, a burst) is not worth an entry,
// which would cost it and the recorder more than its traps. And those
// whose traps in the last period alone cost them an entry's worth: paid
// for already, as a ski rental is bought once its rent reaches its price
// (a load generator is entered within a quarter of a second).
class BusyStreaks {
 public:
  // The calls each process made over the last `seconds`; those over
  // `threshold` calls a second in this period and the one before, or
  // over `worth` calls in this one.
  std::vector<uint32_t> note(std::span<const std::pair<uint32_t, uint64_t>> calls, double seconds,
                             double threshold, double worth);

 private:
  std::set<uint32_t> busy_before_;
};

// The summary's words for how the named processes were sampled: "in
// process (2 processes entered), allocator probes (1 process)".
std::string describe_entries(size_t entered, size_t probed);
// ... and under system-wide probes, where busy processes are entered:
// "allocator probes, in process where busy (2 processes entered, 1 could not be)".
std::string describe_busy_entries(size_t entered, size_t refused);

class Injections {
 public:
  // `runtimes`: a process whose heap a runtime reads itself is not entered.
  Injections(const RecordConfig& config, const Runtimes& runtimes) : config_(config), runtimes_(runtimes) {}
  Injections(const Injections&) = delete;
  Injections& operator=(const Injections&) = delete;
  ~Injections() { eject_all(); }

  // Whether process `pid` samples in process now; `rings` takes its ring
  // (none: its sampled frees trap).
  // What an entry calls on its way (InjectOptions' loaded, seeds, held).
  struct Hooks {
    std::function<Result<void>(int library)> loaded;
    std::function<std::vector<uint64_t>()> seeds;
    std::function<void(pid_t held)> held;
  };
  // Returns the entry, or null.
  const inject::Injection* enter(pid_t pid, AnsweredChannel* rings, Hooks hooks = {});
  // The entry of process `pid`, if it is entered.
  const inject::Injection* find(pid_t pid) const;
  // Every entered process given back its allocator; said if one cannot be.
  void eject_all();
  // Whether process `pid` is entered now (one that ran another program since
  // is forgotten: it traps again, and may be entered again).
  bool entered_now(pid_t pid);
  // Whether this process (not another given its id since) was refused.
  bool refused_before(pid_t pid) const;
  // Remembers a process left to the probes without a word (a Go program:
  // its heap is read through its runtime).
  void pass_over(pid_t pid);
  // Forgets the entries of processes that ended (an always-on recording).
  void forget_ended();
  std::vector<pid_t> entered_pids() const;

  struct Refusal {
    pid_t pid = 0;
    std::string comm, why;
  };
  // The first kMaxKept refusals, and how many there were.
  const std::vector<Refusal>& refused() const { return refused_; }
  size_t refusals() const { return refusals_; }
  size_t entered() const { return entered_; }
  // How long each entry held its borrowed thread (microseconds; the first kMaxKept).
  const std::vector<uint64_t>& pauses_us() const { return pauses_us_; }

 private:
  Result<std::shared_ptr<const inject::LibraryImage>> library();
  void refuse(pid_t pid, const std::string& why);

  void keep_pause(std::chrono::microseconds paused);
  // A process running a program, told from a later one given its id by its
  // start time, and from the program it runs after an exec by that file's
  // inode (a refused program's successor is tried).
  using Identity = std::tuple<pid_t, double, uint64_t>;
  static Identity identity(pid_t pid);

  static constexpr size_t kMaxKept = 1 << 14;
  // Entered at once: each holds a copy of the library in its process (a
  // memfd of about 120 KiB), its probes and a ring here.
  static constexpr size_t kMaxLive = 1024;
  const RecordConfig& config_;
  const Runtimes& runtimes_;
  std::shared_ptr<const inject::LibraryImage> library_;
  std::vector<inject::Injection> live_;
  std::vector<Refusal> refused_;
  std::set<Identity> refused_ids_;  // bounded as live_ is: processes that ended are forgotten
  std::vector<uint64_t> pauses_us_;
  size_t entered_ = 0, refusals_ = 0;
};

}  // namespace allocscope
