// The processes named with -p, sampled in process: liballocscope-preload.so
// loaded into each while it runs (inject/), attached at the recording's
// rate with a ring for the frees of its sampled blocks, and detached at the
// recording's end. Only its sampled allocations then reach the kernel,
// where probing its allocator trapped at every call. A process it cannot
// enter is probed as before, and the reason said in one line.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "inject/injector.h"

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

// The summary's words for how the named processes were sampled: "in
// process (2 processes entered), allocator probes (1 process)".
std::string describe_entries(size_t entered, size_t probed);

class Injections {
 public:
  explicit Injections(const RecordConfig& config) : config_(config) {}
  Injections(const Injections&) = delete;
  Injections& operator=(const Injections&) = delete;
  ~Injections() { eject_all(); }

  // Whether process `pid` samples in process now; `rings` takes its ring
  // (none: its sampled frees trap).
  bool enter(pid_t pid, AnsweredChannel* rings);
  // Every entered process given back its allocator; said if one cannot be.
  void eject_all();

  struct Refusal {
    pid_t pid = 0;
    std::string comm, why;
  };
  const std::vector<Refusal>& refused() const { return refused_; }
  size_t entered() const { return entered_; }
  // How long each entry held its borrowed thread (microseconds).
  const std::vector<uint64_t>& pauses_us() const { return pauses_us_; }

 private:
  Result<std::shared_ptr<const inject::LibraryImage>> library();
  void refuse(pid_t pid, const std::string& why);

  const RecordConfig& config_;
  std::shared_ptr<const inject::LibraryImage> library_;
  std::vector<inject::Injection> live_;
  std::vector<Refusal> refused_;
  std::vector<uint64_t> pauses_us_;
  size_t entered_ = 0;
};

}  // namespace allocscope
