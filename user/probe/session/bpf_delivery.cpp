// The session's events: waiting for them, and handing them on.
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "allocscope.h"  // before the skeleton, which names its types
#include "allocscope.skel.h"
#include "probe/session/bpf_session.h"

namespace allocscope {

// The ring buffer's own epoll set, nested in one that also holds an eventfd
// that wake() writes: another thread can end the wait at once. (libbpf's
// set cannot take foreign descriptors: it reads each event as a ring index.)
Result<void> BpfSession::make_waker() {
  // The ring buffer's consumer and producer positions, a page each.
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  auto positions =
      MappedMemory::map_shared_read(bpf_map__fd(skel_->maps.events), 2 * page, "the ring buffer's positions");
  if (!positions) return fail(positions.error());
  ring_positions_ = std::move(*positions);
  wake_fd_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!wake_fd_ || !epoll_) return fail_errno("create the ring buffer's wait set", errno);
  for (int fd : {ring_buffer__epoll_fd(ring_.get()), wake_fd_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return fail_errno("watch the ring buffer", errno);
  }
  return {};
}

Result<void> BpfSession::wake_once_readable(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;  // a dead process's pidfd stays readable
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) return fail_errno("watch a target's exit", errno);
  return {};
}

void BpfSession::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_.get(), &one, sizeof one);  // a full counter is awake already
}

Result<void> BpfSession::wait(int timeout_ms) {
  epoll_event ev[2];
  if (epoll_wait(epoll_.get(), ev, 2, timeout_ms) < 0 && errno != EINTR)
    return fail_errno("poll ring buffer", errno);
  uint64_t wakes;
  [[maybe_unused]] ssize_t n = read(wake_fd_.get(), &wakes, sizeof wakes);  // re-arm
  return {};
}

uint64_t BpfSession::events_placed() const {
  auto* p = reinterpret_cast<const uint64_t*>(ring_positions_.data() + ring_positions_.size() / 2);
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint64_t BpfSession::events_read() const {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(ring_positions_.data()), __ATOMIC_ACQUIRE);
}

Result<BpfSession::Delivered> BpfSession::deliver() {
  // Events are mostly submitted without a wakeup: read what is there.
  uint64_t before = handed_;
  int got = ring_buffer__consume(ring_.get());
  if (got < 0 && got != kStopDelivery) return fail_errno("read ring buffer", -got);
  return Delivered{int(handed_ - before), got == kStopDelivery};
}

}  // namespace allocscope
