#include "host/answered_channel.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

namespace allocscope {

Result<std::unique_ptr<AnsweredChannel>> AnsweredChannel::open(uint64_t ring_bytes, PreloadChannel::Use use) {
  auto channel = PreloadChannel::open(ring_bytes, use);
  if (!channel) return fail(channel.error());
  std::unique_ptr<AnsweredChannel> c(new AnsweredChannel(std::move(*channel)));
  c->stop_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!c->stop_) return fail_errno("make the preload channel's stop", errno);
  c->thread_ = std::thread([raw = c.get()] { raw->answer(); });
  return c;
}

AnsweredChannel::~AnsweredChannel() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void AnsweredChannel::answer() {
  for (;;) {
    pollfd fds[2] = {{channel_.fd(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (fds[0].revents) {
      std::lock_guard<std::mutex> lock(mutex_);
      channel_.accept_waiting();
    }
  }
}

size_t AnsweredChannel::drain(const PreloadChannel::OnRecord& on, size_t max_per_ring,
                              const PreloadChannel::OnRecord& on_unread) {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.drain(on, max_per_ring, on_unread);
}

size_t AnsweredChannel::release_finished(uint64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.release_finished(now_ms);
}

Result<void> AnsweredChannel::adopt_ring(pid_t pid, UniqueFd memfd) {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.adopt_ring(pid, std::move(memfd));
}

PreloadChannel::Counts AnsweredChannel::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.counts();
}

}  // namespace allocscope
