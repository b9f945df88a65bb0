// The HTTP server's threads hand their work to the recording's thread, the
// only one that touches the profile and the symbolizer, and wait for it to
// be done (at most ~100 ms later: the loop ticks between polls). The jobs
// see the events placed before they were asked for (LiveView::catch_up).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "record/live_view.h"

namespace allocscope {

class Bridge final : public RecordObserver {
 public:
  using Job = std::function<void(LiveView&)>;
  enum class Outcome { Done, Busy, Stopped };

  // At most `max_pending` jobs wait at once; more are turned away (Busy).
  explicit Bridge(size_t max_pending) : max_pending_(max_pending) {}

  // Runs `job` on the recording's thread and returns once it has run, or
  // at once when the queue is full or the recording has stopped.
  Outcome run(Job job);
  // Waits `d` unless the recording stops first (then false).
  bool sleep(std::chrono::milliseconds d);
  bool stopped() const;
  // Work of the agent's own, run on every tick before the queued jobs.
  void set_tick(Job tick) { tick_ = std::move(tick); }

  void on_tick(LiveView& view) override;
  void set_wake(std::function<void()> wake) override;
  void on_stop() override;

 private:
  struct Pending {
    Job job;
    bool done = false;
  };
  const size_t max_pending_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Pending>> queue_;
  bool stopped_ = false;
  Job tick_;
  std::function<void()> wake_;  // guarded by mutex_: cleared at on_stop, before the recording goes
};

}  // namespace allocscope
