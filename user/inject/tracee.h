// One thread of another process under ptrace, seized (PTRACE_SEIZE: it
// does not stop, nothing else of the process is traced) for the time of an
// injection. Only the thread that seized it may act on it. Released by its
// destructor whatever happened: a thread still running is stopped first, as
// PTRACE_DETACH needs, and a thread that is gone is forgotten.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace allocscope::inject {

using Deadline = std::chrono::steady_clock::time_point;

struct Stop {
  enum Kind : uint8_t {
    Interrupt,     // PTRACE_EVENT_STOP: our PTRACE_INTERRUPT (or a group stop: group_stop set)
    SyscallEntry,  // syscall_nr: about to run
    SyscallExit,   // the call returned (rax)
    Signal,        // a signal is to be delivered: `signal`
    Exec,          // the process ran another program
    Gone,          // the thread exited or was killed
  };
  Kind kind = Interrupt;
  int signal = 0;
  long syscall_nr = -1;
  bool group_stop = false;
};

class Tracee {
 public:
  // EPERM when ptrace is refused (Yama, another tracer, no capability),
  // ESRCH when the thread is gone.
  static Result<Tracee> seize(pid_t tid);
  Tracee(Tracee&& o) noexcept;
  Tracee& operator=(Tracee&&) = delete;
  Tracee(const Tracee&) = delete;
  ~Tracee();

  pid_t tid() const { return tid_; }
  bool stopped() const { return stopped_; }

  // Stops the thread (PTRACE_INTERRUPT) and waits for that stop; a stop of
  // another kind on the way (a signal to deliver) is returned instead.
  Result<Stop> interrupt(Deadline deadline);
  // Resumes it to its next system call stop (PTRACE_SYSCALL), delivering
  // `signal`, and waits for its next stop.
  Result<Stop> resume_to_syscall(int signal, Deadline deadline);

  Result<user_regs_struct> registers() const;
  Result<void> set_registers(const user_regs_struct& r);
  // The XSAVE image (PTRACE_GETREGSET NT_X86_XSTATE).
  Result<std::vector<uint8_t>> xstate() const;
  Result<void> set_xstate(std::span<const uint8_t> image);
  Result<uint64_t> signal_mask() const;
  Result<void> set_signal_mask(uint64_t mask);

  // Lets the thread go from its stop (or stops it first), delivering
  // `signal` if not 0 (a signal-delivery stop's own).
  void release(int signal = 0);

 private:
  explicit Tracee(pid_t tid) : tid_(tid) {}
  Result<Stop> wait_stop(Deadline deadline);
  // Collects the exit of a thread killed while attached: a traced thread's
  // exit is its tracer's to collect, and until then its process cannot be
  // reaped by its parent (whose wait would hang for as long as allocscope
  // runs).
  void reap(Deadline deadline);
  pid_t tid_ = -1;
  bool attached_ = false;
  bool stopped_ = false;
};

}  // namespace allocscope::inject
