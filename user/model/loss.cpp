#include "model/loss.h"

#include <string>

#include "base/units.h"

namespace allocscope {
namespace {

uint64_t counter(const Recording& r, const char* name) {
  for (const auto& [n, v] : r.counters)
    if (n == name) return v;
  return 0;
}

// A lost sample of S bytes stood for S / p(S) <= S + R bytes and
// 1 / p(S) <= R objects (S >= 1); in exact mode for S bytes and one object.
struct Bound {
  double bytes = 0, objects = 0;
};

Bound bound(const Recording& r, const char* count, const char* bytes) {
  double n = double(counter(r, count)), b = double(counter(r, bytes));
  if (r.rate <= 1) return {b, n};
  return {b + n * double(r.rate), n * double(r.rate)};
}

}  // namespace

double Loss::low(Metric m) const {
  switch (m) {
    case Metric::AllocSpace:
      return alloc_low_bytes;
    case Metric::AllocObjects:
      return alloc_low_objects;
    case Metric::InuseSpace:
      return inuse_low_bytes;
    case Metric::InuseObjects:
      return inuse_low_objects;
  }
  return 0;
}

double Loss::high(Metric m) const {
  switch (m) {
    case Metric::InuseSpace:
      return inuse_high_bytes;
    case Metric::InuseObjects:
      return inuse_high_objects;
    default:
      return 0;
  }
}

Loss loss_of(const Recording& r) {
  Loss l;
  static const char* const kWhole[][2] = {{"dropped_ringbuf", "dropped_ringbuf_bytes"},
                                          {"dropped_exact_full", "dropped_exact_full_bytes"},
                                          {"dropped_stack_lost", "dropped_stack_lost_bytes"},
                                          {"dropped_stack_table_full", "dropped_stack_table_full_bytes"}};
  for (const auto& [count, bytes] : kWhole) {
    l.samples += counter(r, count);
    Bound b = bound(r, count, bytes);
    l.alloc_low_bytes += b.bytes;
    l.alloc_low_objects += b.objects;
    l.inuse_low_bytes += b.bytes;  // had they been seen, they might still be live
    l.inuse_low_objects += b.objects;
  }
  // Samples without a live entry: sampling never counted them live, exact
  // mode counted them and will never see their free.
  Bound untracked = bound(r, "dropped_live_map_full", "dropped_live_map_full_bytes");
  (r.rate <= 1 ? l.inuse_high_bytes : l.inuse_low_bytes) += untracked.bytes;
  (r.rate <= 1 ? l.inuse_high_objects : l.inuse_low_objects) += untracked.objects;
  Bound unfreed = bound(r, "dropped_frees", "dropped_frees_bytes");
  l.inuse_high_bytes += unfreed.bytes;
  l.inuse_high_objects += unfreed.objects;
  return l;
}

std::string describe_loss(const Recording& r, Metric m) {
  Loss l = loss_of(r);
  if (!l.any()) return "";
  std::string s;
  if (l.samples) s = std::to_string(l.samples) + (r.rate <= 1 ? " allocations" : " samples") + " lost";
  auto amount = [&](double v) { return metric_is_bytes(m) ? format_bytes(v) : std::to_string(uint64_t(v)); };
  if (l.low(m) > 0)
    s += std::string(s.empty() ? "" : ": ") + metric_name(m) + " low by up to " + amount(l.low(m));
  if (l.high(m) > 0)
    s += std::string(s.empty() ? "" : "; ") + metric_name(m) + " high by up to " + amount(l.high(m));
  if (s.empty()) return s;  // losses of the other metrics only
  if (r.rate <= 1) s += " (not exact)";
  return s;
}

}  // namespace allocscope
