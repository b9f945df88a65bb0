// The kernel's stack walk (walk_frame in bpf/allocscope.bpf.c) in
// userspace, over a copy of the stack: it finishes the walks the kernel
// stopped for want of an unwind table (AS_STOP_NO_TABLE), with the same
// step, once the table is built. Pure logic: rows and memory come from the
// caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "symbols/unwind_step.h"

namespace allocscope {

class RowLookup {
 public:
  virtual ~RowLookup() = default;
  // The row for code address `pc`; nullopt when no executable mapping holds
  // it (a return address that is not one).
  virtual std::optional<as_unwind_row> row(uint64_t pc) = 0;
};

// Stack bytes copied from `sp` upwards.
class StackCopy : public UnwindMemory {
 public:
  StackCopy(uint64_t sp, std::span<const uint8_t> bytes) : sp_(sp), bytes_(bytes) {}
  int read(uint64_t addr, uint64_t* out) override;

 private:
  uint64_t sp_;
  std::span<const uint8_t> bytes_;
};

// Walks on from the frame whose registers are `regs` (already the last of
// `ips`, which holds the frames found so far, innermost first), appending
// callers until the walk ends or `ips` holds max_frames; returns why it
// ended (enum as_stop, never AS_STOP_NONE). `first`: that frame's pc is
// where the walk began (a probe's), not a return address.
int continue_walk(as_unwind_regs regs, uint64_t stack_end, RowLookup& rows, UnwindMemory& mem,
                  std::vector<uint64_t>& ips, bool first, size_t max_frames = AS_MAX_FRAMES);

// A walk the kernel deferred while it was still leaving out the first
// frames (as_deferred_walk's skip, until, until_end, also, also_end,
// own_found and steps): removes them from ips[from...], ips[from] being
// frame `steps` of the walk. False when no frame's call lies in either
// range within the walk's first 8 (every frame from `from` on is then
// removed).
bool leave_out_own_frames(std::vector<uint64_t>& ips, size_t from, const as_deferred_walk& w);

}  // namespace allocscope
