#include "runtime/unread_heap.h"

#include "host/proc_maps.h"
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
  if (judged_.contains(pid) || read_.contains(pid)) return;
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
  judge(pid, file);
}

void UnreadHeapRuntime::judge(pid_t pid, const std::string& file) {
  if (judged_.contains(pid) || read_.contains(pid)) return;
  if (judged_.size() >= kMaxPids) {  // bounded: the note says "at least"
    more_ = true;
    return;
  }
  std::string comm = read_comm(pid);  // by its runtime's file once it has ended
  judged_[pid].name = (comm.empty() ? file : comm) + " " + std::to_string(pid);
  found(pid);
}

bool UnreadHeapRuntime::runs_now(pid_t pid) const {
  auto text = read_text_file("/proc/" + std::to_string(pid) + "/maps");
  return text && !runtime_file(parse_maps(*text)).empty();
}

void UnreadHeapRuntime::heap_read(pid_t pid) {
  judged_.erase(pid);
  looked_.erase(pid);
  if (read_.size() < kMaxPids) read_.insert(pid);  // past it: not named unread again until a sample says
}

void UnreadHeapRuntime::heap_unread(pid_t pid, const std::string& why) {
  if (read_.contains(pid)) return;
  auto it = judged_.find(pid);
  if (it == judged_.end()) {
    if (judged_.size() >= kMaxPids) return;
    std::string comm = read_comm(pid);
    it = judged_.emplace(pid, Judged{(comm.empty() ? words_.room : comm) + " " + std::to_string(pid), ""})
             .first;
  }
  it->second.why = why;
}

void UnreadHeapRuntime::add_counters(KernelCounters /*kernel*/,
                                     std::vector<std::pair<std::string, uint64_t>>& out) const {
  if (!judged_.empty()) out.emplace_back(words_.room + "_heap_unread_processes", judged_.size());
}

std::string UnreadHeapRuntime::note(const std::string& why, const std::vector<std::string>& who,
                                    size_t count) const {
  std::string names;
  for (const std::string& n : who) names += (names.empty() ? "" : ", ") + n;
  if (count > who.size()) names += ", ...";
  return "note: " + words_.room + ": " + words_.heap + " of " + (more_ && why.empty() ? "at least " : "") +
         std::to_string(count) + " process(es) (" + names +
         ") is not read: " + (why.empty() ? "" : why + "; ") + words_.counted;
}

std::vector<std::string> UnreadHeapRuntime::warnings(KernelCounters /*kernel*/) const {
  std::map<std::string, std::pair<std::vector<std::string>, size_t>> by_why;  // a note per reason
  for (const auto& [pid, j] : judged_) {
    auto& [who, count] = by_why[j.why.empty() ? words_.why : j.why];
    if (who.size() < kMaxNamed) who.push_back(j.name);
    ++count;
  }
  std::vector<std::string> out;
  for (const auto& [why, named] : by_why) out.push_back(note(why, named.first, named.second));
  return out;
}

}  // namespace allocscope
