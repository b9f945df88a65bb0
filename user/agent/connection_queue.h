// The HTTP server's connections waiting for a worker, bounded: cpp-httplib's
// own pool queues every accepted connection without limit. When the queue
// is full, the accepting thread waits for a slot, so further connections
// wait in the kernel's listen backlog (itself bounded) instead of our heap.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace allocscope {

class ConnectionQueue : public httplib::TaskQueue {
 public:
  // `capacity`: connections accepted and not yet finished (running or
  // waiting), at least `workers`. `full` counts the times it was reached.
  ConnectionQueue(size_t workers, size_t capacity, std::atomic<uint64_t>& full);
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  httplib::ThreadPool pool_;
  size_t capacity_;
  std::atomic<uint64_t>& full_;
  std::mutex mutex_;
  std::condition_variable freed_;
  size_t pending_ = 0;
};

}  // namespace allocscope
