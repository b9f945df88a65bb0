// A recording without BPF sees only the processes that load the preload
// library. Those of the launched tree that run without it (a static or
// set-id program, a program whose environment was cleared on the way) are
// not recorded: this finds them, so that the summary names them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace allocscope {

class UntracedProcesses {
 public:
  // Looks at the descendants of `root` (at most once a second): a process
  // found twice in a row without `library` mapped runs untraced. (Once: it
  // may be the dynamic loader's first instants, before it maps preloads;
  // the second look comes 100 ms later, so a short program is still seen.)
  void look(pid_t root, const std::string& library, uint64_t now_ms);
  uint64_t count() const { return count_; }
  // "N processes ... not recorded: a, b", or "" when none.
  std::string summary() const;

  static constexpr size_t kMaxNames = 8;
  static constexpr size_t kMaxKnown = 1 << 16;  // processes remembered; all forgotten beyond

 private:
  // A program a process runs: its pid, its start (process_start_time: pids
  // are reused) and its executable (an exec keeps the other two: `env -i`
  // maps the library, the program it runs may not).
  using Key = std::tuple<pid_t, double, std::string>;
  uint64_t last_ms_ = 0;
  std::set<Key> judged_;
  std::map<Key, int> without_;  // seen without the library, how many times
  uint64_t count_ = 0;
  std::vector<std::string> names_;
};

}  // namespace allocscope
