#include "symbols/stack_walk.h"

#include <cstring>

namespace allocscope {

int StackCopy::read(uint64_t addr, uint64_t* out) {
  if (addr < sp_ || addr - sp_ > bytes_.size() || bytes_.size() - (addr - sp_) < sizeof *out) return -1;
  std::memcpy(out, bytes_.data() + (addr - sp_), sizeof *out);
  return 0;
}

int continue_walk(as_unwind_regs regs, uint64_t stack_end, RowLookup& rows, UnwindMemory& mem,
                  std::vector<uint64_t>& ips, size_t max_frames) {
  // A return address: the call is before it. Frame 0's pc, the allocator's
  // return into its caller, is where that caller resumes.
  std::optional<as_unwind_row> row = rows.row(ips.size() == 1 ? regs.ip : regs.ip - 1);
  if (!row) return AS_STOP_BAD_IP;
  for (;;) {
    if (int stop = as_unwind_step(&*row, &regs, stack_end, &mem); stop != AS_STOP_NONE) return stop;
    if (ips.size() >= max_frames) return AS_STOP_DEPTH;
    row = rows.row(regs.ip - 1);  // the caller's pc must be code, as the kernel checks
    if (!row) return AS_STOP_BAD_IP;
    ips.push_back(regs.ip);
  }
}

}  // namespace allocscope
