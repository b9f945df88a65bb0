#include "inject/tracee.h"

#include <elf.h>
#include <sched.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>

namespace allocscope::inject {
namespace {

constexpr size_t kXstateMax = 64 * 1024;  // AMX's tiles make it 11 KiB; the kernel says how much
constexpr auto kReleaseWait = std::chrono::seconds(2);

std::string who(pid_t tid) { return "thread " + std::to_string(tid); }

}  // namespace

Result<Tracee> Tracee::seize(pid_t tid) {
  // No PTRACE_O_EXITKILL: should allocscope die, the kernel lets the thread go.
  long options = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC;
  if (ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(options)) != 0)
    return fail_errno("ptrace seize " + who(tid), errno);
  Tracee t(tid);
  t.attached_ = true;
  return t;
}

Tracee::Tracee(Tracee&& o) noexcept
    : tid_(o.tid_), attached_(std::exchange(o.attached_, false)), stopped_(o.stopped_) {}

Tracee::~Tracee() { release(); }

Result<Stop> Tracee::wait_stop(Deadline deadline) {
  // A call's next system call comes within microseconds: yielded for
  // first, then slept for, longer and longer.
  auto pause = std::chrono::microseconds(20);
  for (int spins = 0;; ++spins) {
    int status = 0;
    pid_t got = waitpid(tid_, &status, __WALL | WNOHANG);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) {  // reaped, or never ours again
        attached_ = false;
        return Stop{.kind = Stop::Gone};
      }
      return fail_errno("wait for " + who(tid_), errno);
    }
    if (got == tid_) {
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        attached_ = stopped_ = false;
        return Stop{.kind = Stop::Gone};
      }
      if (!WIFSTOPPED(status)) continue;
      stopped_ = true;
      int sig = WSTOPSIG(status), event = status >> 16;
      if (event == PTRACE_EVENT_STOP)
        return Stop{.kind = Stop::Interrupt, .signal = sig, .group_stop = sig != SIGTRAP};
      if (event == PTRACE_EVENT_EXEC) return Stop{.kind = Stop::Exec};
      if (event != 0) return Stop{.kind = Stop::Interrupt, .signal = sig};
      if (sig == (SIGTRAP | 0x80)) {
        __ptrace_syscall_info info{};
        if (ptrace(PTRACE_GET_SYSCALL_INFO, tid_, sizeof info, &info) <= 0)
          return fail_errno("ptrace syscall info of " + who(tid_), errno);
        if (info.op == PTRACE_SYSCALL_INFO_ENTRY)
          return Stop{.kind = Stop::SyscallEntry, .syscall_nr = static_cast<long>(info.entry.nr)};
        return Stop{.kind = Stop::SyscallExit};
      }
      return Stop{.kind = Stop::Signal, .signal = sig};
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return fail("timed out waiting for " + who(tid_) + " to stop", ETIMEDOUT);
    if (spins < 64) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

Result<Stop> Tracee::interrupt(Deadline deadline) {
  if (ptrace(PTRACE_INTERRUPT, tid_, nullptr, nullptr) != 0)
    return fail_errno("ptrace interrupt " + who(tid_), errno);
  return wait_stop(deadline);
}

Result<Stop> Tracee::resume_to_syscall(int signal, Deadline deadline) {
  if (ptrace(PTRACE_SYSCALL, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(signal))) != 0)
    return fail_errno("ptrace resume " + who(tid_), errno);
  stopped_ = false;
  return wait_stop(deadline);
}

Result<user_regs_struct> Tracee::registers() const {
  user_regs_struct r{};
  if (ptrace(PTRACE_GETREGS, tid_, nullptr, &r) != 0) return fail_errno("registers of " + who(tid_), errno);
  return r;
}

Result<void> Tracee::set_registers(const user_regs_struct& r) {
  if (ptrace(PTRACE_SETREGS, tid_, nullptr, &r) != 0)
    return fail_errno("set registers of " + who(tid_), errno);
  return {};
}

Result<std::vector<uint8_t>> Tracee::xstate() const {
  std::vector<uint8_t> image(kXstateMax);
  iovec iov{image.data(), image.size()};
  if (ptrace(PTRACE_GETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0)
    return fail_errno("extended state of " + who(tid_), errno);
  image.resize(iov.iov_len);
  return image;
}

Result<void> Tracee::set_xstate(std::span<const uint8_t> image) {
  iovec iov{const_cast<uint8_t*>(image.data()), image.size()};
  if (ptrace(PTRACE_SETREGSET, tid_, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0)
    return fail_errno("set extended state of " + who(tid_), errno);
  return {};
}

Result<uint64_t> Tracee::signal_mask() const {
  uint64_t mask = 0;
  if (ptrace(PTRACE_GETSIGMASK, tid_, sizeof mask, &mask) != 0)
    return fail_errno("signal mask of " + who(tid_), errno);
  return mask;
}

Result<void> Tracee::set_signal_mask(uint64_t mask) {
  if (ptrace(PTRACE_SETSIGMASK, tid_, sizeof mask, &mask) != 0)
    return fail_errno("set signal mask of " + who(tid_), errno);
  return {};
}

void Tracee::release(int signal) {
  if (!attached_) return;
  auto deadline = std::chrono::steady_clock::now() + kReleaseWait;
  if (!stopped_) {
    auto stop = interrupt(deadline);
    if (stop && stop->kind == Stop::Gone) {  // collected by wait_stop
      attached_ = false;
      return;
    }
    if (!stop) {  // killed meanwhile, or deaf: the kernel lets a deaf one go when allocscope ends
      reap(deadline);
      attached_ = false;
      return;
    }
    if (stop->kind == Stop::Signal) signal = stop->signal;  // delivered, not lost
  }
  if (ptrace(PTRACE_DETACH, tid_, nullptr, reinterpret_cast<void*>(static_cast<long>(signal))) != 0 &&
      errno == ESRCH)
    reap(deadline);  // killed out of its stop
  attached_ = stopped_ = false;
}

void Tracee::reap(Deadline deadline) {
  for (;;) {
    int status = 0;
    pid_t got = waitpid(tid_, &status, __WALL | WNOHANG);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return;  // ECHILD: collected, or not ours
    if (got == tid_ && (WIFEXITED(status) || WIFSIGNALED(status))) return;
    // Stopped after all (a stop it was on its way to): let go from there.
    if (got == tid_ && WIFSTOPPED(status) && ptrace(PTRACE_DETACH, tid_, nullptr, nullptr) == 0) return;
    if (std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace allocscope::inject
