// LibraryDiscovery's side of Go programs whose runtime samples their heap
// once its MemProfileRate is set (memory profiling linked out): which route
// each program's file takes, and each process given the rate.
#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "host/process.h"
#include "record/clocks.h"
#include "record/discovery/library_discovery.h"
#include "record/messages.h"

namespace allocscope {

void LibraryDiscovery::set_go_rate(pid_t pid, FileKey key, const std::string& path,
                                   std::vector<ProbeTarget>& targets, const std::vector<ProbeTarget>& found,
                                   GoHeapChoice& go_heap) {
  auto profile =
      std::find_if(targets.begin(), targets.end(), [](const ProbeTarget& t) { return t.go_profile; });
  Result<void> set = fail("no runtime.MemProfileRate");
  if (profile != targets.end()) {
    GoRateSite site{path, key.second, profile->go_profile->rate, profile->go_linked_out_switch};
    if (system_wide_ && !site.linked_out_switch) {
      // A process caught at its exec would have the rate put back to 0 by its runtime's start.
      set = fail("runtime.disableMemoryProfiling was not found");
    } else if (system_wide_) {
      go_rate_files_.try_emplace(key, site);
      session_.prepare_at_exec(kernel_dev(key), key.second);
      set_go_rate_of(pid, site);  // one yet to run it is given it at its exec
      return;
    } else {
      set = go_rates_.set(pid, site, rate_, now_ms());
    }
  }
  if (set) return;
  targets = found;
  go_heap = pick_go_heap(targets, rate_, true, false);
  go_heap.why_calls = "its MemProfileRate (0) could not be set: " + set.error().message;
}

void LibraryDiscovery::on_program_start(uint32_t tgid, uint32_t kernel_dev, uint64_t ino) {
  auto site = go_rate_files_.find(file_key(kernel_dev, ino));
  if (site == go_rate_files_.end()) return;
  session_.prepare_at_exec(kernel_dev, ino);  // again: the kernel's table of files forgets the oldest
  set_go_rate_of(pid_t(tgid), site->second);
}

void LibraryDiscovery::set_go_rate_of(pid_t pid, const GoRateSite& site) {
  auto set = go_rates_.set(pid, site, rate_, now_ms());
  // ESRCH: it runs another program (a launched command before its exec), or ended.
  if (set || set.error().code == ESRCH || !process_exists(pid)) return;
  if (++go_rates_refused_ <= kMissedNamed)
    print_error("warning: process " + std::to_string(pid) + " (" + read_comm(pid) +
                "): its Go heap is not read: " + set.error().message);
}

void LibraryDiscovery::recheck_go_rates() { go_rates_.recheck(now_ms()); }

LibraryDiscovery::GoPrograms LibraryDiscovery::go_unsampled_by_runtime() const {
  GoPrograms quiet;
  for (const auto& [key, program] : go_runtime_files_)
    if (session_.go_profile_calls(program.second) == 0 && ++quiet.count <= kMissedNamed)
      quiet.names.push_back(program.first);
  return quiet;
}

}  // namespace allocscope
