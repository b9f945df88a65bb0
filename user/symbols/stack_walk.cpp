#include "symbols/stack_walk.h"

#include <algorithm>
#include <cstring>

namespace allocscope {

int StackCopy::read(uint64_t addr, uint64_t* out) {
  if (addr < sp_ || addr - sp_ > bytes_.size() || bytes_.size() - (addr - sp_) < sizeof *out) return -1;
  std::memcpy(out, bytes_.data() + (addr - sp_), sizeof *out);
  return 0;
}

int continue_walk(as_unwind_regs regs, uint64_t stack_end, RowLookup& rows, UnwindMemory& mem,
                  std::vector<uint64_t>& ips, bool first, size_t max_frames) {
  // A return address: the call is before it. Frame 0's pc, the allocator's
  // return into its caller, is where that caller resumes; so is a pc a signal
  // interrupted.
  std::optional<as_unwind_row> row = rows.row(first || regs.ip_exact ? regs.ip : regs.ip - 1);
  if (!row) return AS_STOP_BAD_IP;
  for (;;) {
    if (int stop = as_unwind_step(&*row, &regs, stack_end, &mem); stop != AS_STOP_NONE) return stop;
    if (ips.size() >= max_frames) return AS_STOP_DEPTH;
    row = rows.row(regs.ip_exact ? regs.ip
                                 : regs.ip - 1);  // the caller's pc must be code, as the kernel checks
    if (!row) return AS_STOP_BAD_IP;
    ips.push_back(regs.ip);
  }
}

bool leave_out_own_frames(std::vector<uint64_t>& ips, size_t from, const as_deferred_walk& w) {
  if (from > ips.size()) return true;
  auto first = ips.begin() + ptrdiff_t(from);
  if (w.until_end == 0) {
    ips.erase(first, first + ptrdiff_t(std::min<size_t>(w.skip, ips.size() - from)));
    return true;
  }
  // As the kernel's walk (walk_frame, AS_MAX_OWN_FRAMES).
  constexpr size_t kMaxOwnFrames = 8;
  bool found = w.own_found != 0;
  for (size_t i = from, step = w.steps; i < ips.size(); ++i, ++step) {
    uint64_t at = step == 0 ? ips[i] : ips[i] - 1;
    bool own = step > 0 && ((at >= w.until && at < w.until_end) || (at >= w.also && at < w.also_end));
    if (own) {
      found = true;
    } else if (found) {
      ips.erase(first, ips.begin() + ptrdiff_t(i));
      return true;
    } else if (step >= kMaxOwnFrames) {
      break;
    }
  }
  ips.erase(first, ips.end());
  return found;
}

}  // namespace allocscope
