// Where a thread stopped by PTRACE_INTERRUPT stood, told from its
// registers alone, and the registers that let it go on as the kernel would
// have let it: a system call the stop interrupted is restarted as after a
// signal that ran no handler. Pure: no ptrace here.
#pragma once

#include <sys/user.h>

#include <cstdint>

namespace allocscope::inject {

enum class StopPlace : uint8_t {
  UserCode,             // between instructions, in no system call
  SyscallDone,          // a system call had returned; the stop came on its way out
  SyscallRestart,       // -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND: the call is made again
  SyscallRestartBlock,  // -ERESTART_RESTARTBLOCK: restart_syscall() goes on with what is left
  SyscallInterrupted,   // -EINTR: a call that is never restarted (epoll_wait, sigtimedwait, ...)
};

StopPlace stop_place(const user_regs_struct& r);

// How a stopped thread's registers are handed back. Restart rules as the
// kernel's arch_do_signal_or_restart: the syscall instruction again, with
// its number in rax (restart_syscall's where the interrupted call left a
// restart block and `restart_block_intact`: an rt_sigreturn clears it).
// An interrupted (-EINTR) call is made again when `reissue_interrupted`:
// it failed only because of the stop. orig_rax is -1 in the result: the
// registers stand on their own, nothing the kernel restarts on top.
user_regs_struct resumed_registers(const user_regs_struct& stopped, bool restart_block_intact,
                                   bool reissue_interrupted);

// Whether registers alone can make the interrupted call again, as a call's
// frame must when its rt_sigreturn puts the thread back: not inside
// restart_syscall, whose call only its restart block names (and that
// rt_sigreturn forgets the block: the program would see EINTR).
bool resumable_from_registers(const user_regs_struct& r);

// Whether the thread stopped inside a system call that an allocator makes
// while it holds its locks (mmap, munmap, brk, madvise, ...): not a place to
// call into the C library from.
bool stopped_in_allocator_syscall(const user_regs_struct& r);

}  // namespace allocscope::inject
