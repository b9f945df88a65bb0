// cpp-httplib's server with the bounds an agent scraped by many clients
// needs, which the library (0.11, Debian 12's) does not give: a listen
// backlog of SOMAXCONN rather than 5, and deadlines per request rather than
// per read, so that a client sending a byte a second, or reading the answer
// as slowly, holds a worker for seconds, not for as long as it likes.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace allocscope {

struct ServerDeadlines {
  std::chrono::milliseconds request{5000};     // the whole request read, from its first byte awaited
  std::chrono::milliseconds response{20000};   // the whole answer written
  std::chrono::milliseconds keep_alive{5000};  // idle between two requests of a connection
};

class AgentServer : public httplib::Server {
 public:
  explicit AgentServer(ServerDeadlines d = {}) : deadlines_(d) {}
  // After bind_to_port: the backlog raised to what the system allows.
  bool raise_backlog();
  // Requests or answers cut short by their deadline.
  uint64_t timed_out() const { return timed_out_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  bool idle_until_readable(int sock) const;

  ServerDeadlines deadlines_;
  std::atomic<uint64_t> timed_out_{0};
};

}  // namespace allocscope
