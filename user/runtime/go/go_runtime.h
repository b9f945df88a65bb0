// Go's room as the recording sees it: a Go program allocates from its own
// heap (runtime.mallocgc), read one of two ways, chosen per file
// (heap_route.h): its runtime's own sampling, given its MemProfileRate where
// the linker took memory profiling out (rates.h), or a probe at every
// mallocgc call. Its frames need no help beyond its tables (tables.h).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "probe/session/kernel_map.h"
#include "runtime/go/heap_route.h"
#include "runtime/go/rates.h"
#include "runtime/registry.h"
#include "runtime/runtime.h"

namespace allocscope {

class BpfSession;

class GoRuntime : public Runtime {
 public:
  GoRuntime(const RuntimeSettings& settings, BpfSession* session);

  HeapRoute choose_targets(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                           const std::vector<ProbeTarget>& found) override;
  void on_probed(const ProbedFile& file, const std::vector<ProbeTarget>& attached) override;
  std::string unprobed_program(uint32_t kernel_dev, uint64_t ino) const override;
  bool owns_program(uint32_t kernel_dev, uint64_t ino) const override {
    return files_.contains({kernel_dev, ino});
  }
  bool reads_heap_of(pid_t pid) const override;
  void recheck(uint64_t now_ms) override { rates_.recheck(now_ms); }
  void restore() override { rates_.restore_all(); }
  std::vector<std::string> probed_heaps() const override;
  uint64_t programs_unread() const override { return unsampled_.count; }

  // A process runs a Go program given the rate system-wide: so is it,
  // held at its exec, before its runtime starts.
  void on_program(pid_t pid, uint32_t kernel_dev, uint64_t ino) override;
  // Without BPF: a process with a ring, whose Go heap goes unread.
  void on_process(pid_t pid) override;
  // Its image's rate is nothing to restore (a new image of the same
  // program is set anew).
  void forget(pid_t pid) override { rates_.forget(pid); }

  void add_counters(KernelCounters kernel, std::vector<std::pair<std::string, uint64_t>>& out) const override;
  std::vector<std::string> warnings(KernelCounters kernel) const override;

 private:
  using FileKey = std::pair<uint32_t, uint64_t>;  // kernel device, inode
  struct Programs {
    uint64_t count = 0;
    std::vector<std::string> names;
  };
  // The runtime route for a program whose MemProfileRate is 0: its rate
  // set, or (when it cannot be) its calls sampled instead. Under
  // system-wide probes the route is the file's: every process that runs it
  // is given the rate, held at its exec, and the file's process now.
  void set_rate(const ProbedFile& file, std::vector<ProbeTarget>& targets,
                const std::vector<ProbeTarget>& found, GoHeapChoice& choice);
  void set_rate_of(pid_t pid, const GoRateSite& site);
  void note_program(const ProbedFile& file, const GoHeapChoice& c);
  // Each program's slot in the kernel's go_profiles (made when new), named
  // by its targets' cookies; why not, when the table is full.
  std::string place_slots(std::vector<ProbeTarget>& targets);
  // Blocks the program's runtime sampled (its probe's entries), as the kernel counted.
  uint64_t calls_of(const as_go_profile& g) const;
  Programs unsampled_by_runtime() const;

  RuntimeSettings settings_;
  BpfSession* session_;
  bool off_, by_calls_;
  std::optional<KernelMap<uint32_t, as_go_profile>> profiles_;  // bpf/go.bpf.h's go_profiles
  std::map<std::array<uint64_t, 8>, uint32_t> slots_;           // by what the probe is told, not its count
  GoRates rates_;
  std::map<FileKey, GoRateSite> rate_files_;  // system-wide: the programs each process is given it in
  size_t rates_refused_ = 0;
  std::map<FileKey, GoHeapChoice> choices_;                            // of the files met, until probed
  std::map<FileKey, std::string> files_;                               // Go programs met, their release
  Programs profiled_, sampled_, unsampled_;                            // ... by route
  std::map<FileKey, std::pair<std::string, as_go_profile>> runtimes_;  // read by their runtime: its program
  // Without BPF (no session): programs whose processes had a ring.
  std::set<std::pair<uint64_t, uint64_t>> seen_;
  Programs unread_without_bpf_;
};

std::unique_ptr<Runtime> make_go_runtime(const RuntimeServices& services);

}  // namespace allocscope
