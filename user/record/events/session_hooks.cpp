#include "record/events/session_hooks.h"

#include <chrono>

#include "symbols/stack_walk.h"

namespace allocscope {

void SessionUnwind::need_table(uint32_t tgid, const as_vma& vma) { tables_.on_request(pid_t(tgid), vma); }

int SessionUnwind::finish_walk(uint32_t tgid, const as_deferred_walk& w, std::span<const uint8_t> stack,
                               std::vector<uint64_t>& ips, bool may_wait) {
  StackCopy mem(w.sp, stack);
  size_t known = ips.size();
  std::optional<as_file_key> file;
  auto walk = [&] {
    ProcessRows rows(tables_, pid_t(tgid), symbolizer_.maps(pid_t(tgid)));
    int stop =
        continue_walk({w.ip, w.sp, w.bp, w.bp_lost, w.ip_exact}, w.stack_end, rows, mem, ips, w.steps == 0);
    file = rows.waits_for();
    return stop;
  };
  int stop = walk();
  if (stop == AS_STOP_BAD_IP && !file) {  // code mapped since the maps were read (dlopen)?
    ips.resize(known);
    symbolizer_.refresh(pid_t(tgid));
    stop = walk();
  }
  if (!file || !may_wait) {
    // The kernel was still leaving out the sampler's own frames (its stopped frame among them).
    bool own = w.skip || w.until_end;
    if (own && !leave_out_own_frames(ips, known - 1, w)) stop = AS_STOP_BAD_FRAME;
    return file ? AS_STOP_NO_TABLE : stop;  // no table: cut where it was not in yet
  }
  ips.resize(known);                      // done again from the start once the table is in
  constexpr size_t kMaxProcesses = 4096;  // beyond: forgotten (an exec then cuts its walks at once)
  if (waits_.size() >= kMaxProcesses && !waits_.contains(tgid)) waits_.clear();
  std::vector<as_file_key>& files = waits_[tgid];
  if (files.size() < 16) files.push_back(*file);
  return kWalkWaits;
}

void SessionUnwind::wait_for_walks(uint32_t tgid, uint64_t max_ms) {
  auto it = waits_.find(tgid);
  if (it == waits_.end()) return;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  for (const as_file_key& file : it->second) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() > 0) tables_.wait_for(file, uint64_t(left.count()));
  }
  waits_.erase(it);
}

}  // namespace allocscope
