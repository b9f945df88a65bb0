#include "agent/bridge.h"

#include <utility>

namespace allocscope {

Bridge::Outcome Bridge::run(Job job) {
  auto pending = std::make_shared<Pending>();
  pending->job = std::move(job);
  std::unique_lock lock(mutex_);
  if (stopped_) return Outcome::Stopped;
  if (queue_.size() >= max_pending_) return Outcome::Busy;
  queue_.push_back(pending);
  if (wake_) wake_();
  changed_.wait(lock, [&] { return pending->done || stopped_; });
  return pending->done ? Outcome::Done : Outcome::Stopped;
}

bool Bridge::sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  return !changed_.wait_for(lock, d, [&] { return stopped_; });
}

bool Bridge::stopped() const {
  std::lock_guard lock(mutex_);
  return stopped_;
}

void Bridge::on_tick(LiveView& view) {
  if (tick_) tick_(view);
  std::deque<std::shared_ptr<Pending>> jobs;
  {
    std::lock_guard lock(mutex_);
    jobs.swap(queue_);
  }
  // A request answers with what happened before it was made.
  if (!jobs.empty()) view.catch_up();
  // The jobs run unlocked (new requests queue meanwhile); each waiter's
  // state outlives its wait, so a job finishing late is harmless.
  for (auto& p : jobs) {
    p->job(view);
    std::lock_guard lock(mutex_);
    p->done = true;
  }
  if (!jobs.empty()) changed_.notify_all();
}

void Bridge::set_wake(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
}

void Bridge::on_stop() {
  std::lock_guard lock(mutex_);
  wake_ = nullptr;
  stopped_ = true;
  queue_.clear();
  changed_.notify_all();
}

}  // namespace allocscope
