#include "output/diff.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "output/flamegraph.h"
#include "output/table.h"
#include "output/text_format.h"

namespace allocscope {
namespace {

using Frames = std::vector<std::string>;
using Groups = std::map<Frames, std::pair<StackTotals, StackTotals>>;  // key -> (base, now)

// Frame names with the process named without its pid: two recordings of one
// program are compared across runs, whose pids differ (and under `joined`
// when one program's name changed).
Frames diff_frames(const Recording& r, const RecSample& s, bool lines, const std::string& joined) {
  Frames names = frame_names(r, s, lines);
  names[0] = !joined.empty() ? joined : s.comm.empty() ? "?" : s.comm;
  return names;
}

// A sample's group: its whole stack, its allocator's direct caller, or its
// process; none for a function row of a stack without a caller.
std::optional<Frames> group_key(const Recording& r, const RecSample& s, const RenderOptions& o, bool whole,
                                const std::string& joined) {
  if (!whole && o.top_by == TopBy::Code) {
    std::optional<uint32_t> f = code_function(r, s);
    return f ? std::optional(Frames{r.functions[*f].name}) : std::nullopt;
  }
  Frames names = diff_frames(r, s, o.lines, joined);
  if (whole || o.top_by == TopBy::Stack) return names;
  if (o.top_by == TopBy::Process) return Frames{names[0]};
  if (names.size() < 3) return std::nullopt;
  return Frames{names[names.size() - 2]};
}

Groups group(const Recording& base, const Recording& now, const RenderOptions& o, bool whole,
             const std::string& joined) {
  Groups g;
  for (const RecSample& s : base.samples)
    if (auto key = group_key(base, s, o, whole, joined)) g[*key].first.merge(s.totals);
  for (const RecSample& s : now.samples)
    if (auto key = group_key(now, s, o, whole, joined)) g[*key].second.merge(s.totals);
  return g;
}

// The one program name of `r`'s samples; "" when none or several.
std::string only_program(const Recording& r) {
  std::string name;
  for (const RecSample& s : r.samples) {
    if (s.comm.empty() || s.comm == name) continue;
    if (!name.empty()) return "";
    name = s.comm;
  }
  return name;
}

// What a table's line and a flame graph's subtitle say of `joined`.
std::string joined_words(const std::string& joined) {
  return "the programs' names differ (" + joined + "): compared as one program";
}

double scale_of(const Recording& r, const RenderOptions& o) {
  return o.per_second && r.duration_nanos > 0 ? 1e9 / double(r.duration_nanos) : 1;
}

// Every group compared, Holm-adjusted, with its verdict (same order as g).
std::vector<DiffRow> compare_groups(const Groups& g, const Recording& base, const Recording& now,
                                    const RenderOptions& o) {
  DiffMetric m = metric_is_bytes(o.metric) ? DiffMetric::Bytes : DiffMetric::Objects;
  std::vector<DiffRow> rows;
  std::vector<double> p;
  for (const auto& [key, sides] : g) {
    DiffRow row;
    for (const std::string& k : key) row.name += (row.name.empty() ? "" : ";") + k;
    row.d = compare({&sides.first.stats(o.metric), base.rate, scale_of(base, o)},
                    {&sides.second.stats(o.metric), now.rate, scale_of(now, o)}, m, o.confidence);
    p.push_back(row.d.p_value);
    rows.push_back(std::move(row));
  }
  std::vector<double> adjusted = holm_adjusted(p);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].p_adjusted = adjusted[i];
    if (adjusted[i] < 1 - o.confidence) rows[i].verdict = rows[i].d.change > 0 ? 1 : -1;
  }
  return rows;
}

std::string signed_amount(double v, Metric m) { return (v < 0 ? "-" : "+") + format_amount(std::fabs(v), m); }

std::string p_text(double p) {
  char buf[32];
  if (p < 1e-6) return "<1e-6";
  std::snprintf(buf, sizeof buf, "%.2g", p);
  return buf;
}

const char* verdict_name(int v) { return v > 0 ? "grew" : v < 0 ? "shrank" : "-"; }

}  // namespace

std::string joined_program(const Recording& base, const Recording& now) {
  std::string a = only_program(base), b = only_program(now);
  return a.empty() || b.empty() || a == b ? "" : a + " -> " + b;
}

DiffTable diff_table(const Recording& base, const Recording& now, const RenderOptions& o) {
  DiffTable t;
  t.unit = o.per_second ? "/s" : "";
  t.joined = joined_program(base, now);
  t.rows = compare_groups(group(base, now, o, false, t.joined), base, now, o);
  std::stable_sort(t.rows.begin(), t.rows.end(), [](const DiffRow& a, const DiffRow& b) {
    if ((a.verdict != 0) != (b.verdict != 0)) return a.verdict != 0;
    return std::fabs(a.d.change) > std::fabs(b.d.change);
  });
  t.changed = size_t(std::count_if(t.rows.begin(), t.rows.end(), [](const DiffRow& r) { return r.verdict; }));
  return t;
}

std::string render_diff_table(const Recording& base, const Recording& now, const RenderOptions& o) {
  DiffTable t = diff_table(base, now, o);
  const char* what = row_kind(o.top_by);
  std::ostringstream out;
  out << metric_name(o.metric) << t.unit << ": base " << describe(base, o.metric) << "; new "
      << describe(now, o.metric) << "\n"
      << (t.joined.empty() ? "" : joined_words(t.joined) + "\n") << t.changed << " of " << t.rows.size()
      << " changed beyond sampling noise at " << o.confidence * 100 << "% (Holm's correction over all "
      << t.rows.size() << ")\n";
  char line[512];
  std::snprintf(line, sizeof line, "%11s %11s %12s  %-29s %7s %-7s %s\n", "base", "new", "change",
                "interval of the change", "p (adj)", "verdict", what);
  out << line;
  for (size_t i = 0; i < t.rows.size() && i < o.top; ++i) {
    const DiffRow& r = t.rows[i];
    std::string interval = "[" + signed_amount(r.d.interval.lo, o.metric) + "; " +
                           signed_amount(r.d.interval.hi, o.metric) + "]";
    std::snprintf(line, sizeof line, "%11s %11s %12s  %-29s %7s %-7s ",
                  format_amount(r.d.base, o.metric).c_str(), format_amount(r.d.now, o.metric).c_str(),
                  signed_amount(r.d.change, o.metric).c_str(), interval.c_str(), p_text(r.p_adjusted).c_str(),
                  verdict_name(r.verdict));
    out << line << printable(r.name) << "\n";
  }
  return out.str();
}

std::string render_diff_json(const Recording& base, const Recording& now, const RenderOptions& o) {
  DiffTable t = diff_table(base, now, o);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const DiffRow& r : t.rows) {
    rows.push_back({{"name", r.name},
                    {"base", r.d.base},
                    {"new", r.d.now},
                    {"change", r.d.change},
                    {"interval", {r.d.interval.lo, r.d.interval.hi}},
                    {"p", r.d.p_value},
                    {"p_adjusted", r.p_adjusted},
                    {"verdict", r.verdict ? nlohmann::ordered_json(verdict_name(r.verdict)) : nullptr}});
  }
  nlohmann::ordered_json j = {
      {"metric", metric_name(o.metric)},
      {"per_second", o.per_second},
      {"confidence", o.confidence},
      {"correction", "holm"},
      {"compared", t.rows.size()},
      {"changed", t.changed},
      {"programs_joined", t.joined.empty() ? nullptr : nlohmann::ordered_json(t.joined)},
      {"rows", rows}};
  return j.dump(1) + "\n";
}

std::string render_diff_svg(const Recording& base, const Recording& now, const RenderOptions& o) {
  std::string joined = joined_program(base, now);
  Groups g = group(base, now, o, true, joined);
  std::vector<DiffRow> rows = compare_groups(g, base, now, o);
  std::vector<FlameStack> stacks;
  size_t i = 0, changed = 0;
  for (const auto& [frames, sides] : g) {
    const DiffRow& r = rows[i++];
    FlameStack s{frames, r.d.now, r.d.base};
    s.significant = r.verdict != 0;
    changed += s.significant;
    char pct[16];
    std::snprintf(pct, sizeof pct, "%g%%", o.confidence * 100);
    s.note = "change " + signed_amount(r.d.change, o.metric) + ", " + pct + " [" +
             signed_amount(r.d.interval.lo, o.metric) + "; " + signed_amount(r.d.interval.hi, o.metric) +
             "], p (Holm) " + p_text(r.p_adjusted);
    stacks.push_back(std::move(s));
  }
  FlameOptions f;
  f.title = std::string("allocscope diff: ") + metric_name(o.metric) + (o.per_second ? " per second" : "") +
            ", " + std::to_string(changed) + " of " + std::to_string(rows.size()) +
            " stacks changed beyond sampling noise";
  f.subtitle = "base " + describe(base, o.metric) + "; new " + describe(now, o.metric);
  if (!joined.empty()) f.subtitle += "; " + joined_words(joined);
  f.unit = metric_is_bytes(o.metric) ? "bytes" : "objects";
  f.icicle = o.icicle;
  f.icicle_when_tall = o.icicle_when_tall;
  f.diff = true;
  return render_flamegraph(stacks, f);
}

Result<std::string> render_diff(const Recording& base, const Recording& now, Format f,
                                const RenderOptions& o) {
  switch (f) {
    case Format::Top:
      return render_diff_table(base, now, o);
    case Format::Json:
      return render_diff_json(base, now, o);
    case Format::Svg:
      return render_diff_svg(base, now, o);
    default:
      return fail(std::string("report --diff writes no ") + format_name(f), EINVAL);
  }
}

}  // namespace allocscope
