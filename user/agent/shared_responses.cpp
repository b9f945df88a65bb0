#include "agent/shared_responses.h"

#include <iterator>

namespace allocscope {

void SharedResponses::forget_old(Clock::time_point now) {
  for (auto it = entries_.begin(); it != entries_.end();)
    it = it->second.answer && now - it->second.built >= window_ ? entries_.erase(it) : std::next(it);
}

std::shared_ptr<const SharedAnswer> SharedResponses::get(const std::string& key, Clock::time_point now,
                                                         const std::function<SharedAnswer()>& build) {
  std::unique_lock lock(mutex_);
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    if (!it->second.answer) {  // another request builds it
      built_.wait(lock);
      continue;
    }
    if (now - it->second.built < window_) {
      ++shared_;
      return it->second.answer;
    }
    entries_.erase(it);
    break;
  }
  forget_old(now);
  bool kept = entries_.size() < capacity_;
  if (kept) entries_[key] = Entry{nullptr, now};
  lock.unlock();
  std::shared_ptr<const SharedAnswer> answer;
  try {
    answer = std::make_shared<const SharedAnswer>(build());
  } catch (...) {
    lock.lock();
    if (kept) entries_.erase(key);
    built_.notify_all();
    throw;
  }
  lock.lock();
  if (kept) {
    if (answer->status == 200)
      entries_[key] = Entry{answer, now};
    else
      entries_.erase(key);  // waiters build their own
    built_.notify_all();
  }
  return answer;
}

}  // namespace allocscope
