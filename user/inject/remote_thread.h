// A thread of another process, stopped and borrowed to run calls: a
// function of the process's own (dlopen, allocscope's library's entry
// points) or a system call. Each call runs on the thread's own stack below
// its red zone, with every signal blocked, and returns into rt_sigreturn
// over a frame that holds the thread's state (signal_frame.h): allocscope
// catches that rt_sigreturn at its entry, skips it and puts the thread back
// itself, restart block included; were allocscope gone, the kernel would
// put it back from the frame. A call that faults is abandoned and the
// fault never delivered. The thread is given back as it was, its
// interrupted system call restarted as the kernel restarts one.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/result.h"
#include "inject/seccomp_check.h"
#include "inject/stop_state.h"
#include "inject/tracee.h"

namespace allocscope::inject {

// Code of the target's C library that a call uses.
struct Gadgets {
  uint64_t restorer = 0;     // mov $15,%rax; syscall (its sigreturn trampoline)
  uint64_t syscall_ret = 0;  // syscall; ret
};

struct Call {
  uint64_t function = 0;  // called with `args` (System V), unless
  long syscall = -1;      // >= 0: this system call is made with `args`
  std::array<uint64_t, 6> args{};
  std::vector<uint8_t> data;  // on the stack during the call (data_address()); read back after
};

struct CallResult {
  long syscall_result = 0;
  std::vector<uint8_t> data;
  uint32_t syscalls = 0;  // the system calls the call made
};

// Whether the thread may be borrowed where it stopped.
struct Borrowing {
  std::function<bool(const user_regs_struct&)> fits;
  // Whether a signal the program handles waits for the thread: then an
  // epoll_wait (or another call never restarted) that the stop failed with
  // EINTR fails so; else it is made again when given back.
  std::function<bool()> signal_waits;
  // The lowest address a frame may use below stack pointer sp (its stack
  // mapping's start); 0 when sp is on no stack allocscope may write to.
  std::function<uint64_t(uint64_t sp)> stack_low;
  int64_t errno_tpoff = 0;  // errno's offset from the thread pointer: kept across the calls (0: unknown)
};

class RemoteThread {
 public:
  // Seizes and stops thread `tid`; fails (and lets it go as it was) when
  // it stopped somewhere `borrowing.fits` refuses.
  static Result<RemoteThread> take(pid_t pid, pid_t tid, const Gadgets& gadgets, Borrowing borrowing,
                                   Deadline deadline);
  RemoteThread(RemoteThread&&) noexcept = default;
  ~RemoteThread() { give_back(); }

  pid_t tid() const { return tracee_.tid(); }
  StopPlace place() const { return place_; }
  // Where a call's data of `bytes` bytes lies during the call.
  uint64_t data_address(size_t bytes) const;
  // Runs a call; the thread stays borrowed for the next one. A call that
  // does not end by the deadline is left to end on its own, and the thread
  // let go: nothing more may be run.
  Result<CallResult> run(const Call& call, Deadline deadline);
  // Puts the thread back as it was and lets it go (also by the destructor).
  void give_back();
  // Why the thread's seccomp filters keep an entry out ("" when they do not).
  const std::string& seccomp_refusal() const { return seccomp_.refused; }

 private:
  RemoteThread(pid_t pid, Tracee tracee) : pid_(pid), tracee_(std::move(tracee)) {}
  Result<void> start_call(const Call& call, uint64_t frame);
  Result<void> park(Deadline deadline);
  void restore_in_signal_stop();
  pid_t pid_;
  Tracee tracee_;
  Gadgets gadgets_;
  Borrowing borrowing_;
  user_regs_struct stopped_{};
  std::vector<uint8_t> xstate_;
  uint64_t sigmask_ = 0;
  StopPlace place_ = StopPlace::UserCode;
  bool reissue_ = true;
  SeccompVerdict seccomp_;
  uint64_t errno_address_ = 0;  // the thread's errno, and its value when stopped
  int32_t errno_ = 0;
  void restore_errno();
  bool after_sigreturn_ = false;  // parked at the exit of a call's rt_sigreturn, run (skips refused)
  uint64_t stack_low_ = 0;
  bool in_syscall_entry_ = false;  // parked at a skipped rt_sigreturn, else at the first stop
  bool given_back_ = false;
};

}  // namespace allocscope::inject
