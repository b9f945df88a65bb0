#include "render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "flamegraph.h"
#include "folded.h"
#include "pprof.h"
#include "units.h"

namespace allocscope {
namespace {

bool is_bytes(Metric m) { return m == Metric::AllocSpace || m == Metric::InuseSpace; }

std::string amount(double v, Metric m) {
  if (is_bytes(m))
    return format_bytes(v);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

double total(const Recording& r, Metric m) {
  double t = 0;
  for (const RecSample& s : r.samples)
    t += s.totals.value(m);
  return t;
}

std::string folded(const Recording& r, Metric m) {
  std::vector<FoldedStack> stacks;
  for (const RecSample& s : r.samples)
    stacks.push_back({frame_names(r, s), s.totals.value(m)});
  std::ostringstream out;
  write_folded(out, stacks);
  return out.str();
}

std::vector<FlameStack> flame_stacks(const Recording& r, Metric m) {
  std::vector<FlameStack> stacks;
  for (const RecSample& s : r.samples)
    if (s.totals.value(m) > 0)
      stacks.push_back({frame_names(r, s), s.totals.value(m)});
  return stacks;
}

FlameOptions flame_options(const Recording& r, const RenderOptions& o, const std::string& title) {
  FlameOptions f;
  f.title = title;
  f.subtitle = describe(r, o.metric);
  f.unit = is_bytes(o.metric) ? "bytes" : "objects";
  f.icicle = o.icicle;
  return f;
}

// Rows of the top table: name -> {flat, cum, samples}. Flat goes to the
// allocator's direct caller; cum to every function on the stack, once.
struct Row {
  double flat = 0, cum = 0;
  uint64_t samples = 0;
};

std::map<std::string, Row> top_rows(const Recording& r, const RenderOptions& o) {
  std::map<std::string, Row> rows;
  for (const RecSample& s : r.samples) {
    double v = s.totals.value(o.metric);
    std::vector<std::string> names = frame_names(r, s);
    if (o.top_by == TopBy::Stack) {
      std::string key;
      for (size_t i = 1; i < names.size(); ++i)
        key += (i > 1 ? ";" : "") + names[i];
      Row& row = rows[key];
      row.flat += v;
      row.cum += v;
      row.samples += s.totals.samples;
      continue;
    }
    if (names.size() >= 3) {
      Row& caller = rows[names[names.size() - 2]];
      caller.flat += v;
      caller.samples += s.totals.samples;
    }
    std::set<std::string> seen(names.begin() + 1, names.end() - 1);
    for (const std::string& n : seen)
      rows[n].cum += v;
  }
  return rows;
}

std::string top(const Recording& r, const RenderOptions& o) {
  auto rows = top_rows(r, o);
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.flat != b.second.flat ? a.second.flat > b.second.flat : a.second.cum > b.second.cum;
  });
  double t = total(r, o.metric);
  std::ostringstream out;
  out << metric_name(o.metric) << ": " << describe(r, o.metric) << "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%12s %7s %12s %7s %8s  %s\n", "flat", "flat%", "cum", "cum%", "samples",
                o.top_by == TopBy::Stack ? "stack" : "function (flat: as the allocator's direct caller)");
  out << line;
  for (size_t i = 0; i < sorted.size() && i < o.top; ++i) {
    const auto& [name, row] = sorted[i];
    std::snprintf(line, sizeof line, "%12s %6.2f%% %12s %6.2f%% %8llu  ", amount(row.flat, o.metric).c_str(),
                  t > 0 ? 100 * row.flat / t : 0.0, amount(row.cum, o.metric).c_str(),
                  t > 0 ? 100 * row.cum / t : 0.0, (unsigned long long)row.samples);
    out << line << name << "\n";
  }
  return out.str();
}

std::string json(const Recording& r, const RenderOptions& o) {
  nlohmann::ordered_json doc;
  doc["metric"] = metric_name(o.metric);
  doc["rate"] = r.rate;
  doc["duration_seconds"] = double(r.duration_nanos) / 1e9;
  doc["total"] = total(r, o.metric);
  for (const auto& [name, value] : r.counters)
    doc["counters"][name] = value;
  nlohmann::ordered_json stacks = nlohmann::ordered_json::array();
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    stacks.push_back({{"pid", s.pid},
                      {"comm", s.comm},
                      {"frames", std::vector<std::string>(names.begin() + 1, names.end())},
                      {"alloc_space", s.totals.alloc_bytes},
                      {"alloc_objects", s.totals.alloc_objects},
                      {"inuse_space", s.totals.live_bytes},
                      {"inuse_objects", s.totals.live_objects},
                      {"samples", s.totals.samples},
                      {"live_samples", s.totals.live_samples}});
  }
  doc["stacks"] = std::move(stacks);
  return doc.dump(1) + "\n";
}

bool any_frame_matches(const Recording& r, const RecSample& s, const std::regex& re) {
  for (const std::string& n : frame_names(r, s))
    if (std::regex_search(n, re))
      return true;
  return false;
}

}  // namespace

std::optional<Format> parse_format(std::string_view name) {
  for (Format f : {Format::Folded, Format::Svg, Format::Pprof, Format::Top, Format::Json})
    if (name == format_name(f))
      return f;
  return std::nullopt;
}

const char* format_name(Format f) {
  switch (f) {
    case Format::Folded: return "folded";
    case Format::Svg: return "svg";
    case Format::Pprof: return "pprof";
    case Format::Top: return "top";
    case Format::Json: return "json";
  }
  return "?";
}

Format format_for_path(std::string_view path) {
  for (std::string_view ext : {".pb.gz", ".pprof", ".pb"})
    if (path.ends_with(ext))
      return Format::Pprof;
  if (path.ends_with(".svg"))
    return Format::Svg;
  if (path.ends_with(".json"))
    return Format::Json;
  if (path.ends_with(".txt") || path.ends_with(".top"))
    return Format::Top;
  return Format::Folded;
}

std::string describe(const Recording& r, Metric m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "rate %s, %.1f s, total %s %s",
                r.rate <= 1 ? "1 (exact)" : format_bytes(double(r.rate)).c_str(), double(r.duration_nanos) / 1e9,
                amount(total(r, m), m).c_str(), is_bytes(m) ? "" : "objects");
  std::string s = buf;
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string render(const Recording& r, Format f, const RenderOptions& o) {
  switch (f) {
    case Format::Folded: return folded(r, o.metric);
    case Format::Svg:
      return render_flamegraph(flame_stacks(r, o.metric),
                               flame_options(r, o, std::string("allocscope: ") + metric_name(o.metric)));
    case Format::Pprof: {
      Recording copy = r;
      copy.default_metric = o.metric;
      return encode_pprof(copy, o.tool);
    }
    case Format::Top: return top(r, o);
    case Format::Json: return json(r, o);
  }
  return "";
}

// Frame names with the process named without its pid: two recordings of one
// program are compared across runs, whose pids differ.
std::vector<std::string> diff_frames(const Recording& r, const RecSample& s) {
  std::vector<std::string> names = frame_names(r, s);
  names[0] = s.comm.empty() ? "?" : s.comm;
  return names;
}

std::string render_diff_svg(const Recording& base, const Recording& now, const RenderOptions& o) {
  std::map<std::vector<std::string>, std::pair<double, double>> merged;  // frames -> (now, base)
  for (const RecSample& s : now.samples)
    merged[diff_frames(now, s)].first += s.totals.value(o.metric);
  for (const RecSample& s : base.samples)
    merged[diff_frames(base, s)].second += s.totals.value(o.metric);
  std::vector<FlameStack> stacks;
  for (auto& [frames, v] : merged)
    stacks.push_back({frames, v.first, v.second});
  FlameOptions f = flame_options(now, o, std::string("allocscope diff: ") + metric_name(o.metric));
  f.subtitle = "base " + describe(base, o.metric) + "; new " + describe(now, o.metric);
  f.diff = true;
  return render_flamegraph(stacks, f);
}

Recording filter_samples(const Recording& r, const SampleFilter& f) {
  Recording out = r;
  out.samples.clear();
  for (const RecSample& s : r.samples) {
    if (f.pid && s.pid != *f.pid)
      continue;
    if (f.comm && !std::regex_search(s.comm, *f.comm))
      continue;
    if (f.focus && !any_frame_matches(r, s, *f.focus))
      continue;
    if (f.ignore && any_frame_matches(r, s, *f.ignore))
      continue;
    out.samples.push_back(s);
  }
  return out;
}

}  // namespace allocscope
