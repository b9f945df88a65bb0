#include "stats/growth.h"

#include <algorithm>
#include <cmath>

#include "stats/special_functions.h"

namespace allocscope {
namespace {

struct Change {
  double bytes = 0, variance = 0, seconds = 0, allocated = 0;
};

// Live bytes from points[i] to points[j], with the variance bound.
Change change_between(const std::vector<LivePoint>& p, size_t i, size_t j, uint64_t rate) {
  Change c;
  c.bytes = p[j].live.bytes_estimate() - p[i].live.bytes_estimate();
  c.variance = p[i].live.ht_var_bytes;
  for (size_t k = i + 1; k <= j; ++k) {
    c.variance += p[k].allocated.ht_var_bytes;
    c.allocated += p[k].allocated.bytes_estimate();
  }
  // A span without samples could still hide about one: one sample's worth.
  if (rate > 1) c.variance = std::max(c.variance, double(rate) * double(rate));
  c.seconds = p[j].seconds - p[i].seconds;
  return c;
}

// P(a change this large or larger without growth), normal.
double growth_p(const Change& c) {
  if (c.variance <= 0) return c.bytes > 0 ? 0 : 1;  // exact mode: no noise
  return normal_cdf(-c.bytes / std::sqrt(c.variance));
}

}  // namespace

Growth live_growth(const std::vector<LivePoint>& points, uint64_t rate, double confidence) {
  Growth g;
  if (points.size() < 3) return g;
  g.first = points.size() >= 4 ? 1 : 0;
  g.last = points.size() - 1;
  size_t mid = (g.first + g.last + 1) / 2;
  Change whole = change_between(points, g.first, g.last, rate);
  if (whole.seconds <= 0) return g;
  g.per_second = whole.bytes / whole.seconds;
  g.allocated = whole.allocated;
  double half = normal_quantile(0.5 + confidence / 2) * std::sqrt(whole.variance) / whole.seconds;
  g.interval = {g.per_second - half, g.per_second + half};
  g.p_value = std::max(growth_p(change_between(points, g.first, mid, rate)),
                       growth_p(change_between(points, mid, g.last, rate)));
  return g;
}

}  // namespace allocscope
