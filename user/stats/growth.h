// Is a set's live size growing steadily over a recording? Read from the live
// sets at the ends of successive intervals (record --interval) and what each
// interval allocated. Pure math; docs/estimates.md section 12.
//
// Between two moments the live size changes by what was allocated in
// between and is still live, less what was live at the first and was freed.
// The two sets are disjoint and sampled independently, and each is a subset
// of a set whose Horvitz-Thompson variance is known (everything allocated in
// between; everything live at the first moment): the sum of those two
// variances bounds the variance of the change, whatever the lifetimes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stats/intervals.h"

namespace allocscope {

struct LivePoint {
  double seconds = 0;       // end of the interval, from the series' start
  IntervalStats live;       // live at that moment
  IntervalStats allocated;  // allocated during the interval that ends here
};

struct Growth {
  double per_second = 0;       // live bytes gained per second over the span
  Interval interval{0, 0};     // of per_second
  double p_value = 1;          // one-sided: growth in each half of the span (the larger p)
  double allocated = 0;        // bytes allocated over the span
  size_t first = 0, last = 0;  // the span: points[first] to points[last]
};

// Growth of live bytes from the second point (the first interval is
// warm-up: caches fill there) to the last, tested in both halves of that
// span: a set that grew once, or grew and shrank back, is not growing
// steadily. Needs at least 3 points (with 3, the span starts at the first).
Growth live_growth(const std::vector<LivePoint>& points, uint64_t rate, double confidence);

}  // namespace allocscope
