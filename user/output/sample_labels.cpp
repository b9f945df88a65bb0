#include "output/sample_labels.h"

#include <bit>
#include <charconv>

namespace allocscope {
namespace {

// The fields of IntervalStats, by name, integer or double.
struct Field {
  const char* name;
  uint64_t IntervalStats::*u;
  double IntervalStats::*d;
};
constexpr Field kFields[] = {
    {"samples", &IntervalStats::samples, nullptr},
    {"u_bytes", &IntervalStats::u_bytes, nullptr},
    {"ht_bytes", nullptr, &IntervalStats::ht_bytes},
    {"ht_var_bytes", nullptr, &IntervalStats::ht_var_bytes},
    {"ht_objects", nullptr, &IntervalStats::ht_objects},
    {"ht_var_objects", nullptr, &IntervalStats::ht_var_objects},
    {"min_size", &IntervalStats::min_size, nullptr},
    {"min_size_count", &IntervalStats::min_size_count, nullptr},
    {"exact_objects", &IntervalStats::exact_objects, nullptr},
    {"exact_bytes", &IntervalStats::exact_bytes, nullptr},
};

void add_stats(std::vector<NumLabel>& out, const std::string& prefix, const IntervalStats& st) {
  for (const Field& f : kFields) {
    if (f.u && st.*f.u) out.push_back({prefix + f.name, int64_t(st.*f.u), ""});
    if (f.d && st.*f.d != 0) out.push_back({prefix + f.name, std::bit_cast<int64_t>(st.*f.d), "f64bits"});
  }
}

void add_histogram(std::vector<NumLabel>& out, const std::string& prefix, const DurationHistogram& h) {
  if (h.count() == 0) return;
  out.push_back({prefix + "max_ns", int64_t(h.max_ns()), ""});
  for (const auto& [bucket, n] : h.buckets())
    out.push_back({prefix + "b" + std::to_string(bucket), int64_t(n), ""});
}

bool apply_stats(std::string_view name, int64_t num, IntervalStats& st) {
  for (const Field& f : kFields) {
    if (name != f.name) continue;
    if (f.u)
      st.*f.u = uint64_t(num);
    else
      st.*f.d = std::bit_cast<double>(num);
    return true;
  }
  return false;
}

bool apply_histogram(std::string_view name, int64_t num, DurationHistogram& h) {
  if (name == "max_ns") {
    h.set_max_ns(uint64_t(num));
    return true;
  }
  unsigned bucket = 0;
  if (!name.starts_with("b")) return false;
  auto [end, ec] = std::from_chars(name.data() + 1, name.data() + name.size(), bucket);
  if (ec != std::errc() || end != name.data() + name.size() || bucket > 0xffff || num < 0) return false;
  h.set_bucket(uint16_t(bucket), uint64_t(num));
  return true;
}

}  // namespace

std::vector<NumLabel> extra_labels(const StackTotals& t) {
  std::vector<NumLabel> out;
  add_stats(out, "as.alloc.", t.alloc_stats);
  add_stats(out, "as.live.", t.live_stats);
  add_histogram(out, "as.lifetime.", t.lifetimes);
  add_histogram(out, "as.age.", t.live_ages);
  return out;
}

bool apply_extra_label(std::string_view key, int64_t num, StackTotals& t) {
  auto strip = [&](std::string_view prefix) {
    if (!key.starts_with(prefix)) return false;
    key.remove_prefix(prefix.size());
    return true;
  };
  if (strip("as.alloc.")) return apply_stats(key, num, t.alloc_stats);
  if (strip("as.live.")) return apply_stats(key, num, t.live_stats);
  if (strip("as.lifetime.")) return apply_histogram(key, num, t.lifetimes);
  if (strip("as.age.")) return apply_histogram(key, num, t.live_ages);
  return false;
}

}  // namespace allocscope
