#include "agent/agent_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace allocscope {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` has `events` or `deadline` passes (false then).
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, int(left));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
    return;
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    port = ntohs(in6->sin6_port);
  }
  ip = text;
}

// One request and its answer on a connection: reads must all be done by one
// deadline, writes by another, each counted from the first of its kind.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, const ServerDeadlines& d, std::atomic<uint64_t>& timed_out)
      : fd_(fd), deadlines_(d), timed_out_(timed_out), read_by_(Clock::now() + d.request) {}

  bool is_readable() const override { return buffered() > 0 || wait_for(fd_, POLLIN, read_by_) || late(); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_by()) || late(); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered() == 0) {
      if (!wait_for(fd_, POLLIN, read_by_)) return late(), -1;
      ssize_t n;
      do n = ::recv(fd_, buffer_, sizeof buffer_, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = size_t(n);
    }
    size_t n = std::min(size, buffered());
    std::copy(buffer_ + begin_, buffer_ + begin_ + n, ptr);
    begin_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {
      writing_ = true;
      write_by_ = Clock::now() + deadlines_.response;
    }
    if (!wait_for(fd_, POLLOUT, write_by_)) return late(), -1;
    ssize_t n;
    do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  size_t buffered() const { return end_ - begin_; }
  Clock::time_point write_by() const { return writing_ ? write_by_ : Clock::now() + deadlines_.response; }
  // Counts a deadline passed; false, for the callers' "not ready".
  bool late() const {
    ++timed_out_;
    return false;
  }

  int fd_;
  const ServerDeadlines& deadlines_;
  std::atomic<uint64_t>& timed_out_;
  Clock::time_point read_by_, write_by_;
  bool writing_ = false;
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

}  // namespace

// In slices, so that a stopping server does not wait out an idle client.
bool AgentServer::idle_until_readable(int sock) const {
  auto until = Clock::now() + deadlines_.keep_alive;
  for (auto now = Clock::now(); now < until && is_running(); now = Clock::now())
    if (wait_for(sock, POLLIN, std::min(until, now + std::chrono::milliseconds(100)))) return true;
  return false;
}

bool AgentServer::raise_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }

// The library's loop over a connection's requests, with our stream.
bool AgentServer::process_and_close_socket(socket_t sock) {
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0 && is_running(); --left) {
    if (!idle_until_readable(sock)) break;
    DeadlineStream stream(sock, deadlines_, timed_out_);
    bool closed = false;
    ok = process_request(stream, left == 1, closed, nullptr);
    if (!ok || closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace allocscope
