#include "inject/remote_thread.h"

#include <sys/syscall.h>

#include <cerrno>
#include <csignal>
#include <string>

#include "host/process_memory.h"
#include "inject/signal_frame.h"

namespace allocscope::inject {
namespace {

constexpr unsigned long long kDirectionFlag = 0x400, kTrapFlag = 0x100;
constexpr uint64_t kAllSignals = ~uint64_t{0};

std::string thread_name(pid_t pid, pid_t tid) {
  return "thread " + std::to_string(tid) + " of process " + std::to_string(pid);
}

}  // namespace

Result<RemoteThread> RemoteThread::take(pid_t pid, pid_t tid, const Gadgets& gadgets, Borrowing borrowing,
                                        Deadline deadline) {
  auto tracee = Tracee::seize(tid);
  if (!tracee) return fail(tracee.error());
  RemoteThread t(pid, std::move(*tracee));
  t.gadgets_ = gadgets;
  t.borrowing_ = std::move(borrowing);
  auto stop = t.tracee_.interrupt(deadline);
  if (!stop) return fail(stop.error());
  if (stop->kind == Stop::Gone) return fail(thread_name(pid, tid) + " exited", ESRCH);
  auto regs = t.tracee_.registers();
  if (!regs) return fail(regs.error());
  t.stopped_ = *regs;
  t.place_ = stop_place(*regs);
  // Read before the thread may be given back: where restart_syscall is
  // refused, even a stop's own restart must be done another way.
  auto seccomp = check_seccomp(tid);
  if (!seccomp) {
    t.given_back_ = true;
    t.tracee_.release(stop->kind == Stop::Signal ? stop->signal : 0);
    return fail(seccomp.error());
  }
  t.seccomp_ = *seccomp;
  if (stop->kind != Stop::Interrupt || stop->group_stop) {
    // A signal on its way, or the process stopped by one: not borrowed.
    t.given_back_ = true;
    t.tracee_.release(stop->kind == Stop::Signal ? stop->signal : 0);
    return fail(thread_name(pid, tid) + " stopped for a signal", EAGAIN);
  }
  t.reissue_ = !(t.place_ == StopPlace::SyscallInterrupted && t.borrowing_.signal_waits());
  t.stack_low_ = t.borrowing_.stack_low(regs->rsp);
  if (!resumable_from_registers(*regs) || !t.borrowing_.fits(*regs) || !t.stack_low_) {
    t.give_back();
    return fail(thread_name(pid, tid) + " stopped where no call may be made", EAGAIN);
  }
  auto xstate = t.tracee_.xstate();
  auto mask = t.tracee_.signal_mask();
  if (!xstate || !mask) {
    t.give_back();
    return fail(!xstate ? xstate.error() : mask.error());
  }
  t.xstate_ = std::move(*xstate);
  t.sigmask_ = *mask;
  if (t.borrowing_.errno_tpoff &&
      read_process_memory(pid, regs->fs_base + uint64_t(t.borrowing_.errno_tpoff),
                          {reinterpret_cast<uint8_t*>(&t.errno_), sizeof t.errno_}))
    t.errno_address_ = regs->fs_base + uint64_t(t.borrowing_.errno_tpoff);
  return t;
}

uint64_t RemoteThread::data_address(size_t bytes) const {
  return lay_out_frame(stopped_.rsp, xstate_.size(), bytes).data;
}

Result<void> RemoteThread::start_call(const Call& call, uint64_t frame) {
  user_regs_struct r = stopped_;
  const auto& a = call.args;
  r.rdi = a[0], r.rsi = a[1], r.rdx = a[2];
  r.r8 = a[4], r.r9 = a[5];
  if (call.syscall >= 0) {
    r.rip = gadgets_.syscall_ret;
    r.rax = static_cast<unsigned long long>(call.syscall);
    r.r10 = a[3];
  } else {
    r.rip = call.function;
    r.rax = 0;
    r.rcx = a[3];
  }
  r.rsp = frame;
  r.orig_rax = static_cast<unsigned long long>(-1);  // no restart on top, nor a syscall run at a stop
  r.eflags &= ~(kDirectionFlag | kTrapFlag);
  // Registers first: should allocscope die from here on, the call runs and
  // its frame puts everything back, the signal mask included.
  if (auto ok = tracee_.set_registers(r); !ok) return ok;
  return tracee_.set_signal_mask(kAllSignals);
}

Result<CallResult> RemoteThread::run(const Call& call, Deadline deadline) {
  if (given_back_) return fail(thread_name(pid_, tid()) + " was given back", EINVAL);
  FrameLayout layout = lay_out_frame(stopped_.rsp, xstate_.size(), call.data.size());
  if (layout.low < stack_low_)
    return fail("no room on the stack of " + thread_name(pid_, tid()) + " for a call", ENOSPC);
  // rt_sigreturn from the frame ends the call: an interrupted system call
  // is made anew there (the kernel forgets its restart block at sigreturn).
  user_regs_struct fallback = resumed_registers(stopped_, false, reissue_);
  auto bytes = frame_bytes(layout, fallback, xstate_, sigmask_, gadgets_.restorer, call.data);
  if (!write_process_memory(pid_, layout.low, bytes))
    return fail_errno("write a call's frame into " + thread_name(pid_, tid()), errno ? errno : EFAULT);
  if (auto ok = start_call(call, layout.frame); !ok) return fail(ok.error());
  in_syscall_entry_ = after_sigreturn_ = false;
  CallResult result;
  // A skipped rt_sigreturn reports its exit first: the call's own system
  // call is the one entered after.
  bool entered = false, exited = false;
  for (;;) {
    auto stop = tracee_.resume_to_syscall(0, deadline);
    if (!stop) {  // out of time: the call ends on its own, through its frame
      given_back_ = true;
      tracee_.release();
      return fail(stop.error());
    }
    switch (stop->kind) {
      case Stop::SyscallEntry: {
        ++result.syscalls;
        if (call.syscall >= 0 && stop->syscall_nr == call.syscall) entered = true;
        if (stop->syscall_nr != SYS_rt_sigreturn) break;
        auto regs = tracee_.registers();
        if (!regs) return fail(regs.error());
        if (regs->rsp != layout.frame + 8) break;  // a signal handler's own (none runs: all blocked)
        result.data.resize(call.data.size());
        if (!read_process_memory(pid_, layout.data, result.data))
          return fail_errno("read back a call's data from " + thread_name(pid_, tid()), EFAULT);
        --result.syscalls;
        if (auto parked = park(deadline); !parked) return fail(parked.error());
        return result;
      }
      case Stop::SyscallExit:
        if (entered && !exited) {
          auto regs = tracee_.registers();
          if (!regs) return fail(regs.error());
          result.syscall_result = static_cast<long>(regs->rax);
          exited = true;
        }
        break;
      case Stop::Signal:  // a fault of the call's own: abandoned, never delivered
        restore_in_signal_stop();
        return fail(thread_name(pid_, tid()) + ": the call took signal " + std::to_string(stop->signal) +
                        " and was abandoned",
                    EFAULT);
      case Stop::Interrupt:  // a group stop (SIGSTOP): the call goes on
        break;
      case Stop::Exec:
      case Stop::Gone:
        given_back_ = true;
        tracee_.release();
        return fail(thread_name(pid_, tid()) + " exited or ran another program during a call", ESRCH);
    }
  }
}

// At the entry of a call's rt_sigreturn: skipped, the thread waits there
// for the next call or its giving back. Where a seccomp filter refuses
// the skip (system call -1: its errno would overwrite the registers), the
// sigreturn runs instead and puts the thread back from its frame (a sleep
// it interrupted is made anew); the thread waits at its exit.
Result<void> RemoteThread::park(Deadline deadline) {
  if (!seccomp_.skip_refused) {
    in_syscall_entry_ = true;
    return {};
  }
  auto exit = tracee_.resume_to_syscall(0, deadline);
  if (!exit || exit->kind != Stop::SyscallExit) {
    given_back_ = true;
    tracee_.release();
    return fail(!exit ? exit.error() : Error{thread_name(pid_, tid()) + " exited during a call", ESRCH});
  }
  after_sigreturn_ = true;
  return {};
}

// The calls (the loader's failed opens, ...) may have set errno: the
// program finds it as it left it.
void RemoteThread::restore_errno() {
  if (errno_address_)
    write_process_memory(pid_, errno_address_, {reinterpret_cast<const uint8_t*>(&errno_), sizeof errno_});
}

void RemoteThread::restore_in_signal_stop() {
  // Inside get_signal, as at the first stop: the kernel's restart rules
  // apply to the registers as they were, but for an EINTR to undo.
  user_regs_struct r = stopped_;
  if ((place_ == StopPlace::SyscallInterrupted && reissue_) ||
      (place_ == StopPlace::SyscallRestartBlock && seccomp_.restart_refused))
    r = resumed_registers(stopped_, !seccomp_.restart_refused, reissue_);
  restore_errno();
  (void)tracee_.set_xstate(xstate_);
  (void)tracee_.set_signal_mask(sigmask_);
  (void)tracee_.set_registers(r);
  in_syscall_entry_ = false;
  given_back_ = true;
  tracee_.release(0);
}

void RemoteThread::give_back() {
  if (given_back_) return;
  given_back_ = true;
  if (tracee_.stopped()) restore_errno();
  if (!tracee_.stopped() || after_sigreturn_) {  // running, or put back by its frame already
    tracee_.release();
    return;
  }
  if (in_syscall_entry_) {
    // At the skipped rt_sigreturn: state first, registers last (until they
    // are set, the sigreturn would still put everything back itself).
    (void)tracee_.set_xstate(xstate_);
    (void)tracee_.set_signal_mask(sigmask_);
    (void)tracee_.set_registers(resumed_registers(stopped_, !seccomp_.restart_refused, reissue_));
  } else if ((place_ == StopPlace::SyscallInterrupted && reissue_) ||
             (place_ == StopPlace::SyscallRestartBlock && seccomp_.restart_refused)) {
    (void)tracee_.set_registers(resumed_registers(stopped_, !seccomp_.restart_refused, reissue_));
  }
  tracee_.release(0);
}

}  // namespace allocscope::inject
