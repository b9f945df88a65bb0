#include "inject/seccomp_check.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <pcap/bpf.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace allocscope::inject {
namespace {

constexpr uint64_t kAddr = 0x7f00'0000'0000, kLen = 0x20000;
constexpr uint64_t kMapFile = MAP_PRIVATE | MAP_FIXED | MAP_DENYWRITE;

constexpr SyscallCase kCalls[] = {
    {SYS_memfd_create, {kAddr, MFD_CLOEXEC}},
    {SYS_openat, {uint64_t(AT_FDCWD), kAddr, O_RDONLY | O_CLOEXEC}},
    {SYS_read, {3, kAddr, 832}},
    {SYS_pread64, {3, kAddr, 784, 64}},
    {SYS_fstat, {3, kAddr}},
    {SYS_newfstatat, {3, kAddr, kAddr, AT_EMPTY_PATH}},
    {SYS_mmap, {0, kLen, PROT_READ, MAP_PRIVATE | MAP_DENYWRITE, 3, 0}},
    {SYS_mmap, {kAddr, kLen, PROT_READ | PROT_EXEC, kMapFile, 3, 0x1000}},
    {SYS_mmap, {kAddr, kLen, PROT_READ | PROT_WRITE, kMapFile, 3, 0x4000}},
    {SYS_mmap,
     {kAddr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, uint64_t(-1), 0}},
    {SYS_mmap, {0, kLen, PROT_READ | PROT_WRITE, MAP_SHARED, 3, 0}},
    {SYS_mprotect, {kAddr, 0x1000, PROT_NONE}},
    {SYS_mprotect, {kAddr, 0x1000, PROT_READ}},
    {SYS_mprotect, {kAddr, 0x1000, PROT_READ | PROT_WRITE}},
    {SYS_munmap, {kAddr, kLen}},
    {SYS_madvise, {kAddr, kLen, MADV_DONTNEED}},
    {SYS_close, {3}},
    {SYS_nanosleep, {kAddr, 0}},
    {SYS_gettid, {}},
    {SYS_getpid, {}},
    {SYS_sched_yield, {}},
    {SYS_futex, {kAddr, 0x80 /* FUTEX_WAIT_PRIVATE */, 2, 0}},
    {SYS_rt_sigreturn, {}},
};

// Each 32-bit word of seccomp_data, which the kernel loads in the
// machine's order, put in the network order libpcap's loads read.
std::vector<uint8_t> packet_of(const SyscallCase& call) {
  seccomp_data d{};
  d.nr = call.nr;
  d.arch = AUDIT_ARCH_X86_64;
  d.instruction_pointer = kAddr;
  std::memcpy(d.args, call.args, sizeof d.args);
  std::vector<uint8_t> bytes(sizeof d);
  std::memcpy(bytes.data(), &d, sizeof d);
  for (size_t at = 0; at + 4 <= bytes.size(); at += 4)
    std::swap(bytes[at], bytes[at + 3]), std::swap(bytes[at + 1], bytes[at + 2]);
  return bytes;
}

bool allowed(uint32_t action) {
  uint32_t a = action & SECCOMP_RET_ACTION_FULL;
  return a == SECCOMP_RET_ALLOW || a == SECCOMP_RET_LOG;
}

std::string call_name(int nr) {
  switch (nr) {
    case SYS_memfd_create:
      return "memfd_create";
    case SYS_openat:
      return "openat";
    case SYS_mmap:
      return "mmap";
    case SYS_mprotect:
      return "mprotect";
    default:
      return "system call " + std::to_string(nr);
  }
}

}  // namespace

std::span<const SyscallCase> injection_syscalls() { return kCalls; }

uint32_t seccomp_action(std::span<const sock_filter> filter, const SyscallCase& call) {
  std::vector<uint8_t> packet = packet_of(call);
  static_assert(sizeof(bpf_insn) == sizeof(sock_filter));
  return bpf_filter(reinterpret_cast<const bpf_insn*>(filter.data()), packet.data(), u_int(packet.size()),
                    u_int(packet.size()));
}

Result<SeccompVerdict> check_seccomp(pid_t tid) {
  SeccompVerdict v;
  for (unsigned long index = 0;; ++index) {
    long n = ptrace(PTRACE_SECCOMP_GET_FILTER, tid, reinterpret_cast<void*>(index), nullptr);
    // ENOENT: no more filters; EINVAL at the first: none (not in filter mode).
    if (n < 0 && (errno == ENOENT || (errno == EINVAL && index == 0))) return v;
    if (n <= 0) return fail_errno("read the seccomp filters of thread " + std::to_string(tid), errno);
    std::vector<sock_filter> filter(static_cast<size_t>(n));
    if (ptrace(PTRACE_SECCOMP_GET_FILTER, tid, reinterpret_cast<void*>(index), filter.data()) != n)
      return fail_errno("read the seccomp filters of thread " + std::to_string(tid), errno);
    v.restart_refused |= !allowed(seccomp_action(filter, {SYS_restart_syscall, {}}));
    v.skip_refused |= !allowed(seccomp_action(filter, {-1, {}}));
    for (const SyscallCase& call : kCalls)
      if (v.refused.empty() && !allowed(seccomp_action(filter, call)))
        v.refused = "its seccomp filter refuses " + call_name(call.nr) + ", which loading the library needs";
  }
}

}  // namespace allocscope::inject
