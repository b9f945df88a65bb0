// Answers built once and shared. Scrapers that arrive together (a fleet's
// Prometheus, Parca and a person's `go tool pprof`) and ask for the same
// thing within a short window get the same bytes, and those that ask while
// it is being built wait for it instead of building it again: one profile
// built, not sixty-four. Bounded: past its capacity an answer is built and
// not kept.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace allocscope {

struct SharedAnswer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type among them
  std::string body;
};

class SharedResponses {
 public:
  using Clock = std::chrono::steady_clock;
  SharedResponses(std::chrono::milliseconds window, size_t capacity) : window_(window), capacity_(capacity) {}

  // The answer for `key` built less than the window before `now`, the one
  // being built (waited for), or a new one from `build`. Answers other than
  // 200 are never shared.
  std::shared_ptr<const SharedAnswer> get(const std::string& key, Clock::time_point now,
                                          const std::function<SharedAnswer()>& build);
  // Answers given from another request's build.
  uint64_t shared() const { return shared_; }

 private:
  struct Entry {
    std::shared_ptr<const SharedAnswer> answer;  // null while building
    Clock::time_point built;
  };
  void forget_old(Clock::time_point now);

  const std::chrono::milliseconds window_;
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable built_;
  std::map<std::string, Entry> entries_;
  uint64_t shared_ = 0;
};

}  // namespace allocscope
