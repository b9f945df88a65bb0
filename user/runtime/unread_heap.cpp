#include "runtime/unread_heap.h"

#include "host/process.h"

namespace allocscope {

std::string UnreadHeapRuntime::runtime_file(std::span<const Mapping> maps) const {
  for (const Mapping& m : maps) {
    std::string_view name = std::string_view(m.path).substr(m.path.rfind('/') + 1);
    if (m.is_file() && runs_it_(name)) return std::string(name);
  }
  return "";
}

// The mappings the kernel read with the stack (none for a stack walked in
// process), and the process's as last read: those looked at again only when
// they grew (the loader maps libjvm.so after exec).
void UnreadHeapRuntime::place_frames(pid_t pid, std::span<const Mapping> kernel_maps,
                                     std::span<const uint8_t> /*runtime_part*/, uint16_t /*fn*/,
                                     std::vector<uint64_t>& /*ips*/) {
  if (judged_.contains(pid)) return;
  std::string file = runtime_file(kernel_maps);
  if (file.empty()) {
    const std::vector<Mapping>& maps = symbolizer_.maps(pid);
    auto looked = looked_.find(pid);
    if (looked != looked_.end() && looked->second == maps.size()) return;
    if ((file = runtime_file(maps)).empty()) {
      if (looked != looked_.end())
        looked->second = maps.size();
      else if (looked_.size() < kMaxPids)
        looked_.emplace(pid, maps.size());
      return;
    }
  }
  looked_.erase(pid);
  if (judged_.size() >= kMaxPids) {  // bounded: the note says "at least"
    more_ = true;
    return;
  }
  judged_.insert(pid);
  if (named_.size() < kMaxNamed) {  // by its runtime's file once it has ended
    std::string comm = read_comm(pid);
    named_.push_back((comm.empty() ? file : comm) + " " + std::to_string(pid));
  }
}

void UnreadHeapRuntime::add_counters(KernelCounters /*kernel*/,
                                     std::vector<std::pair<std::string, uint64_t>>& out) const {
  if (!judged_.empty()) out.emplace_back(words_.room + "_heap_unread_processes", judged_.size());
}

std::vector<std::string> UnreadHeapRuntime::warnings(KernelCounters /*kernel*/) const {
  if (judged_.empty()) return {};
  std::string who;
  for (const std::string& n : named_) who += (who.empty() ? "" : ", ") + n;
  if (judged_.size() > named_.size()) who += ", ...";
  return {"note: " + words_.room + ": " + words_.heap + " of " + (more_ ? "at least " : "") +
          std::to_string(judged_.size()) + " process(es) (" + who + ") is not read: " + words_.counted};
}

}  // namespace allocscope
