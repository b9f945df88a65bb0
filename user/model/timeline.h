// Live bytes and bytes allocated per stack over a recording, taken at ticks:
// what the timeline chart draws. A point lists only the stacks whose figures
// changed since the one before, so a long recording of a steady program
// stays small; and the points are bounded: past the capacity, neighbours
// merge two by two and the period between points doubles. Pure logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "model/profile.h"

namespace allocscope {

struct TimelinePoint {
  uint64_t t_ms = 0;      // since the recording began
  double live_total = 0;  // bytes live, every stack
  // (stack index, value) of the stacks that changed since the point before:
  // bytes live now, and bytes allocated since the recording began.
  std::vector<std::pair<uint32_t, float>> live, allocated;
};

class Timeline {
 public:
  static constexpr uint64_t kFirstPeriodMs = 100;
  explicit Timeline(size_t max_points = 512, size_t max_entries = size_t(1) << 21);

  // Takes a point once the period has passed since the last one, or at
  // once with `force` (before --interval resets the allocation totals, and
  // at the end).
  void observe(uint64_t t_ms, const Profile& profile, bool force = false);
  // A point from figures by stack index: bytes live, and bytes allocated
  // since the start (a series of saved profiles: report --timeline).
  void add_point(uint64_t t_ms, const std::vector<double>& live, const std::vector<double>& allocated);

  const std::vector<TimelinePoint>& points() const { return points_; }
  uint64_t period_ms() const { return period_ms_; }
  size_t entries() const { return entries_; }
  // Each stack's highest live bytes over the points.
  std::vector<double> highest_live() const;
  // The live bytes of these stacks at each point, rebuilt from the changes.
  std::vector<std::vector<double>> live_series(const std::vector<uint32_t>& stacks) const;

 private:
  void halve();

  size_t max_points_, max_entries_;
  uint64_t period_ms_ = kFirstPeriodMs;
  std::vector<TimelinePoint> points_;
  size_t entries_ = 0;
  std::vector<double> live_, allocated_;  // by stack, as of the last point
  std::vector<double> raw_allocated_;     // the profile's own totals at the last observe
};

}  // namespace allocscope
