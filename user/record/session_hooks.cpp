#include "record/session_hooks.h"

#include "symbols/stack_walk.h"

namespace allocscope {

void SessionUnwind::need_table(uint32_t tgid, const as_vma& vma) { tables_.on_request(pid_t(tgid), vma); }

int SessionUnwind::finish_walk(uint32_t tgid, const as_deferred_walk& w, std::span<const uint8_t> stack,
                               std::vector<uint64_t>& ips) {
  symbolizer_.refresh(pid_t(tgid));  // rare (a table was missing): the newest mappings
  ProcessRows rows(tables_, pid_t(tgid), symbolizer_.maps(pid_t(tgid)));
  StackCopy mem(w.sp, stack);
  return continue_walk({w.ip, w.sp, w.bp, w.bp_lost, 0}, w.stack_end, rows, mem, ips);
}

}  // namespace allocscope
