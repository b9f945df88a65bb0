// Whether a thread's seccomp filters let an injection make its system
// calls: each filter (PTRACE_SECCOMP_GET_FILTER: the thread stopped under
// ptrace, root) run on each call the entry makes, as the kernel would run
// it (classic BPF, by libpcap's interpreter). A call a filter would refuse
// (EPERM, SIGSYS, a kill, a supervisor's say) keeps the process out: a
// kill or a signal would end it.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace allocscope::inject {

struct SyscallCase {
  int nr;
  uint64_t args[6];
};

// The calls an entry makes: the memfd, the dynamic loader's opening and
// mapping of the library (its text mapped, never made executable after),
// the library's attach (RELRO pages opened and closed, its ring mapped, its
// set cleared) and what its sampled calls make.
std::span<const SyscallCase> injection_syscalls();

// The action (SECCOMP_RET_ALLOW, ...) a filter takes for a call on x86-64. Pure.
uint32_t seccomp_action(std::span<const sock_filter> filter, const SyscallCase& call);

// What a thread's filters say of the calls an entry makes.
struct SeccompVerdict {
  std::string refused;  // the first call a filter refuses, in words; "" when none is
  // restart_syscall, by which the kernel resumes an interrupted nanosleep
  // or poll: refused, such a sleep must be made anew instead.
  bool restart_refused = false;
  // System call -1, which a tracer sets to skip a call: refused, a filter's
  // errno would overwrite the registers a skip leaves.
  bool skip_refused = false;
};
// The filters of thread `tid` (stopped under ptrace); a thread without
// filters refuses nothing.
Result<SeccompVerdict> check_seccomp(pid_t tid);

}  // namespace allocscope::inject
