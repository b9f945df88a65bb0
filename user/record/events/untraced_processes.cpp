#include "record/events/untraced_processes.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "host/process.h"

namespace allocscope {

namespace {

// Whether the process maps the library (or is gone: then not judged).
bool maps_library(pid_t pid, const std::string& library) {
  auto maps = read_maps(pid);
  if (!maps) return true;
  return std::any_of(maps->begin(), maps->end(), [&](const Mapping& m) { return m.path == library; });
}

}  // namespace

void UntracedProcesses::look(pid_t root, const std::string& library, uint64_t now_ms) {
  // A process seen once without the library is looked at again soon: a
  // loader maps its preloads within milliseconds of the exec.
  if (now_ms < last_ms_ + (without_.empty() ? 1000 : 100)) return;
  last_ms_ = now_ms;
  if (judged_.size() >= kMaxKnown) judged_.clear();
  std::map<Key, int> still;
  for (pid_t pid : descendants_of({root})) {
    std::error_code ec;
    Key key{pid, process_start_time(pid),
            std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string()};
    if (std::get<1>(key) == 0 || ec || judged_.contains(key)) continue;
    if (maps_library(pid, library)) {
      judged_.insert(key);
      continue;
    }
    auto seen = without_.find(key);
    if (seen == without_.end()) {
      still[key] = 1;
      continue;
    }
    judged_.insert(key);
    ++count_;
    std::string comm = read_comm(pid);
    if (names_.size() < kMaxNames && std::find(names_.begin(), names_.end(), comm) == names_.end())
      names_.push_back(comm);
  }
  without_ = std::move(still);
}

std::string UntracedProcesses::summary() const {
  if (!count_) return "";
  std::string names;
  for (const std::string& n : names_) names += (names.empty() ? "" : ", ") + n;
  return std::to_string(count_) + (count_ == 1 ? " process" : " processes") +
         " of the command ran without the preload library (static or set-id, or its environment "
         "cleared), not recorded: " +
         names;
}

}  // namespace allocscope
