#include "agent/connection_queue.h"

#include <algorithm>

namespace allocscope {

ConnectionQueue::ConnectionQueue(size_t workers, size_t capacity, std::atomic<uint64_t>& full)
    : pool_(workers), capacity_(std::max(capacity, workers)), full_(full) {}

void ConnectionQueue::enqueue(std::function<void()> fn) {
  std::unique_lock lock(mutex_);
  if (pending_ >= capacity_) {
    ++full_;
    freed_.wait(lock, [this] { return pending_ < capacity_; });
  }
  ++pending_;
  lock.unlock();
  pool_.enqueue([this, fn = std::move(fn)] {
    fn();
    std::lock_guard done(mutex_);
    --pending_;
    freed_.notify_one();
  });
}

void ConnectionQueue::shutdown() { pool_.shutdown(); }

}  // namespace allocscope
