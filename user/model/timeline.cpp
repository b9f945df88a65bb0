#include "model/timeline.h"

#include <algorithm>

namespace allocscope {
namespace {

// The changes of `earlier` and `later` as one: the later value of a stack stands.
std::vector<std::pair<uint32_t, float>> merged(const std::vector<std::pair<uint32_t, float>>& earlier,
                                               const std::vector<std::pair<uint32_t, float>>& later) {
  std::vector<std::pair<uint32_t, float>> out;
  out.reserve(earlier.size() + later.size());
  size_t i = 0, j = 0;  // both ascending by stack
  while (i < earlier.size() || j < later.size()) {
    if (j == later.size() || (i < earlier.size() && earlier[i].first < later[j].first)) {
      out.push_back(earlier[i++]);
    } else {
      if (i < earlier.size() && earlier[i].first == later[j].first) ++i;
      out.push_back(later[j++]);
    }
  }
  return out;
}

TimelinePoint merged(const TimelinePoint& earlier, const TimelinePoint& later) {
  return {later.t_ms, later.live_total, merged(earlier.live, later.live),
          merged(earlier.allocated, later.allocated)};
}

size_t entries_of(const TimelinePoint& p) { return p.live.size() + p.allocated.size(); }

}  // namespace

Timeline::Timeline(size_t max_points, size_t max_entries)
    : max_points_(std::max<size_t>(max_points, 4)), max_entries_(max_entries) {}

void Timeline::observe(uint64_t t_ms, const Profile& profile, bool force) {
  if (!force && !points_.empty() && t_ms < points_.back().t_ms + period_ms_) return;
  const std::vector<StackRecord>& stacks = profile.stacks();
  raw_allocated_.resize(stacks.size(), 0);
  std::vector<double> live(stacks.size()), allocated(allocated_);
  allocated.resize(stacks.size(), 0);
  for (uint32_t i = 0; i < stacks.size(); ++i) {
    const StackTotals& t = stacks[i].totals;
    live[i] = t.live_bytes;
    // --interval sets the profile's allocation totals back to zero: what
    // was counted before carries on here.
    double raw = t.alloc_bytes;
    allocated[i] += raw >= raw_allocated_[i] ? raw - raw_allocated_[i] : raw;
    raw_allocated_[i] = raw;
  }
  add_point(t_ms, live, allocated);
}

void Timeline::add_point(uint64_t t_ms, const std::vector<double>& live,
                         const std::vector<double>& allocated) {
  size_t n = std::max(live.size(), allocated.size());
  live_.resize(std::max(live_.size(), n), 0);
  allocated_.resize(std::max(allocated_.size(), n), 0);
  TimelinePoint p;
  p.t_ms = t_ms;
  for (uint32_t i = 0; i < n; ++i) {
    double l = i < live.size() ? live[i] : 0, a = i < allocated.size() ? allocated[i] : 0;
    p.live_total += l;
    if (l != live_[i]) {
      live_[i] = l;
      p.live.emplace_back(i, float(l));
    }
    if (a != allocated_[i]) {
      allocated_[i] = a;
      p.allocated.emplace_back(i, float(a));
    }
  }
  // Two points at one moment (a forced one right after a tick): one stands.
  if (!points_.empty() && points_.back().t_ms == t_ms) {
    entries_ -= entries_of(points_.back());
    points_.back() = merged(points_.back(), p);
  } else {
    points_.push_back(std::move(p));
  }
  entries_ += entries_of(points_.back());
  while (points_.size() > max_points_ || (entries_ > max_entries_ && points_.size() > 2)) halve();
}

// Neighbours merge two by two (the later moment of each pair stands; the
// first point, the recording's start, is kept), and points come half as often.
void Timeline::halve() {
  std::vector<TimelinePoint> kept;
  kept.push_back(std::move(points_[0]));
  for (size_t i = 1; i < points_.size(); i += 2)
    kept.push_back(i + 1 < points_.size() ? merged(points_[i], points_[i + 1]) : std::move(points_[i]));
  points_ = std::move(kept);
  entries_ = 0;
  for (const TimelinePoint& p : points_) entries_ += entries_of(p);
  period_ms_ *= 2;
}

std::vector<double> Timeline::highest_live() const {
  std::vector<double> high(live_.size(), 0);
  for (const TimelinePoint& p : points_)
    for (auto [stack, bytes] : p.live) high[stack] = std::max(high[stack], double(bytes));
  return high;
}

std::vector<std::vector<double>> Timeline::live_series(const std::vector<uint32_t>& stacks) const {
  std::vector<std::vector<double>> out(stacks.size());
  std::vector<double> now(live_.size(), 0);
  for (const TimelinePoint& p : points_) {
    for (auto [stack, bytes] : p.live) now[stack] = bytes;
    for (size_t k = 0; k < stacks.size(); ++k) out[k].push_back(stacks[k] < now.size() ? now[stacks[k]] : 0);
  }
  return out;
}

}  // namespace allocscope
