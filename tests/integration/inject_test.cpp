// record -p enters the running process: liballocscope-preload.so loaded
// into it (user/inject/), its allocator's slots pointed at the library for
// the recording, given back at its end. The estimates are the truth's, the
// process runs as it would untraced, and one it cannot enter is probed,
// saying why.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "harness.h"
#include "host/proc_maps.h"
#include "host/process.h"
#include "inject/remote_thread.h"
#include "inject/target_code.h"

namespace allocscope::test {
namespace {

constexpr int kThreads = 2;

// alloc_sites (with `preload` in its environment, if any) started before
// allocscope, entered by record -p, then let go to allocate everything and
// hold it: each site's allocated and still-live bytes within kMaxZ
// standard deviations of the truth. Every block is allocated after the
// entry. 16 checks an allocator at 1.8e-7 each (harness.h): under 1.2e-5 a
// run for the four allocators.
void expect_entered_sites_are_the_truth(const std::string& preload) {
  constexpr int kScale = 20;
  constexpr double kRate = 64 * 1024;
  std::vector<std::string> cmd = {
      WORKLOAD_BIN, "--threads", std::to_string(kThreads), "--scale-pct", std::to_string(kScale),
      "--wait",     "--hold"};
  if (!preload.empty()) cmd.insert(cmd.begin(), {"env", "LD_PRELOAD=" + preload});
  Child target(cmd);
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("entered.pb.gz");
  Child recorder(
      {ALLOCSCOPE_BIN, "record", "-v", "-p", std::to_string(target.pid()), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
  target.signal(SIGUSR1);
  ASSERT_TRUE(target.wait_for_line("done", 60000));
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
  EXPECT_NE(recorder.err().find("samples in process: the library loaded"), std::string::npos)
      << recorder.err();
  EXPECT_NE(recorder.err().find("sampling: in process (1 process entered)"), std::string::npos)
      << recorder.err();
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  Recording rec = read_pprof(out);
  std::filesystem::remove(out);
  EXPECT_FALSE(reported_losses(rec).any()) << recorder.err();
  EXPECT_GT(counter_of(rec, "ring_frees"), 0u) << "the sampled frees came through the ring";
  auto sites = site_totals(rec);
  for (const site_spec& s : kSites) {
    Truth t = site_truth(s, kThreads, kScale);
    const StackTotals& got = sites[s.function];
    double sd = ht_sigma(t.objects, double(s.size), kRate, true) + 1;
    EXPECT_LT(std::fabs(got.alloc_bytes - t.bytes) / sd, kMaxZ)
        << preload << " " << s.function << " alloc " << got.alloc_bytes << " truth " << t.bytes;
    double live_sd = ht_sigma(t.live_objects, double(s.size), kRate, true) + 1;
    EXPECT_LT(std::fabs(got.live_bytes - t.live_bytes) / live_sd, kMaxZ)
        << preload << " " << s.function << " live " << got.live_bytes << " truth " << t.live_bytes;
  }
}

class EnteredSites : public ::testing::TestWithParam<const char*> {};

TEST_P(EnteredSites, AreTheTruthOnEachAllocator) {
  REQUIRE_BPF();
  std::string allocator = GetParam();
  expect_entered_sites_are_the_truth(allocator == "glibc" ? "" : "/usr/lib/x86_64-linux-gnu/" + allocator);
}

INSTANTIATE_TEST_SUITE_P(Inject, EnteredSites,
                         ::testing::Values("glibc", "libjemalloc.so.2", "libtcmalloc_minimal.so.4",
                                           "libmimalloc.so.2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           return name.starts_with("lib") ? name.substr(3) : name;
                         });

// The program sleeps in the calls a stop interrupts (epoll_wait with and
// without a timeout, nanosleep, poll, a condition wait, a pipe read,
// sigtimedwait) while one thread allocates a fixed sequence: entered and
// left eight times, it sees no EINTR, prints what it prints untraced (the
// digest of its blocks, its open descriptors), its signal reaches its
// handler, its malloc slot points at the C library again, and no tracer
// stays.
TEST(Inject, AProcessEnteredAndLeftRunsAsUntraced) {
  REQUIRE_BPF();
  const std::string batches = "6000";
  RunResult plain = run({INJECT_TARGET_BIN, "--seconds", "1", "--batches", batches});
  ASSERT_EQ(plain.status, 0) << plain.err;
  std::string expected = plain.out.substr(plain.out.find('\n') + 1);
  ASSERT_NE(expected.find("malloc-from libc.so.6"), std::string::npos) << expected;
  Child target({INJECT_TARGET_BIN, "--seconds", "20", "--batches", batches});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string pid = std::to_string(target.pid());
  uint64_t samples = 0;
  for (int i = 0; i < 8; ++i) {
    std::string out = temp_path("cycle.pb.gz");
    RunResult r =
        run({ALLOCSCOPE_BIN, "record", "-q", "-p", pid, "--rate", "64KiB", "-d", "300ms", "-o", out});
    ASSERT_EQ(r.status, 0) << r.err;
    samples += counter_of(read_pprof(out), "samples");
    std::filesystem::remove(out);
    std::string status = read_file("/proc/" + pid + "/status");
    EXPECT_NE(status.find("TracerPid:\t0\n"), std::string::npos) << status;
  }
  EXPECT_GT(samples, 0u);
  target.signal(SIGTERM);  // ends once its sequence is allocated, not at 20 s
  EXPECT_EQ(target.wait(60000), 0) << target.err();
  EXPECT_EQ(target.out().substr(target.out().find('\n') + 1), expected) << target.err();
}

// allocscope killed (SIGKILL) while it enters the process, at moments
// spread over the entry: the process goes on unharmed (no EINTR, its
// output its untraced output), and a recording after them enters it.
TEST(Inject, AllocscopeKilledWhileEnteringLeavesTheProcessRunning) {
  REQUIRE_BPF();
  RunResult plain = run({INJECT_TARGET_BIN, "--seconds", "1", "--batches", "4000"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  std::string expected = plain.out.substr(plain.out.find('\n') + 1);
  Child target({INJECT_TARGET_BIN, "--seconds", "600", "--batches", "4000"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string pid = std::to_string(target.pid());
  std::mt19937 random(std::random_device{}());
  int caught = 0;
  std::string uncaught;
  for (int i = 0; i < 10; ++i) {
    Child recorder({ALLOCSCOPE_BIN, "record", "-p", pid, "--rate", "64KiB", "-o", "/dev/null"});
    // Its entry begins when it traces a thread of the process.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool traced = false;
    while (!traced && std::chrono::steady_clock::now() < deadline) {
      for (const auto& task : std::filesystem::directory_iterator("/proc/" + pid + "/task"))
        traced |= read_file(task.path() / "status").find("TracerPid:\t0\n") == std::string::npos;
      if (!traced) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    caught += traced;
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 12000));
    recorder.signal(SIGKILL);
    recorder.wait(10000);
    if (!traced) uncaught += recorder.err();
  }
  EXPECT_GT(caught, 5) << "the entries were too quick to be caught, or not made:\n" << uncaught;
  std::string out = temp_path("after-kills.pb.gz");
  Child recorder({ALLOCSCOPE_BIN, "record", "-v", "-p", pid, "--rate", "64KiB", "-d", "1s", "-o", out});
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  EXPECT_NE(recorder.err().find("samples in process"), std::string::npos) << recorder.err();
  std::filesystem::remove(out);
  target.signal(SIGTERM);
  EXPECT_EQ(target.wait(90000), 0) << target.err();
  // Its errno is put back by allocscope, which was killed: a thread let go
  // mid-call may find the one the loader's calls left (not compared).
  std::regex errno_field(R"( errno-changed \d+)");
  EXPECT_EQ(std::regex_replace(target.out().substr(target.out().find('\n') + 1), errno_field, ""),
            std::regex_replace(expected, errno_field, ""))
      << target.err();
}

// A process that cannot be entered is probed, and the line says why.
// `before` (if any) acts on the process first and returns what undoes it.
void expect_probed_saying(const std::vector<std::string>& cmd, const std::string& ready,
                          const std::string& why,
                          const std::function<std::function<void()>(pid_t)>& before = {}) {
  Child target(cmd);
  ASSERT_TRUE(target.wait_for_line(ready, 10000)) << cmd[0];
  std::function<void()> undo = before ? before(target.pid()) : nullptr;
  std::string out = temp_path("refused.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "-v", "-p", std::to_string(target.pid()), "--rate", "64KiB", "-d",
                  "1s", "-o", out});  // -v: the sampling line
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  std::filesystem::remove(out);
  EXPECT_NE(recorder.err().find("its allocator is probed (a trap at every call): " + why), std::string::npos)
      << cmd[0] << ": " << recorder.err();
  EXPECT_EQ(recorder.err().find("sampling: in process"), std::string::npos) << recorder.err();
  if (undo) undo();
  target.signal(SIGKILL);
  target.wait(10000);
}

TEST(Inject, ProcessesItCannotEnterAreProbedAndSaidWhy) {
  REQUIRE_BPF();
  expect_probed_saying({WORKLOAD_STATIC_BIN, "--wait"}, "ready", "a static program");
  expect_probed_saying({WORKLOAD_MUSL_BIN, "--wait"}, "ready", "a static program");
  expect_probed_saying({WORKLOAD_JEMALLOC_BIN, "--wait"}, "ready", "the program defines malloc itself");
  expect_probed_saying({SECCOMP_SITES_BIN, "--sleep", "30"}, "ready",
                       "its seccomp filter refuses memfd_create");
  // Another tracer holds it: a child of the test's seizes it first.
  expect_probed_saying({WORKLOAD_BIN, "--wait"}, "ready", "already traced by process", [](pid_t pid) {
    int go[2];
    if (pipe(go) != 0) return std::function<void()>();
    pid_t tracer = fork();
    if (tracer == 0) {
      char c = ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) == 0;
      if (write(go[1], &c, 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    char seized = 0;
    EXPECT_EQ(read(go[0], &seized, 1), 1);
    EXPECT_EQ(seized, 1);
    close(go[0]);
    close(go[1]);
    return std::function<void()>([tracer] {  // the tracer gone first: the target is then reaped
      kill(tracer, SIGKILL);
      waitpid(tracer, nullptr, 0);
    });
  });
}

// A process whose seccomp filter allows what entering it takes is entered:
// it runs as it would untraced (its calls' checksum), and its sites are
// recorded (malloc, calloc, realloc's and posix_memalign's 1000 bytes and
// the 500 realloc grows, 20,000 times each: within kMaxZ sigma, 1.8e-7).
TEST(Inject, AProcessWhoseFilterAllowsTheEntryIsEntered) {
  REQUIRE_BPF();
  RunResult plain = run({SECCOMP_SITES_BIN, "--entry"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  Child target({SECCOMP_SITES_BIN, "--entry", "--sleep", "4"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("seccomp-entered.folded");
  Child recorder(
      {ALLOCSCOPE_BIN, "record", "-v", "-p", std::to_string(target.pid()), "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
  EXPECT_EQ(target.wait(60000), 0) << target.err();
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  EXPECT_NE(recorder.err().find("samples in process"), std::string::npos) << recorder.err();
  EXPECT_EQ(target.out().substr(target.out().find('\n') + 1), plain.out);
  double bytes = 0;
  for (const auto& [frames, value] : read_folded(out))
    if (std::find(frames.begin(), frames.end(), "churn") != frames.end()) bytes += value;
  std::filesystem::remove(out);
  double truth = 20000.0 * (4 * 1000 + 500);
  double sd = std::sqrt(4 * std::pow(ht_sigma(20000, 1000, 64 * 1024, true), 2) +
                        std::pow(ht_sigma(20000, 500, 64 * 1024, true), 2));
  EXPECT_LT(std::fabs(bytes - truth) / sd, kMaxZ) << bytes << " of " << truth;
}

// A root of its own (a container image's copies of the loader and the C
// library) in a PID namespace of its own: the library reaches the process
// through a memfd its own loader opens in its own /proc, and each site is
// the truth (within kMaxZ sigma: 16 checks at 1.8e-7); without a /proc in
// its root (a bare chroot) it is probed, and says why.
TEST(Inject, AProcessInAContainerIsEntered) {
  REQUIRE_BPF();
  namespace fs = std::filesystem;
  fs::path root = temp_path("inject-root");
  fs::remove_all(root);
  for (const char* dir : {"lib/x86_64-linux-gnu", "lib64", "proc"}) fs::create_directories(root / dir);
  for (const char* lib : {"libc.so.6", "libm.so.6"})
    fs::copy_file(fs::canonical(std::string("/lib/x86_64-linux-gnu/") + lib),
                  root / "lib/x86_64-linux-gnu" / lib);
  fs::copy_file(fs::canonical("/lib64/ld-linux-x86-64.so.2"), root / "lib64/ld-linux-x86-64.so.2");
  fs::copy_file(WORKLOAD_BIN, root / "alloc_sites");
  constexpr int kScale = 10;
  std::string workload = "/alloc_sites --threads 2 --scale-pct " + std::to_string(kScale) + " --wait --hold";
  for (bool with_proc : {true, false}) {
    SCOPED_TRACE(with_proc ? "its /proc mounted" : "a bare chroot");
    std::string mount = with_proc ? "mount -t proc proc " + root.string() + "/proc && " : "";
    Child container({"unshare", "--mount", "--pid", "--fork", "sh", "-c",
                     mount + "exec chroot " + root.string() + " " + workload});
    ASSERT_TRUE(container.wait_for_line("ready", 10000)) << container.err();
    pid_t pid = 0;
    for (pid_t p : descendants_of({container.pid()}))
      if (read_comm(p) == "alloc_sites") pid = p;
    ASSERT_GT(pid, 0);
    std::string out = temp_path("container.pb.gz");
    Child recorder({ALLOCSCOPE_BIN, "record", "-v", "-p", std::to_string(pid), "--rate", "64KiB", "-o", out});
    ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
    kill(pid, SIGUSR1);
    ASSERT_TRUE(container.wait_for_line("done", 60000));
    recorder.signal(SIGINT);
    ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
    kill(pid, SIGUSR1);
    EXPECT_EQ(container.wait(30000), 0);
    if (!with_proc) {
      EXPECT_NE(recorder.err().find("no /proc in its root"), std::string::npos) << recorder.err();
      continue;
    }
    EXPECT_NE(recorder.err().find("samples in process: the library loaded"), std::string::npos)
        << recorder.err();
    Recording rec = read_pprof(out);
    fs::remove(out);
    EXPECT_GT(counter_of(rec, "ring_frees"), 0u) << "its frees came through its ring, named by its own pid";
    auto sites = site_totals(rec);
    for (const site_spec& s : kSites) {
      Truth t = site_truth(s, kThreads, kScale);
      double sd = ht_sigma(t.objects, double(s.size), 64 * 1024, true) + 1;
      EXPECT_LT(std::fabs(sites[s.function].alloc_bytes - t.bytes) / sd, kMaxZ) << s.function;
      double live_sd = ht_sigma(t.live_objects, double(s.size), 64 * 1024, true) + 1;
      EXPECT_LT(std::fabs(sites[s.function].live_bytes - t.live_bytes) / live_sd, kMaxZ) << s.function;
    }
  }
  fs::remove_all(root);
}

// --no-inject keeps the allocator probes.
TEST(Inject, NoInjectProbesTheAllocator) {
  REQUIRE_BPF();
  Child target({WORKLOAD_BIN, "--scale-pct", "5", "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string out = temp_path("no-inject.folded");
  Child recorder({ALLOCSCOPE_BIN, "record", "-v", "--no-inject", "-p", std::to_string(target.pid()), "--rate",
                  "64KiB", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
  bool mapped =
      read_file("/proc/" + std::to_string(target.pid()) + "/maps").find("allocscope") != std::string::npos;
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  EXPECT_EQ(recorder.wait(60000), 0) << recorder.err();
  std::filesystem::remove(out);
  EXPECT_FALSE(mapped) << "the library was loaded";
  EXPECT_EQ(recorder.err().find("samples in process"), std::string::npos) << recorder.err();
}

// A process entered and left keeps the library, dormant, and allocates
// through its own allocator again: a later --all recording probes that
// allocator in it, as in any process (it once took the dormant copy for an
// in-process sampler and lost the process's allocations).
TEST(Inject, ALeftProcessIsProbedByALaterWholeMachineRecording) {
  REQUIRE_BPF();
  Child target({WORKLOAD_BIN, "--scale-pct", "5", "--wait"});
  ASSERT_TRUE(target.wait_for_line("ready", 10000));
  std::string pid = std::to_string(target.pid());
  RunResult entered = run({ALLOCSCOPE_BIN, "record", "-q", "-p", pid, "-d", "200ms", "-o", "/dev/null"});
  ASSERT_EQ(entered.status, 0) << entered.err;
  ASSERT_NE(read_file("/proc/" + pid + "/maps").find("allocscope-preload"), std::string::npos);
  std::string out = temp_path("after-entry.pb.gz");
  Child recorder({ALLOCSCOPE_BIN, "record", "--all", "--rate", "64KiB", "-o", out});
  ASSERT_TRUE(recorder.wait_for_line("recording every process", 60000, true)) << recorder.err();
  target.signal(SIGUSR1);
  EXPECT_EQ(target.wait(), 0);
  recorder.signal(SIGINT);
  ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
  Recording rec = read_pprof(out);
  std::filesystem::remove(out);
  uint64_t samples = 0;
  for (const RecSample& s : rec.samples)
    if (s.pid == uint32_t(target.pid())) samples += s.totals.samples;
  // The workload allocates about 6 MiB at 5 %: some 90 samples at 64 KiB,
  // none only by a defect.
  EXPECT_GT(samples, 0u) << recorder.err();
}

}  // namespace
}  // namespace allocscope::test

namespace allocscope::test {
namespace {

// A forked child sleeping through raw nanosleep calls with a value live in
// %xmm7 across each: exits 3 if the value ever changed, 0 after `rounds`.
[[noreturn]] void sleep_with_xmm7_live(int rounds) {
  for (int i = 0; i < rounds; ++i) {
    timespec ts{0, 2'000'000};
    uint64_t in = 0x5a5a0000u + uint64_t(i), out = 0;
    long rax = SYS_nanosleep;
    asm volatile("movq %[in], %%xmm7\n\tsyscall\n\tmovq %%xmm7, %[out]"
                 : [out] "=r"(out), "+a"(rax)
                 : [in] "r"(in), "D"(&ts), "S"(nullptr)
                 : "rcx", "r11", "xmm7", "memory");
    if (out != in) _exit(3);
  }
  _exit(0);
}

inject::Borrowing any_stop(const inject::TargetCode& code) {
  inject::Borrowing b;
  b.fits = [](const user_regs_struct&) { return true; };
  b.signal_waits = [] { return false; };
  b.stack_low = [&code](uint64_t sp) -> uint64_t {
    const Mapping* m = find_mapping(code.maps, sp);
    return m ? m->start : 0;
  };
  return b;
}

// A borrowed thread runs calls and is given back as it was; one whose call
// outlives its deadline is let go mid-call (as if allocscope had died) and
// puts itself back through the frame on its stack: its interrupted
// nanosleep made again, %xmm7 as it was.
TEST(Inject, ABorrowedThreadComesBackAsItWasWithOrWithoutAllocscope) {
  pid_t child = fork();
  if (child == 0) sleep_with_xmm7_live(300);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  auto code = inject::find_target_code(child);
  ASSERT_TRUE(code) << code.error();
  auto deadline = [](int ms) { return std::chrono::steady_clock::now() + std::chrono::milliseconds(ms); };
  for (int round = 0; round < 20; ++round) {
    auto t = inject::RemoteThread::take(child, child, code->gadgets, any_stop(*code), deadline(2000));
    ASSERT_TRUE(t) << t.error();
    auto pid = t->run(inject::Call{.syscall = SYS_getpid, .data = {}}, deadline(2000));
    ASSERT_TRUE(pid) << pid.error();
    EXPECT_EQ(pid->syscall_result, child);
    t->give_back();
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  // usleep is at the same address in a forked child.
  auto t = inject::RemoteThread::take(child, child, code->gadgets, any_stop(*code), deadline(2000));
  ASSERT_TRUE(t) << t.error();
  auto left = t->run(
      inject::Call{.function = uint64_t(reinterpret_cast<uintptr_t>(&usleep)), .args = {200'000}, .data = {}},
      deadline(20));
  EXPECT_FALSE(left) << "the call ended before its deadline";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << std::hex << status;
}

}  // namespace
}  // namespace allocscope::test

namespace allocscope::test {
namespace {

// A running Go program that links no runtime/pprof (its linker took memory
// profiling out: its runtime's MemProfileRate is 0) is read through its
// runtime's own sampling once record -p sets its rate, not through a trap at
// every mallocgc; at the end its rate is 0 again. Each site's bytes within
// kMaxZ standard deviations (four checks a build, each 1.8e-7).
TEST(Inject, AGoProgramWithoutPprofIsReadThroughItsRuntime) {
  REQUIRE_BPF();
  std::vector<std::string> builds = {GO_SITES_BIN, GO_SITES_STRIPPED_BIN};
  if (std::string newer = NEWER_GO_SITES_BIN; !newer.empty()) builds.push_back(newer);
  for (const std::string& binary : builds) {
    SCOPED_TRACE(binary);
    Child target({binary, "400000", "wait"});
    ASSERT_TRUE(target.wait_for_line("ready", 10000));
    std::string out = temp_path("go-rate.folded");
    Child recorder({ALLOCSCOPE_BIN, "record", "-p", std::to_string(target.pid()), "-o", out});
    ASSERT_TRUE(recorder.wait_for_line("recording process", 30000, true)) << recorder.err();
    target.signal(SIGUSR1);
    ASSERT_TRUE(target.wait_for_line("done", 120000));
    recorder.signal(SIGINT);
    ASSERT_EQ(recorder.wait(60000), 0) << recorder.err();
    EXPECT_NE(recorder.err().find("their heap read from their runtime's own sampling"), std::string::npos)
        << recorder.err();
    target.signal(SIGUSR1);
    EXPECT_EQ(target.wait(30000), 0);
    EXPECT_NE(target.out().find("rate 0\n"), std::string::npos)
        << "its MemProfileRate given back: " << target.out();
    Folded f = read_folded(out);
    std::filesystem::remove(out);
    std::istringstream said(target.out());
    int sites = 0;
    for (std::string line; std::getline(said, line);) {
      std::istringstream words(line);
      std::string function;
      double calls = 0, size = 0;
      if (!(words >> function >> calls >> size) || !function.starts_with("main.site_")) continue;
      ++sites;
      double got = 0;
      for (const auto& [frames, value] : f)
        if (std::find(frames.begin(), frames.end(), function) != frames.end()) got += value;
      EXPECT_LE(std::abs(got - calls * size), kMaxZ * ht_sigma(calls, size, 512 * 1024, true))
          << function << ": " << got << " of " << calls * size;
    }
    EXPECT_EQ(sites, 4) << target.out();
  }
}

}  // namespace
}  // namespace allocscope::test
