// The pure parts of entering a running process (user/inject/): where a
// stopped thread stood and how it is handed back, the frame a call leaves
// on its stack, which thread to borrow, what keeps a process out.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>

#include "host/process.h"
#include "inject/seccomp_check.h"
#include "inject/signal_frame.h"
#include "inject/stop_state.h"
#include "inject/target_code.h"
#include "inject/thread_choice.h"

namespace allocscope::inject {
namespace {

user_regs_struct stopped_in(long nr, long result, uint64_t rip = 0x1000) {
  user_regs_struct r{};
  r.orig_rax = static_cast<unsigned long long>(nr);
  r.rax = static_cast<unsigned long long>(result);
  r.rip = rip;
  return r;
}

TEST(StopState, TellsWhereAThreadStoppedFromItsRegisters) {
  EXPECT_EQ(stop_place(stopped_in(-1, 7)), StopPlace::UserCode);
  EXPECT_EQ(stop_place(stopped_in(SYS_futex, -512)), StopPlace::SyscallRestart);
  EXPECT_EQ(stop_place(stopped_in(SYS_pause, -514)), StopPlace::SyscallRestart);
  EXPECT_EQ(stop_place(stopped_in(SYS_nanosleep, -516)), StopPlace::SyscallRestartBlock);
  EXPECT_EQ(stop_place(stopped_in(SYS_epoll_wait, -EINTR)), StopPlace::SyscallInterrupted);
  EXPECT_EQ(stop_place(stopped_in(SYS_read, 12)), StopPlace::SyscallDone);
}

TEST(StopState, HandsBackASystemCallAsTheKernelRestartsOne) {
  auto r = resumed_registers(stopped_in(SYS_futex, -512), true, true);
  EXPECT_EQ(r.rip, 0x1000u - 2);  // the syscall instruction again
  EXPECT_EQ(r.rax, unsigned(SYS_futex));
  EXPECT_EQ(long(r.orig_rax), -1);
  // With its restart block: restart_syscall goes on with what is left;
  // after an rt_sigreturn (which forgets it) the call is made anew.
  EXPECT_EQ(resumed_registers(stopped_in(SYS_nanosleep, -516), true, true).rax,
            unsigned(SYS_restart_syscall));
  EXPECT_EQ(resumed_registers(stopped_in(SYS_nanosleep, -516), false, true).rax, unsigned(SYS_nanosleep));
  // An EINTR the stop caused is undone only when asked.
  EXPECT_EQ(resumed_registers(stopped_in(SYS_epoll_wait, -EINTR), true, true).rip, 0x1000u - 2);
  auto kept = resumed_registers(stopped_in(SYS_epoll_wait, -EINTR), true, false);
  EXPECT_EQ(kept.rip, 0x1000u);
  EXPECT_EQ(long(kept.rax), -EINTR);
  // A finished call and user code are left where they were.
  EXPECT_EQ(resumed_registers(stopped_in(SYS_read, 12), true, true).rip, 0x1000u);
  EXPECT_EQ(resumed_registers(stopped_in(-1, 5), true, true).rax, 5u);
}

// A sleep restarted once (poll, nanosleep, a futex with a timeout) and
// stopped again is named only by its restart block: a call's frame could
// not put it back, so the thread is not borrowed.
TEST(StopState, AThreadInsideRestartSyscallIsNotResumableFromRegisters) {
  EXPECT_FALSE(resumable_from_registers(stopped_in(SYS_restart_syscall, -516)));
  EXPECT_FALSE(resumable_from_registers(stopped_in(SYS_restart_syscall, -512)));
  EXPECT_TRUE(resumable_from_registers(stopped_in(SYS_restart_syscall, 0)));
  EXPECT_TRUE(resumable_from_registers(stopped_in(SYS_poll, -516)));
  EXPECT_TRUE(resumable_from_registers(stopped_in(-1, -516)));
}

TEST(StopState, KnowsTheCallsAnAllocatorMakesHoldingItsLocks) {
  EXPECT_TRUE(stopped_in_allocator_syscall(stopped_in(SYS_mmap, 0)));
  EXPECT_TRUE(stopped_in_allocator_syscall(stopped_in(SYS_brk, 0)));
  EXPECT_FALSE(stopped_in_allocator_syscall(stopped_in(SYS_futex, -512)));
  EXPECT_FALSE(stopped_in_allocator_syscall(stopped_in(-1, 0)));
}

TEST(SignalFrame, LiesBelowTheRedZoneAlignedAsACallAndXrstorNeed) {
  for (uint64_t sp : {0x7ffc'0000'1000ull, 0x7ffc'0000'1008ull, 0x7ffc'0000'0ff3ull}) {
    FrameLayout l = lay_out_frame(sp, 2696, 37);
    EXPECT_LE(l.high, sp - 128) << "the red zone is the thread's";
    EXPECT_EQ(l.frame % 16, 8u) << "a function's entry";
    EXPECT_EQ(l.context, l.frame + 8);
    EXPECT_EQ(l.fpstate % 64, 0u);
    EXPECT_GE(l.fpstate, l.context + sizeof(KernelUcontext));
    EXPECT_GE(l.data, l.fpstate + 2696 + 4);
    EXPECT_EQ(l.data % 16, 0u);
    EXPECT_LE(l.data + 37, l.high);
    EXPECT_EQ(l.low, l.frame);
  }
}

TEST(SignalFrame, HoldsWhatRtSigreturnRestores) {
  std::vector<uint8_t> xstate(2432, 0);
  uint64_t xcr0 = 0xe7;
  std::memcpy(xstate.data() + 464, &xcr0, sizeof xcr0);  // where ptrace puts it
  user_regs_struct r{};
  r.rip = 0x401000, r.rsp = 0x7ffc'0000'2000, r.rax = 35, r.r15 = 0xf15, r.eflags = 0x246, r.cs = 0x33,
  r.ss = 0x2b;
  FrameLayout l = lay_out_frame(r.rsp, xstate.size(), 3);
  std::vector<uint8_t> data = {1, 2, 3};
  auto bytes = frame_bytes(l, r, xstate, 0x4000, 0x7f00'0000'1234, data);
  ASSERT_EQ(bytes.size(), l.high - l.low);
  uint64_t restorer;
  std::memcpy(&restorer, bytes.data(), 8);
  EXPECT_EQ(restorer, 0x7f00'0000'1234u) << "the call returns into rt_sigreturn";
  KernelUcontext uc;
  std::memcpy(&uc, bytes.data() + (l.context - l.low), sizeof uc);
  EXPECT_EQ(uc.mcontext.rip, r.rip);
  EXPECT_EQ(uc.mcontext.rsp, r.rsp);
  EXPECT_EQ(uc.mcontext.r15, r.r15);
  EXPECT_EQ(uc.mcontext.cs, 0x33);
  EXPECT_EQ(uc.mcontext.fpstate, l.fpstate);
  EXPECT_EQ(uc.sigmask, 0x4000u);
  EXPECT_EQ(uc.stack_flags, 3) << "an alternate stack the kernel refuses: the thread keeps its own";
  EXPECT_TRUE(uc.flags & 1) << "UC_FP_XSTATE";
  const uint8_t* fp = bytes.data() + (l.fpstate - l.low);
  uint32_t magic1, extended, size, magic2;
  uint64_t xfeatures;
  std::memcpy(&magic1, fp + 464, 4);
  std::memcpy(&extended, fp + 468, 4);
  std::memcpy(&xfeatures, fp + 472, 8);
  std::memcpy(&size, fp + 480, 4);
  std::memcpy(&magic2, fp + xstate.size(), 4);
  EXPECT_EQ(magic1, 0x46505853u);
  EXPECT_EQ(xfeatures, xcr0) << "every feature the image holds is restored";
  EXPECT_EQ(size, xstate.size());
  EXPECT_EQ(extended, xstate.size() + 4);
  EXPECT_EQ(magic2, 0x46505845u);
  EXPECT_EQ(bytes[l.data - l.low + 2], 3);
}

TEST(ThreadChoice, ReadsProcsWordsForAThread) {
  EXPECT_EQ(state_from_stat("123 (a (b) c) S 1 2 3"), 'S');
  EXPECT_EQ(state_from_stat("123 (x) R 1"), 'R');
  EXPECT_EQ(state_from_stat("garbage"), '?');
  EXPECT_EQ(syscall_from_text("running\n"), -2);
  EXPECT_EQ(syscall_from_text("232 0x3 0x7ffc 0x1 0xffffffffffffffff 0x0 0x0 0x7ffc 0x7f12\n"), 232);
  EXPECT_EQ(syscall_from_text("-1 0x7ffc 0x7f12\n"), -1);
}

TEST(ThreadChoice, BorrowsSleepsTheKernelRestartsFirstAndNeverAStoppedOne) {
  std::vector<ThreadState> threads = {
      {1, 'S', SYS_epoll_wait}, {2, 'R', -2}, {3, 'S', SYS_futex},
      {4, 'D', SYS_read},       {5, 'T', -1}, {6, 'S', 999},
      {7, 'S', SYS_nanosleep},  {8, 'Z', -1},
  };
  EXPECT_EQ(borrowing_order(threads), (std::vector<pid_t>{3, 7, 2, 6, 1}));
}

TEST(TargetCode, FindsBytesAndNamesAllocators) {
  std::vector<uint8_t> code = {0x90, 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xc3};
  std::vector<uint8_t> syscall_ret = {0x0f, 0x05, 0xc3}, absent = {0xcc, 0xcc};
  EXPECT_EQ(find_bytes(code, syscall_ret), 8u);
  EXPECT_FALSE(find_bytes(code, absent));
  EXPECT_TRUE(is_allocator_library_name("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"));
  EXPECT_TRUE(is_allocator_library_name("/memfd:allocscope-preload (deleted)"));
  EXPECT_FALSE(is_allocator_library_name("/usr/lib/x86_64-linux-gnu/libz.so.1"));
}

// A filter in the shape of systemd's: x86-64 only (else kill), no
// memfd_create (EPERM), no mapping both writable and executable
// (MemoryDenyWriteExecute), the rest allowed.
TEST(SeccompCheck, RunsAFilterAsTheKernelWould) {
  constexpr uint32_t kArch = 0xc000003e, kEperm = 0x50000 | 1;
  std::vector<sock_filter> f = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),                        // arch
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),             //
      BPF_STMT(BPF_RET | BPF_K, 0x80000000),                        // kill the process
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),                        // nr
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),  //
      BPF_STMT(BPF_RET | BPF_K, kEperm),                            //
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 4),          //
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 32),                       // args[2], low word
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 6),                       // PROT_WRITE | PROT_EXEC
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 1),                 //
      BPF_STMT(BPF_RET | BPF_K, kEperm),                            //
      BPF_STMT(BPF_RET | BPF_K, 0x7fff0000),                        // allow
  };
  EXPECT_EQ(seccomp_action(f, {SYS_getpid, {}}), 0x7fff0000u);
  EXPECT_EQ(seccomp_action(f, {SYS_memfd_create, {0, 1}}), kEperm);
  EXPECT_EQ(seccomp_action(f, {SYS_mmap, {0, 4096, 5, 2, 3, 0}}), 0x7fff0000u) << "read and execute";
  EXPECT_EQ(seccomp_action(f, {SYS_mmap, {0, 4096, 7, 2, 3, 0}}), kEperm) << "write and execute";
  int refused = 0;
  for (const SyscallCase& c : injection_syscalls()) refused += seccomp_action(f, c) != 0x7fff0000u;
  EXPECT_EQ(refused, 1) << "an entry needs memfd_create, and maps nothing writable and executable";
}

std::vector<uint8_t> auxv(std::initializer_list<std::pair<uint64_t, uint64_t>> entries) {
  std::vector<uint8_t> out;
  for (auto [type, value] : entries)
    for (uint64_t v : {type, value})
      out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8);
  return out;
}

TEST(TargetCode, SaysWhatKeepsAProcessOut) {
  std::string plain = "Name:\tx\nTracerPid:\t0\nSeccomp:\t0\n";
  EXPECT_FALSE(refusal(facts_from(plain, auxv({{AT_SECURE, 0}, {AT_NULL, 0}}))));
  EXPECT_NE(refusal(facts_from(plain, auxv({{AT_SECURE, 1}, {AT_NULL, 0}})))->find("set-id"),
            std::string::npos);
  EXPECT_NE(refusal(facts_from("Name:\tx\nTracerPid:\t42\n", {}))->find("traced by process 42"),
            std::string::npos);
  EXPECT_FALSE(refusal(facts_from("Name:\tx\nSeccomp:\t2\n", {}))) << "its filters are read";
  EXPECT_NE(refusal(facts_from("Name:\tx\nSeccomp:\t1\n", {}))->find("strict seccomp"), std::string::npos);
  EXPECT_NE(refusal(facts_from("Name:\tx\nx86_Thread_features:\tshstk wrss\n", {}))->find("shadow stack"),
            std::string::npos);
  EXPECT_FALSE(refusal(facts_from("Name:\tx\nx86_Thread_features:\t\n", {})));
}

TEST(Process, ReadsItsOwnIdInItsPidNamespace) {
  EXPECT_EQ(namespaced_pid("Name:\tx\nNSpid:\t4242\t7\n"), 7);
  EXPECT_EQ(namespaced_pid("Name:\tx\nNSpid:\t4242\n"), 4242);
  EXPECT_EQ(namespaced_pid("Name:\tx\n"), 0);
}

}  // namespace
}  // namespace allocscope::inject
