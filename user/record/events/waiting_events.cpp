#include "record/events/waiting_events.h"

#include <algorithm>

namespace allocscope {

bool WaitingEvents::must_wait(uint32_t tgid, uint64_t stack, uint64_t addr) const {
  auto it = processes_.find(tgid);
  if (it == processes_.end()) return false;
  const Held& h = it->second;
  return (stack && h.stacks.contains(stack)) || (addr && h.addrs.contains(addr));
}

void WaitingEvents::hold(uint32_t tgid, Event event, uint64_t stack, uint64_t addr, uint64_t since_ns) {
  auto [it, made] = processes_.try_emplace(tgid);
  Held& h = it->second;
  if (made) h.since_ns = since_ns;
  bytes_ += event_bytes(event);
  h.events.push_back(std::move(event));
  if (stack) h.stacks.insert(stack);
  if (addr) h.addrs.insert(addr);
}

std::deque<Event> WaitingEvents::take(uint32_t tgid) {
  auto it = processes_.find(tgid);
  if (it == processes_.end()) return {};
  std::deque<Event> events = std::move(it->second.events);
  for (const Event& e : events) bytes_ -= event_bytes(e);
  processes_.erase(it);
  return events;
}

uint64_t WaitingEvents::since_ns(uint32_t tgid) const {
  auto it = processes_.find(tgid);
  return it == processes_.end() ? 0 : it->second.since_ns;
}

std::vector<uint32_t> WaitingEvents::processes() const {
  std::vector<uint32_t> tgids;
  for (const auto& [tgid, h] : processes_) tgids.push_back(tgid);
  std::stable_sort(tgids.begin(), tgids.end(),
                   [this](uint32_t a, uint32_t b) { return since_ns(a) < since_ns(b); });
  return tgids;
}

}  // namespace allocscope
