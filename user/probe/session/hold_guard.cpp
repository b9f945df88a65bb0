#include "probe/session/hold_guard.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace allocscope {

namespace {

void time_hold(RecentDurations& times, uint64_t since) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t ns = uint64_t(now.tv_sec) * 1000000000 + uint64_t(now.tv_nsec);
  if (since <= ns) times.add(ns - since);
}

}  // namespace

size_t release_every_held(int held_map, uint64_t before_ns, const std::unordered_set<uint32_t>* waiting,
                          uint64_t waiting_before_ns, RecentDurations* times, std::vector<uint32_t>* pids) {
  size_t released = 0;
  uint32_t key = 0, next = 0;
  bool first = true;
  // Deleting while walking restarts the walk: the next key is taken first.
  while (bpf_map_get_next_key(held_map, first ? nullptr : &key, &next) == 0) {
    first = false;
    key = next;
    uint64_t since = 0;
    if (bpf_map_lookup_elem(held_map, &key, &since) != 0) continue;
    if (since >= (waiting && waiting->contains(key) ? waiting_before_ns : before_ns)) continue;
    // Whoever deletes the entry continues the process: exactly once, and
    // never a later process of the same id (its exit deleted the entry).
    if (bpf_map_delete_elem(held_map, &key) != 0) continue;
    kill(pid_t(key), SIGCONT);
    if (times) time_hold(*times, since);
    if (pids) pids->push_back(key);
    ++released;
    first = true;  // the walk's position is gone with the key
  }
  return released;
}

namespace {

// The guard: waits for allocscope's end (the pipe's writer closed), then
// continues whatever is still held. Only async-signal-safe calls: it is
// forked from a process that may have threads.
[[noreturn]] void guard_main(int held_map, int pipe_read) {
  // The terminal's ^C and a unit's stop reach the whole group: the guard
  // outlasts them until allocscope is gone.
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  prctl(PR_SET_NAME, "allocscope-hold", 0, 0, 0);
  // Nothing else of allocscope's kept alive by the guard (probes, files,
  // the pipes its output goes to).
  int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3 && null >= 0; ++fd) dup2(null, fd);
  unsigned low = unsigned(held_map < pipe_read ? held_map : pipe_read);
  unsigned high = unsigned(held_map < pipe_read ? pipe_read : held_map);
  if (low > 3) syscall(SYS_close_range, 3u, low - 1, 0u);
  if (high > low + 1) syscall(SYS_close_range, low + 1, high - 1, 0u);
  syscall(SYS_close_range, high + 1, ~0u, 0u);
  char byte;
  for (;;) {  // EOF: allocscope closed its end, or died
    ssize_t n = read(pipe_read, &byte, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  release_every_held(held_map);
  _exit(0);
}

}  // namespace

Result<std::unique_ptr<HoldGuard>> HoldGuard::start(int held_map, int relays_map) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return fail_errno("create the hold guard's pipe", errno);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  pid_t pid = fork();
  if (pid < 0) return fail_errno("fork the hold guard", errno);
  if (pid == 0) guard_main(held_map, read_end.get());
  return std::unique_ptr<HoldGuard>(new HoldGuard(held_map, relays_map, std::move(write_end), pid));
}

HoldGuard::~HoldGuard() {
  release_every_held(map_);
  pipe_.reset();
  int status;
  while (waitpid(guard_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool HoldGuard::release(uint32_t tgid, uint64_t stamp, RecentDurations* times) {
  // Looked up, then deleted: in between only this thread continues held
  // processes (the guard's own process waits for allocscope's end), and a
  // process makes no new hold before it is continued.
  uint64_t since = 0;
  if (bpf_map_lookup_elem(map_, &tgid, &since) != 0 || since != stamp) return false;
  if (bpf_map_delete_elem(map_, &tgid) != 0) return false;
  kill(pid_t(tgid), SIGCONT);
  if (times) time_hold(*times, since);
  release_relays(tgid);
  return true;
}

// After the child, so that a parent continued finds it running. A parent
// no longer held (continued by the bound) stops the chain.
void HoldGuard::release_relays(uint32_t child) {
  constexpr int kMaxChain = 8;  // su under sudo under ...: a few at most
  for (int i = 0; i < kMaxChain && relays_ >= 0; ++i) {
    uint32_t parent = 0;
    if (bpf_map_lookup_elem(relays_, &child, &parent) != 0) return;
    bpf_map_delete_elem(relays_, &child);
    if (bpf_map_delete_elem(map_, &parent) != 0) return;
    kill(pid_t(parent), SIGCONT);
    child = parent;
  }
}

size_t HoldGuard::release_older(uint64_t before_ns, const std::unordered_set<uint32_t>& waiting,
                                uint64_t waiting_before_ns, RecentDurations* times,
                                std::vector<uint32_t>* pids) {
  return release_every_held(map_, before_ns, &waiting, waiting_before_ns, times, pids);
}

}  // namespace allocscope
