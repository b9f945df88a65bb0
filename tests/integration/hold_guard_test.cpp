// HoldGuard with a real BPF map and real stopped processes: a process held
// is continued once, by whoever deletes its entry, and never left stopped
// when the session ends or allocscope dies.
#include "probe/session/hold_guard.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "harness.h"

namespace allocscope::test {
namespace {

uint64_t monotonic_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// A child that stops itself, as the kernel's SIGSTOP stops a held process;
// it exits 7 once continued.
pid_t stopped_child() {
  pid_t pid = fork();
  if (pid == 0) {
    raise(SIGSTOP);
    _exit(7);
  }
  int status;
  EXPECT_EQ(waitpid(pid, &status, WUNTRACED), pid);
  EXPECT_TRUE(WIFSTOPPED(status));
  return pid;
}

// Whether `pid` ran to its exit within the timeout (it was continued).
bool exits(pid_t pid, int timeout_ms = 10000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 7;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

struct HeldMap {
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "held_test", 4, 8, 64, nullptr);
  ~HeldMap() {
    if (fd >= 0) close(fd);
  }
  void hold(pid_t pid, uint64_t since_ns) {
    uint32_t key = uint32_t(pid);
    ASSERT_EQ(bpf_map_update_elem(fd, &key, &since_ns, BPF_NOEXIST), 0);
  }
  bool holds(pid_t pid) const {
    uint32_t key = uint32_t(pid);
    uint64_t v;
    return bpf_map_lookup_elem(fd, &key, &v) == 0;
  }
};

// The kernel's hold_relays: a held child -> the parent held with it.
struct RelaysMap {
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "relays_test", 4, 4, 64, nullptr);
  ~RelaysMap() {
    if (fd >= 0) close(fd);
  }
  void link(pid_t child, pid_t parent) {
    uint32_t key = uint32_t(child), value = uint32_t(parent);
    ASSERT_EQ(bpf_map_update_elem(fd, &key, &value, BPF_ANY), 0);
  }
};

// A held map and its guard, started.
class HoldGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_BPF();
    ASSERT_GE(map.fd, 0);
    ASSERT_GE(relays.fd, 0);
    auto started = HoldGuard::start(map.fd, relays.fd);
    ASSERT_TRUE(started) << started.error().message;
    guard = std::move(*started);
  }
  HeldMap map;
  RelaysMap relays;
  std::unique_ptr<HoldGuard> guard;
};

TEST_F(HoldGuardTest, ReleasesOnceAndOnlyWhatItHolds) {
  pid_t a = stopped_child();
  uint64_t stamp = monotonic_now_ns();
  map.hold(a, stamp);
  EXPECT_TRUE(guard->release(uint32_t(a), stamp));
  EXPECT_FALSE(guard->release(uint32_t(a), stamp));  // once
  EXPECT_FALSE(map.holds(a));
  EXPECT_TRUE(exits(a));
  EXPECT_FALSE(guard->release(uint32_t(getpid()), stamp));  // never one not held
}

// su under sudo: each stopped itself when its child stopped, and the kernel
// held it with that child. Releasing the child continues the chain; a
// parent the bound continued already is not continued again.
TEST_F(HoldGuardTest, ContinuesTheParentsThatStoppedWithTheChild) {
  pid_t child = stopped_child(), su = stopped_child(), sudo = stopped_child();
  uint64_t stamp = monotonic_now_ns();
  for (pid_t p : {child, su, sudo}) map.hold(p, stamp);
  relays.link(child, su);
  relays.link(su, sudo);
  EXPECT_TRUE(guard->release(uint32_t(child), stamp));
  for (pid_t p : {child, su, sudo}) {
    EXPECT_FALSE(map.holds(p)) << p;
    EXPECT_TRUE(exits(p)) << p;
  }
  pid_t other = stopped_child(), unheld = stopped_child();
  map.hold(other, stamp);
  relays.link(other, unheld);
  EXPECT_TRUE(guard->release(uint32_t(other), stamp));
  EXPECT_TRUE(exits(other));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status;
  EXPECT_EQ(waitpid(unheld, &status, WNOHANG | WCONTINUED), 0) << "continued, though not held";
  kill(unheld, SIGCONT);
  EXPECT_TRUE(exits(unheld));
}

// An event read late (its hold already ended by the bound) names its own
// hold: the process, held again since (at _exit, for its Python frames),
// stays held until that hold's own event.
TEST_F(HoldGuardTest, ALateEventNeverEndsALaterHold) {
  pid_t a = stopped_child();
  uint64_t first = monotonic_now_ns() - 2000000000, later = first + 1500000000;
  map.hold(a, later);
  EXPECT_FALSE(guard->release(uint32_t(a), first));
  EXPECT_TRUE(map.holds(a));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int status;
  EXPECT_EQ(waitpid(a, &status, WNOHANG), 0) << "continued by an earlier hold's event";
  EXPECT_TRUE(guard->release(uint32_t(a), later));
  EXPECT_TRUE(exits(a));
}

TEST_F(HoldGuardTest, ReleasesThoseHeldPastTheBound) {
  uint64_t now = monotonic_now_ns();
  pid_t old_one = stopped_child(), new_one = stopped_child();
  map.hold(old_one, now - 2000000000);
  map.hold(new_one, now);
  EXPECT_EQ(guard->release_older(now - 1000000000), 1u);
  EXPECT_TRUE(exits(old_one));
  EXPECT_TRUE(map.holds(new_one));
  guard.reset();  // the session's end continues the rest
  EXPECT_FALSE(map.holds(new_one));
  EXPECT_TRUE(exits(new_one));
}

// allocscope killed (no destructor runs): its guard process continues
// every process still held.
TEST(HoldGuard, GuardContinuesTheHeldWhenItsOwnerDies) {
  REQUIRE_BPF();
  HeldMap map;
  ASSERT_GE(map.fd, 0);
  pid_t held = stopped_child();
  map.hold(held, monotonic_now_ns());
  pid_t owner = fork();
  if (owner == 0) {
    auto guard = HoldGuard::start(map.fd);
    if (!guard) _exit(1);
    guard->release();  // as if killed: the guard is never told
    kill(getpid(), SIGKILL);
  }
  int status;
  ASSERT_EQ(waitpid(owner, &status, 0), owner);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(exits(held));
  EXPECT_FALSE(map.holds(held));
}

}  // namespace
}  // namespace allocscope::test
