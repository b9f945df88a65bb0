#include "host/preload_channel.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "abi/preload/channel.h"
#include "abi/preload/shared_ring.h"
#include "host/process.h"

namespace allocscope {

namespace {

as_ring_header* header_of(const MappedMemory& m) { return reinterpret_cast<as_ring_header*>(m.data()); }

std::string runtime_parent(const std::string& parent) {
  if (!parent.empty()) return parent;
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  struct stat st {};
  if (xdg && *xdg && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid()) return xdg;
  return "/tmp";
}

// A message of one buffer with room for one control message of `Payload`.
template <typename Payload>
struct OneMessage {
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(Payload))] = {};
  msghdr msg{};
  OneMessage(void* data, size_t len) : iov{data, len} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  OneMessage(const OneMessage&) = delete;  // msg points into it
};

// Sends the ring's memfd with one byte.
bool send_fd(int sock, int fd) {
  char byte = 'r';
  OneMessage<int> m(&byte, 1);
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == 1;
}

// A socket bound at `path` (its directory is private), not blocking.
Result<UniqueFd> bind_socket(const std::string& path, int type) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return fail("the socket's path is too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("make the preload's socket", errno);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return fail_errno("bind " + path, errno);
  return fd;
}

// Gone, or a zombie its parent has not reaped yet (it writes nothing more).
bool process_gone(uint32_t tgid) {
  if (tgid == 0 || (kill(pid_t(tgid), 0) != 0 && errno == ESRCH)) return true;
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/stat", tgid);
  std::FILE* f = std::fopen(path, "re");
  if (!f) return true;
  char line[512] = {};
  size_t n = std::fread(line, 1, sizeof line - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(line, ')');
  return n == 0 || !close || close[1] == 0 || close[2] == 'Z' || close[2] == 'X';
}

}  // namespace

Result<PreloadChannel> PreloadChannel::open(uint64_t ring_bytes, Use use, const std::string& parent) {
  if (ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1)))
    return fail("a preload ring's size must be a power of two of at least 4096 bytes");
  PreloadChannel c;
  c.ring_bytes_ = ring_bytes;
  c.use_ = use;
  std::string templ = runtime_parent(parent) + "/allocscope-XXXXXX";
  if (!mkdtemp(templ.data())) return fail_errno("make a private directory for the preload's socket", errno);
  c.socket_.dir = templ;
  c.socket_.path = templ + "/rings";
  auto listen_fd = bind_socket(c.socket_.path, SOCK_STREAM);
  if (!listen_fd) return fail(listen_fd.error());
  c.listen_ = std::move(*listen_fd);
  if (listen(c.listen_.get(), SOMAXCONN) != 0) return fail_errno("listen on " + c.socket_.path, errno);
  c.socket_.hello = templ + "/" AS_CHANNEL_HELLO_NAME;
  auto hello = bind_socket(c.socket_.hello, SOCK_DGRAM);
  if (!hello) return fail(hello.error());
  c.hello_ = std::move(*hello);
  int on = 1;  // each hello comes with its sender's id, as this process's namespace names it
  if (setsockopt(c.hello_.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return fail_errno("ask for the hellos' senders", errno);
  return c;
}

PreloadChannel::SocketPath::~SocketPath() {
  if (!path.empty()) unlink(path.c_str());
  if (!hello.empty()) unlink(hello.c_str());
  if (!dir.empty()) rmdir(dir.c_str());
}

// A ring of the size asked while the rings in use stay within kMaxRingBytes,
// else a small one: a tree of many processes is bounded, and each one traced.
uint64_t PreloadChannel::next_ring_bytes() const {
  uint64_t in_use = 0;
  for (const Ring& r : rings_) in_use += r.memory.size() - AS_RING_HEADER_BYTES;
  return in_use + ring_bytes_ <= kMaxRingBytes ? ring_bytes_ : std::min(ring_bytes_, kSmallRingBytes);
}

// A ring in a new memfd (or `fd`, when open), mapped here, its header set
// before any writer maps it; the memfd goes to the process.
Result<PreloadChannel::Ring> PreloadChannel::make_ring(pid_t pid, uint64_t number, UniqueFd& fd) const {
  if (!fd) fd.reset(memfd_create("allocscope-ring", MFD_CLOEXEC));
  if (!fd) return fail_errno("make a ring", errno);
  uint64_t size = next_ring_bytes(), bytes = AS_RING_HEADER_BYTES + size;
  if (ftruncate(fd.get(), off_t(bytes)) != 0) return fail_errno("size a ring", errno);
  auto memory = MappedMemory::map_shared(fd.get(), bytes, "a ring");
  if (!memory) return fail(memory.error());
  as_ring_beat(header_of(*memory));
  header_of(*memory)->number = number;
  header_of(*memory)->flags = use_ == Use::FreesOnly ? AS_RING_FREES_ONLY : 0;
  __atomic_store_n(&header_of(*memory)->size, size, __ATOMIC_RELEASE);
  Ring r{.id = {pid, number}, .memory = std::move(*memory)};
  return r;
}

Result<void> PreloadChannel::adopt_ring(pid_t pid, UniqueFd memfd) {
  if (rings_.size() >= kMaxRings) {
    ++counts_.refused;
    return fail("no ring for process " + std::to_string(pid) + ": " + std::to_string(kMaxRings) + " in use",
                EBUSY);
  }
  if (use_ == Use::FreesOnly && in_other_time_namespace(pid)) {
    ++counts_.other_clock;
    return fail("process " + std::to_string(pid) + " runs on a clock of its own", EXDEV);
  }
  auto ring = make_ring(pid, rings_made_ + 1, memfd);
  if (!ring) return fail(ring.error());
  ++rings_made_;
  counts_.small += ring->memory.size() - AS_RING_HEADER_BYTES < ring_bytes_;
  // No hello comes: its name for itself is known now.
  auto status = read_text_file("/proc/" + std::to_string(pid) + "/status");
  if (pid_t own = status ? namespaced_pid(*status) : 0; own > 0 && own != pid) {
    ring->namespaced = true;
    ring->pid_here[uint32_t(own)] = uint32_t(pid);
  }
  ring->pid_here[uint32_t(pid)] = uint32_t(pid);
  if (newest_ring_.size() >= 4 * kMaxRings) newest_ring_.clear();
  newest_ring_[uint32_t(pid)] = ring->id.number;
  rings_.push_back(std::move(*ring));
  return {};
}

size_t PreloadChannel::accept_waiting(const std::function<void(const RingId&)>& before_answer) {
  size_t answered = 0;
  for (;;) {
    UniqueFd conn(accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return answered;  // EAGAIN: no one else is waiting
    }
    // Closing a connection unanswered leaves its process untraced.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (rings_.size() >= kMaxRings || getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      ++counts_.refused;
      continue;
    }
    if (use_ == Use::FreesOnly && in_other_time_namespace(cred.pid)) {
      ++counts_.other_clock;
      continue;
    }
    UniqueFd memfd;
    auto ring = make_ring(cred.pid, rings_made_ + 1, memfd);
    if (!ring) {
      ++counts_.refused;
      continue;
    }
    ++rings_made_;
    counts_.small += ring->memory.size() - AS_RING_HEADER_BYTES < ring_bytes_;
    ring->namespaced = in_nested_pid_namespace(cred.pid);            // its hello may never come: know it now
    if (newest_ring_.size() >= 4 * kMaxRings) newest_ring_.clear();  // bounded; only a skip waits on it
    newest_ring_[uint32_t(cred.pid)] = ring->id.number;
    if (before_answer) before_answer(ring->id);
    if (!send_fd(conn.get(), memfd.get())) {
      ++counts_.refused;
      continue;
    }
    rings_.push_back(std::move(*ring));
    ++answered;
  }
}

// A writer that cannot finish what it began: gone, or running another
// program (it connected again for a newer ring; exec ends every thread).
bool PreloadChannel::writer_gone(uint32_t tgid, const Ring& r) const {
  auto newest = newest_ring_.find(tgid);
  return process_gone(tgid) || (newest != newest_ring_.end() && newest->second > r.id.number);
}

// Each hello: a process (its getpid()) and the ring it writes into, with
// the kernel's word for which process sent it.
void PreloadChannel::read_hellos() {
  for (;;) {
    as_channel_hello m{};
    OneMessage<ucred> in(&m, sizeof m);
    msghdr& msg = in.msg;
    ssize_t n = recvmsg(hello_.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    const cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (n != sizeof m || !c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_CREDENTIALS) continue;
    ucred cred{};
    std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
    auto r = std::find_if(rings_.begin(), rings_.end(), [&](const Ring& x) { return x.id.number == m.ring; });
    if (cred.pid <= 0 || m.pid == 0 || r == rings_.end()) continue;
    if (r->pid_here.size() >= kMaxHellos) r->pid_here.clear();
    r->pid_here[m.pid] = uint32_t(cred.pid);
    ++counts_.hellos;
    if (m.pid != uint32_t(cred.pid)) {
      r->namespaced = true;
      ++counts_.namespaced;
    }
  }
}

uint32_t PreloadChannel::writer_here(Ring& r, uint32_t pid) {
  auto it = r.pid_here.find(pid);
  if (it == r.pid_here.end()) {
    read_hellos();  // its hello was sent before its record was
    it = r.pid_here.find(pid);
  }
  if (it != r.pid_here.end()) return it->second;
  if (r.namespaced) return 0;
  // No hello could be sent: its getpid() is all there is (and is its id here).
  if (r.pid_here.size() < kMaxHellos) r.pid_here[pid] = pid;  // not looked for again each record
  return pid;
}

size_t PreloadChannel::drain(const OnRecord& on, size_t max_per_ring, const OnRecord& on_unread) {
  size_t n = 0;
  drained_all_ = true;
  read_hellos();
  for (Ring& r : rings_) {
    if (r.corrupt) continue;
    as_ring_header* h = header_of(r.memory);
    // An unknown holder is left to finish: breaking a live writer's lock would break the ring.
    if (uint32_t holder = as_ring_lock_holder(h), here = holder ? writer_here(r, holder) : 0;
        here && writer_gone(here, r)) {
      as_ring_break_dead_lock(h, holder);
      ++counts_.broken_locks;
    }
    uint64_t from = h->consumer;
    uint32_t len = 0, tgid = 0, busy = 0;
    for (size_t taken = 0;; ++taken) {
      if (taken && taken % 64 == 0) as_ring_beat(h);  // a long read: writers go on waiting for room
      if (taken == max_per_ring) {
        drained_all_ = false;
        tell_unread(r, on_unread);
        break;
      }
      const void* p = as_ring_peek(h, &len, &tgid, &busy);
      if (!p) {
        if (busy == AS_RING_CORRUPT) {  // written past its bounds: read no more of it
          r.corrupt = true;
          ++counts_.corrupt;
          break;
        }
        if (busy == 0) break;
        if (uint32_t here = writer_here(r, busy); !here || !writer_gone(here, r)) {
          drained_all_ = false;
          tell_unread(r, on_unread);
          break;
        }
        as_ring_skip_busy(h);
        ++counts_.abandoned;
        continue;
      }
      if (uint32_t here = writer_here(r, tgid); here == 0) {
        ++counts_.unplaced;
      } else {
        if (here != uint32_t(r.id.owner) &&
            std::find(r.writers.begin(), r.writers.end(), here) == r.writers.end())
          r.writers.push_back(here);
        on(r.id, here, {static_cast<const uint8_t*>(p), len});
        ++n;
      }
      as_ring_release(h);
    }
    // Writers may wait for room only while the reader gets on.
    if (h->consumer != from || h->consumer == __atomic_load_n(&h->producer, __ATOMIC_ACQUIRE))
      as_ring_beat(h);
  }
  counts_.records += n;
  return n;
}

void PreloadChannel::tell_unread(Ring& r, const OnRecord& on_unread) {
  uint32_t len = 0;
  if (const void* p = on_unread ? as_ring_front(header_of(r.memory), &len) : nullptr)
    on_unread(r.id, 0, {static_cast<const uint8_t*>(p), len});
}

size_t PreloadChannel::release_finished(uint64_t now_ms) {
  if (now_ms < last_release_ms_ + 1000) return 0;
  last_release_ms_ = now_ms;
  size_t before = rings_.size();
  std::erase_if(rings_, [this](Ring& r) {
    std::erase_if(r.writers, [](uint32_t tgid) { return process_gone(tgid); });
    as_ring_header* h = header_of(r.memory);
    bool read = r.corrupt || __atomic_load_n(&h->producer, __ATOMIC_ACQUIRE) == h->consumer;
    if (!read || !r.writers.empty() || !process_gone(uint32_t(r.id.owner))) return false;
    retired_lost_ += __atomic_load_n(&h->lost, __ATOMIC_RELAXED);
    retired_lost_bytes_ += __atomic_load_n(&h->lost_bytes, __ATOMIC_RELAXED);
    return true;
  });
  counts_.released += before - rings_.size();
  return before - rings_.size();
}

PreloadChannel::Counts PreloadChannel::counts() const {
  Counts c = counts_;
  c.lost = retired_lost_;
  c.lost_bytes = retired_lost_bytes_;
  c.rings = rings_.size();
  for (const Ring& r : rings_) {
    const as_ring_header* h = header_of(r.memory);
    c.lost += __atomic_load_n(&h->lost, __ATOMIC_RELAXED);
    c.lost_bytes += __atomic_load_n(&h->lost_bytes, __ATOMIC_RELAXED);
  }
  return c;
}

}  // namespace allocscope
