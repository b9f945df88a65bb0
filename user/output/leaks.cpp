#include "output/leaks.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/units.h"
#include "model/estimate.h"
#include "output/table.h"
#include "output/text_format.h"
#include "stats/difference.h"

namespace allocscope {
namespace {

// A sample's row: the allocator's direct caller, the stack, or the process.
std::optional<std::string> row_key(const Recording& r, const RecSample& s, TopBy by) {
  if (by == TopBy::Code) {
    std::optional<uint32_t> f = code_function(r, s);
    return f ? std::optional(r.functions[*f].name) : std::nullopt;
  }
  std::vector<std::string> names = frame_names(r, s);
  if (by == TopBy::Process) return names[0];
  if (by == TopBy::Stack) {
    std::string key;
    for (const std::string& n : names) key += (key.empty() ? "" : ";") + n;
    return key;
  }
  if (names.size() < 3) return std::nullopt;
  return names[names.size() - 2];
}

struct Track {
  std::vector<LivePoint> points;
  uint64_t samples = 0;  // allocated over the series
  DurationHistogram lifetimes;
};

// Cumulative allocations -> what each interval allocated. A row the agent
// forgot (its process ended) falls to zero, never below.
void since_previous(std::vector<LivePoint>& points) {
  for (size_t i = points.size(); i-- > 1;) points[i].allocated.subtract(points[i - 1].allocated);
}

std::string signed_bytes(double v) { return (v < 0 ? "-" : "") + format_bytes(std::fabs(v)); }

}  // namespace

LeakReport find_leaks(std::vector<Recording> series, const RenderOptions& o) {
  sort_by_end(series);
  LeakReport report;
  auto taken_after_exit = [](const Recording& r) {
    for (const auto& [name, value] : r.paths)
      if (name == "taken" && value == kTakenAfterExit) return true;
    return false;
  };
  if (series.size() > 3 && taken_after_exit(series.back())) {
    series.pop_back();
    report.final_at_exit_left_out = true;
  }
  if (series.size() < 3) return report;
  const int64_t start = series.front().time_nanos;
  const uint64_t rate = series.front().rate;
  std::vector<double> seconds;  // end of each profile's interval, from the series' start
  for (const Recording& r : series) seconds.push_back(double(r.time_nanos + r.duration_nanos - start) / 1e9);
  const bool cumulative = is_cumulative(series);
  std::map<std::string, Track> tracks;
  for (size_t i = 0; i < series.size(); ++i) {
    const Recording& r = series[i];
    for (const RecSample& s : r.samples) {
      auto key = row_key(r, s, o.top_by);
      if (!key) continue;
      Track& t = tracks[*key];
      if (t.points.empty())  // a row first seen in a later profile: empty before, at every moment
        for (double at : seconds) t.points.push_back({at, {}, {}});
      t.points[i].live.merge(s.totals.live_stats);
      t.points[i].allocated.merge(s.totals.alloc_stats);
      // A cumulative profile's lifetimes include the earlier ones': the last stands.
      if (cumulative && i + 1 < series.size()) continue;
      t.lifetimes.merge(s.totals.lifetimes);
    }
  }
  for (auto& [key, t] : tracks) {
    if (cumulative) since_previous(t.points);
    for (const LivePoint& point : t.points)
      t.samples += point.allocated.samples + point.allocated.exact_objects;
  }
  std::vector<double> p;
  for (auto& [key, t] : tracks) {
    LeakRow row;
    row.name = key;
    row.growth = live_growth(t.points, rate, o.confidence);
    const IntervalStats& end = t.points.back().live;
    row.live_at_end = end.bytes_estimate();
    row.kept_share = row.growth.allocated > 0
                         ? row.growth.per_second * (seconds[row.growth.last] - seconds[row.growth.first]) /
                               row.growth.allocated
                         : 0;
    row.live_share = t.samples ? double(end.samples + end.exact_objects) / double(t.samples) : 0;
    row.lifetimes = t.lifetimes;
    p.push_back(row.growth.p_value);
    report.rows.push_back(std::move(row));
  }
  std::vector<double> adjusted = holm_adjusted(p);
  for (size_t i = 0; i < report.rows.size(); ++i) {
    LeakRow& row = report.rows[i];
    row.p_adjusted = adjusted[i];
    row.suspect = adjusted[i] < 1 - o.confidence && row.growth.per_second > 0;
    report.suspects += row.suspect;
  }
  std::stable_sort(report.rows.begin(), report.rows.end(), [](const LeakRow& a, const LeakRow& b) {
    if (a.suspect != b.suspect) return a.suspect;
    return a.growth.per_second > b.growth.per_second;
  });
  if (!report.rows.empty())
    report.span_seconds = seconds[report.rows[0].growth.last] - seconds[report.rows[0].growth.first];
  return report;
}

std::string render_leak_table(const LeakReport& r, const RenderOptions& o, size_t files) {
  std::ostringstream out;
  const char* what = row_kind(o.top_by);
  char line[512];
  std::snprintf(
      line, sizeof line,
      "%zu leak suspect(s) in %zu profiles: live bytes growing beyond sampling noise in both halves "
      "of the last %.1f s (%g%%, Holm's correction over all %zu)\n",
      r.suspects, files, r.span_seconds, o.confidence * 100, r.rows.size());
  out << line;
  if (r.final_at_exit_left_out)
    out << "(the last profile, written after the programs ended, is left out: it holds what they held at "
           "exit)\n";
  std::snprintf(line, sizeof line, "%12s  %-27s %11s %6s %6s %10s %7s %-7s %s\n", "growth/s", "interval",
                "live at end", "kept", "live", "lifetime", "p (adj)", "verdict", what);
  out << line;
  for (size_t i = 0; i < r.rows.size() && i < o.top; ++i) {
    const LeakRow& row = r.rows[i];
    std::string interval =
        "[" + signed_bytes(row.growth.interval.lo) + "; " + signed_bytes(row.growth.interval.hi) + "]";
    char p[16];
    std::snprintf(p, sizeof p, row.p_adjusted < 1e-6 ? "<1e-6" : "%.2g", row.p_adjusted);
    std::snprintf(line, sizeof line, "%12s  %-27s %11s %5.0f%% %5.0f%% %10s %7s %-7s ",
                  signed_bytes(row.growth.per_second).c_str(), interval.c_str(),
                  format_bytes(row.live_at_end).c_str(), 100 * row.kept_share, 100 * row.live_share,
                  row.lifetimes.count() ? format_duration_ns(row.lifetimes.quantile(0.5)).c_str() : "-", p,
                  row.suspect ? "suspect" : "-");
    out << line << printable(row.name) << "\n";
  }
  out << "kept: share of the bytes allocated over the span still live at its end; live: share of the row's "
         "samples still live; lifetime: median of those freed\n";
  return out.str();
}

std::string render_leak_json(const LeakReport& r, const RenderOptions& o) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const LeakRow& row : r.rows)
    rows.push_back({{"name", row.name},
                    {"growth_per_second", row.growth.per_second},
                    {"interval", {row.growth.interval.lo, row.growth.interval.hi}},
                    {"live_at_end", row.live_at_end},
                    {"kept_share", row.kept_share},
                    {"live_share", row.live_share},
                    {"median_lifetime_ns", row.lifetimes.count() ? row.lifetimes.quantile(0.5) : 0.0},
                    {"p", row.growth.p_value},
                    {"p_adjusted", row.p_adjusted},
                    {"suspect", row.suspect}});
  nlohmann::ordered_json j = {{"confidence", o.confidence},
                              {"correction", "holm"},
                              {"span_seconds", r.span_seconds},
                              {"compared", r.rows.size()},
                              {"suspects", r.suspects},
                              {"final_at_exit_left_out", r.final_at_exit_left_out},
                              {"rows", rows}};
  return j.dump(1) + "\n";
}

Result<std::string> render_leaks(const LeakReport& r, Format f, const RenderOptions& o, size_t files) {
  switch (f) {
    case Format::Top:
      return render_leak_table(r, o, files);
    case Format::Json:
      return render_leak_json(r, o);
    default:
      return fail(std::string("report --leaks writes no ") + format_name(f), EINVAL);
  }
}

}  // namespace allocscope
