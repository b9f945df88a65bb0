#include "inject/stop_state.h"

#include <sys/syscall.h>

#include <cerrno>

namespace allocscope::inject {
namespace {

// The kernel's own codes (include/linux/errno.h), never seen by programs.
constexpr long kErestartSys = 512, kErestartNoIntr = 513, kErestartNoHand = 514, kErestartRestartBlock = 516;
constexpr uint64_t kSyscallInsnBytes = 2;  // 0f 05

long as_signed(unsigned long long v) { return static_cast<long>(v); }

}  // namespace

StopPlace stop_place(const user_regs_struct& r) {
  if (as_signed(r.orig_rax) < 0) return StopPlace::UserCode;
  switch (-as_signed(r.rax)) {
    case kErestartSys:
    case kErestartNoIntr:
    case kErestartNoHand:
      return StopPlace::SyscallRestart;
    case kErestartRestartBlock:
      return StopPlace::SyscallRestartBlock;
    case EINTR:
      return StopPlace::SyscallInterrupted;
    default:
      return StopPlace::SyscallDone;
  }
}

user_regs_struct resumed_registers(const user_regs_struct& stopped, bool restart_block_intact,
                                   bool reissue_interrupted) {
  user_regs_struct r = stopped;
  switch (stop_place(stopped)) {
    case StopPlace::SyscallRestartBlock:
      r.rip -= kSyscallInsnBytes;
      r.rax = restart_block_intact ? SYS_restart_syscall : stopped.orig_rax;
      break;
    case StopPlace::SyscallRestart:
      r.rip -= kSyscallInsnBytes;
      r.rax = stopped.orig_rax;
      break;
    case StopPlace::SyscallInterrupted:
      if (reissue_interrupted) {
        r.rip -= kSyscallInsnBytes;
        r.rax = stopped.orig_rax;
      }
      break;
    case StopPlace::UserCode:
    case StopPlace::SyscallDone:
      break;
  }
  r.orig_rax = static_cast<unsigned long long>(-1);
  return r;
}

bool resumable_from_registers(const user_regs_struct& r) {
  if (as_signed(r.orig_rax) != SYS_restart_syscall) return true;
  StopPlace place = stop_place(r);
  return place == StopPlace::UserCode || place == StopPlace::SyscallDone;
}

bool stopped_in_allocator_syscall(const user_regs_struct& r) {
  switch (as_signed(r.orig_rax)) {
    case SYS_mmap:
    case SYS_munmap:
    case SYS_mremap:
    case SYS_brk:
    case SYS_madvise:
    case SYS_mprotect:
      return true;
    default:
      return false;
  }
}

}  // namespace allocscope::inject
