// A recording without BPF, end to end but for the recorder: a real program
// runs with the preload library, which connects to PreloadChannel and
// writes every allocation (rate 1) with its registers and stack into its
// ring; the test reads them, unwinds each in userspace with the program's
// own tables, and checks every site's calls and live blocks against
// alloc_sites' exact truth.
#include "host/preload_channel.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "abi/preload/trial_record.h"
#include "host/process.h"
#include "preload/ring_channel.h"
#include "preload_child.h"
#include "self_rows.h"
#include "symbols/stack_walk.h"
#include "symbols/symbolizer.h"
#include "workload_spec.h"

namespace allocscope {
namespace {

struct Record {
  uint32_t tgid;
  std::vector<uint8_t> bytes;
};

// Reads records until the program says "done" (and then what is left).
std::vector<Record> read_until_done(PreloadChannel& channel, int out) {
  std::vector<Record> got;
  auto keep = [&](const PreloadChannel::RingId&, uint32_t tgid, std::span<const uint8_t> b) {
    got.push_back({tgid, {b.begin(), b.end()}});
  };
  std::string said;
  while (said.find("done\n") == std::string::npos) {
    pollfd fds[2] = {{channel.fd(), POLLIN, 0}, {out, POLLIN, 0}};
    if (poll(fds, 2, 1) < 0) break;  // the rings do not wake poll: read them each ms
    channel.accept_waiting();
    channel.drain(keep);
    if (fds[1].revents) {
      char buf[256];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) break;
      said.append(buf, size_t(n));
    }
  }
  channel.drain(keep);
  return got;
}

// The function the allocation was made in: the first frame after the
// sampler's own.
std::vector<std::string> callers(pid_t pid, const std::vector<const as_trial_alloc*>& trials) {
  auto maps = read_maps(pid);
  EXPECT_TRUE(maps.has_value());
  SelfRows rows(*maps);
  std::vector<uint64_t> site_ips;
  for (const as_trial_alloc* t : trials) {
    const as_deferred_walk& w = t->walk;
    StackCopy mem(w.sp, {reinterpret_cast<const uint8_t*>(t + 1), w.len});
    std::vector<uint64_t> ips{w.ip};
    continue_walk({w.ip, w.sp, w.bp, 0, 0}, w.stack_end, rows, mem, ips, true);
    site_ips.push_back(ips.size() > w.skip ? ips[w.skip] : 0);
  }
  Symbolizer sym;
  std::vector<uint32_t> m = sym.resolve(pid, site_ips);
  std::vector<std::string> names;
  for (size_t i = 0; i < site_ips.size(); ++i) names.push_back(sym.describe(m[i], site_ips[i]).function);
  return names;
}

TEST(PreloadChannel, EverySitesCallsAndLiveBlocksAreTheTruth) {
  auto channel = PreloadChannel::open(uint64_t(1) << 27);
  ASSERT_TRUE(channel.has_value()) << channel.error();
  int out = -1;
  pid_t pid = start_alloc_sites_with_preload(channel->socket_path(), out);
  std::vector<Record> records = read_until_done(*channel, out);

  std::vector<const as_trial_alloc*> allocs;
  std::map<uint64_t, size_t> live;  // address -> its alloc's index
  for (const Record& r : records) {
    ASSERT_EQ(r.tgid, uint32_t(pid));
    uint32_t kind;
    std::memcpy(&kind, r.bytes.data(), sizeof kind);
    if (kind == AS_TRIAL_ALLOC) {
      const auto* t = reinterpret_cast<const as_trial_alloc*>(r.bytes.data());
      EXPECT_EQ(t->rate, 1u);
      EXPECT_EQ(t->walk.skip, uint32_t(AS_USDT_OWN_FRAMES_FULL));
      live[t->addr] = allocs.size();
      allocs.push_back(t);
    } else {
      ASSERT_EQ(kind, uint32_t(AS_TRIAL_FREE));
      const auto* f = reinterpret_cast<const as_trial_free*>(r.bytes.data());
      live.erase(f->addr);
    }
  }
  std::vector<std::string> sites = callers(pid, allocs);
  EXPECT_EQ(channel->release_finished(10'000), 0u) << "its process still runs";
  kill(pid, SIGUSR1);
  int status = 0;
  waitpid(pid, &status, 0);
  close(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(channel->counts().rings, 1u);
  EXPECT_EQ(channel->release_finished(10'500), 0u) << "at most once a second";
  EXPECT_EQ(channel->release_finished(12'000), 1u) << "read to its end, its process gone";
  PreloadChannel::Counts c = channel->counts();
  EXPECT_EQ(c.rings, 0u);
  EXPECT_EQ(c.released, 1u);
  ASSERT_EQ(c.lost, 0u) << "the ring holds the whole run" << c.lost_bytes;

  std::map<std::string, uint64_t> calls, kept;
  for (size_t i = 0; i < allocs.size(); ++i) ++calls[sites[i]];
  for (const auto& [addr, i] : live) ++kept[sites[i]];
  for (const site_spec& s : kSites) {
    uint32_t n = site_count(&s, 1);
    EXPECT_EQ(calls[s.function], 2 * n) << s.function;
    EXPECT_EQ(kept[s.function], 2 * site_kept(&s, n)) << s.function;
  }
}

// A child process that connects, writes a record, enters a PID namespace of
// its own (a user namespace first: no privilege needed) and forks a writer
// that is process 1 there. Its pipe `out` says that writer's id here (0 if
// it could not make it).
pid_t start_writer_in_pid_namespace(const std::string& socket, int& out) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  pid_t pid = fork();
  if (pid == 0) {
    as_ring_header* h = as_channel_connect(socket.c_str(), AS_CHANNEL_TIMEOUT_MS);
    if (!h) _exit(1);
    uint32_t self = as_channel_pid(h);
    as_trial_write(h, AS_TRIAL_FORK, self, self, 0);
    pid_t inner = unshare(CLONE_NEWUSER | CLONE_NEWPID) == 0 ? fork() : -1;
    if (inner == 0) {
      uint32_t one = as_channel_pid(h);
      _exit(one == 1 && as_trial_write(h, AS_TRIAL_FORK, one, one, 0) ? 0 : 1);
    }
    uint32_t here = inner > 0 ? uint32_t(inner) : 0;
    int status = 1;
    if (inner > 0) waitpid(inner, &status, 0);
    if (status != 0) here = 0;
    _exit(write(p[1], &here, sizeof here) == sizeof here ? 0 : 1);
  }
  close(p[1]);
  out = p[0];
  return pid;
}

// Records carry their writer's getpid(); the channel hands on its id here.
TEST(PreloadChannel, AWriterInAPidNamespaceIsKnownByItsIdHere) {
  auto channel = PreloadChannel::open(1 << 16);
  ASSERT_TRUE(channel.has_value());
  int out = -1;
  pid_t child = start_writer_in_pid_namespace(channel->socket_path(), out);
  std::vector<uint32_t> writers;
  auto keep = [&](const PreloadChannel::RingId& ring, uint32_t tgid, std::span<const uint8_t>) {
    EXPECT_EQ(ring.owner, child);
    writers.push_back(tgid);
  };
  uint32_t inner_here = UINT32_MAX;
  for (int ms = 0; ms < 10000 && inner_here == UINT32_MAX; ++ms) {
    pollfd fd{out, POLLIN, 0};
    channel->accept_waiting();
    channel->drain(keep);
    if (poll(&fd, 1, 1) == 1 && read(out, &inner_here, sizeof inner_here) != sizeof inner_here) break;
  }
  channel->drain(keep);
  int status = 0;
  waitpid(child, &status, 0);
  close(out);
  ASSERT_NE(inner_here, UINT32_MAX) << "no word from the child";
  ASSERT_NE(inner_here, 0u) << "no writer in a PID namespace of its own (user namespaces refused?)";
  EXPECT_EQ(writers, (std::vector<uint32_t>{uint32_t(child), inner_here}));
  EXPECT_EQ(channel->counts().hellos, 2u);
  EXPECT_EQ(channel->counts().namespaced, 1u);
  EXPECT_EQ(channel->counts().unplaced, 0u);
}

// Answers processes waiting for a ring until child `pid` exits (10 s at
// most); its wait status.
int answer_until_exit(PreloadChannel& channel, pid_t pid) {
  int status = 0;
  for (int ms = 0; ms < 10000 && waitpid(pid, &status, WNOHANG) == 0; ++ms) {
    channel.accept_waiting();
    usleep(1000);
  }
  return status;
}

// The ring size a child process is handed (0: none), the channel
// answering meanwhile.
uint64_t ring_size_handed(PreloadChannel& channel) {
  pid_t pid = fork();
  if (pid == 0) {
    as_ring_header* h = as_channel_connect(channel.socket_path().c_str(), AS_CHANNEL_TIMEOUT_MS);
    _exit(!h ? 0 : h->size == PreloadChannel::kSmallRingBytes ? 1 : h->size == (512 << 20) ? 2 : 3);
  }
  int status = answer_until_exit(channel, pid);
  return WIFEXITED(status) ? uint64_t(WEXITSTATUS(status)) : 9;
}

// Rings of 512 MiB: two fit within kMaxRingBytes (1 GiB, never touched
// here: memfd pages come as written); a third process gets a small ring.
TEST(PreloadChannel, RingsBeyondTheirBudgetAreSmall) {
  static_assert(PreloadChannel::kMaxRingBytes == uint64_t(1) << 30);
  auto channel = PreloadChannel::open(512 << 20);
  ASSERT_TRUE(channel.has_value());
  EXPECT_EQ(ring_size_handed(*channel), 2u);
  EXPECT_EQ(ring_size_handed(*channel), 2u);
  EXPECT_EQ(ring_size_handed(*channel), 1u) << "the third is small";
  EXPECT_EQ(channel->counts().small, 1u);
  EXPECT_EQ(channel->counts().rings, 3u);
}

// A hello that cannot be sent (its socket gone) leaves errno as it was:
// it is said inside the program's malloc, which must not change errno.
TEST(PreloadChannel, AFailedHelloLeavesErrnoAsItWas) {
  auto channel = PreloadChannel::open(4096);
  ASSERT_TRUE(channel.has_value());
  std::string hello = channel->socket_path().substr(0, channel->socket_path().rfind('/') + 1) + "hello";
  ASSERT_EQ(unlink(hello.c_str()), 0);
  pid_t pid = fork();
  if (pid == 0) {
    as_ring_header* h = as_channel_connect(channel->socket_path().c_str(), AS_CHANNEL_TIMEOUT_MS);
    if (!h) _exit(2);
    errno = EDOM;
    uint32_t self = as_channel_pid(h);  // its first: a hello, refused (no such socket)
    _exit(self == uint32_t(getpid()) && errno == EDOM ? 0 : 1);
  }
  int status = answer_until_exit(*channel, pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: errno changed; 2: no ring";
  EXPECT_EQ(channel->counts().hellos, 0u);
}

TEST(PreloadChannel, AProcessWithoutAnAnswerRunsUntraced) {
  EXPECT_EQ(as_channel_connect("/nonexistent/allocscope/socket", AS_CHANNEL_TIMEOUT_MS), nullptr);
  auto channel = PreloadChannel::open(4096);
  ASSERT_TRUE(channel.has_value());
  EXPECT_EQ(channel->socket_path().find("/allocscope-"), channel->socket_path().rfind("/allocscope-"));
  EXPECT_FALSE(PreloadChannel::open(5000).has_value()) << "not a power of two";
}

}  // namespace
}  // namespace allocscope
