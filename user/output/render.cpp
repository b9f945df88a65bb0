#include "output/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/units.h"
#include "model/estimate.h"
#include "output/flamegraph.h"
#include "output/folded.h"
#include "output/pprof.h"
#include "output/table.h"
#include "output/text_format.h"

namespace allocscope {
namespace {

double total(const Recording& r, Metric m) {
  double t = 0;
  for (const RecSample& s : r.samples) t += s.totals.value(m);
  return t;
}

// What every stack of one output needs of its recording, computed once.
struct OutputContext {
  const Recording& r;
  const RenderOptions& o;
  Loss loss = loss_of(r);
};

// "[lo; hi]" of a stack's estimate.
std::string interval_text(const OutputContext& c, const RecSample& s) {
  Estimate e = estimate(s.totals, c.o.metric, c.r.rate, c.o.confidence, c.loss);
  char pct[16];
  std::snprintf(pct, sizeof pct, "%g%%", c.o.confidence * 100);
  return std::string(pct) + " [" + format_amount(e.interval.lo, c.o.metric) + "; " +
         format_amount(e.interval.hi, c.o.metric) + "]";
}

std::string folded(const OutputContext& c) {
  std::vector<FoldedStack> stacks;
  for (const RecSample& s : c.r.samples) {
    std::vector<std::string> names = frame_names(c.r, s, c.o.lines);
    if (c.o.interval_in_frame) names.back() += " " + interval_text(c, s);
    stacks.push_back({names, s.totals.value(c.o.metric)});
  }
  std::ostringstream out;
  write_folded(out, stacks);
  return out.str();
}

std::vector<FlameStack> flame_stacks(const OutputContext& c) {
  std::vector<FlameStack> stacks;
  for (const RecSample& s : c.r.samples)
    if (s.totals.value(c.o.metric) > 0)
      stacks.push_back({frame_names(c.r, s, c.o.lines), s.totals.value(c.o.metric), 0, interval_text(c, s),
                        true, frame_kinds(c.r, s)});
  return stacks;
}

FlameOptions flame_options(const Recording& r, const RenderOptions& o, const std::string& title) {
  FlameOptions f;
  f.title = title;
  f.subtitle = describe(r, o.metric);
  f.unit = metric_is_bytes(o.metric) ? "bytes" : "objects";
  f.icicle = o.icicle;
  f.icicle_when_tall = o.icicle_when_tall;
  return f;
}

nlohmann::ordered_json estimate_json(const OutputContext& c, const StackTotals& t, Metric m) {
  Estimate e = estimate(t, m, c.r.rate, c.o.confidence, c.loss);
  return {{"estimate", e.value}, {"interval", {e.interval.lo, e.interval.hi}}};
}

nlohmann::ordered_json lifetime_json(const OutputContext& c, const StackTotals& t) {
  LifetimeSummary l = summarize_lifetimes(t, c.o.long_lived_share * double(c.r.duration_nanos));
  return {{"freed_samples", l.freed}, {"median_ns", l.median_ns},   {"p90_ns", l.p90_ns},
          {"max_ns", l.max_ns},       {"live_share", l.live_share}, {"long_lived_share", l.long_lived_share}};
}

nlohmann::ordered_json totals_json(const OutputContext& c, const StackTotals& t) {
  nlohmann::ordered_json j;
  for (Metric m : {Metric::AllocSpace, Metric::AllocObjects, Metric::InuseSpace, Metric::InuseObjects})
    j[metric_name(m)] = estimate_json(c, t, m);
  j["samples"] = t.samples;
  j["live_samples"] = t.live_samples;
  j["lifetime"] = lifetime_json(c, t);
  return j;
}

// Everything the table shows (its rows, as chosen by --by, --sort and
// --top), and every stack, for scripts.
std::string json(const OutputContext& c) {
  const Recording& r = c.r;
  const RenderOptions& o = c.o;
  nlohmann::ordered_json doc;
  doc["metric"] = metric_name(o.metric);
  doc["rate"] = r.rate;
  doc["confidence"] = o.confidence;
  doc["duration_seconds"] = double(r.duration_nanos) / 1e9;
  StackTotals all;
  for (const RecSample& s : r.samples) all.merge(s.totals);
  doc["total"] = all.value(o.metric);
  doc["totals"] = totals_json(c, all);
  for (const auto& [name, value] : r.counters) doc["counters"][name] = value;
  for (const auto& [name, value] : r.paths) doc["paths"][name] = value;
  doc["loss"] = {{"samples", c.loss.samples},
                 {"exact", r.rate <= 1 && !c.loss.any()},
                 {"description", describe_loss(r, o.metric)}};
  for (Metric m : {Metric::AllocSpace, Metric::AllocObjects, Metric::InuseSpace, Metric::InuseObjects})
    doc["loss"][metric_name(m)] = {{"low_by_up_to", c.loss.low(m)}, {"high_by_up_to", c.loss.high(m)}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const TableRow& row : table_rows(r, o)) {
    nlohmann::ordered_json j = totals_json(c, row.flat);
    j["name"] = row.name;
    j["cum"] = row.cum;
    rows.push_back(std::move(j));
  }
  doc["by"] = kTopBy[size_t(o.top_by)].name;
  doc["rows"] = std::move(rows);
  nlohmann::ordered_json stacks = nlohmann::ordered_json::array();
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    nlohmann::ordered_json j = totals_json(c, s.totals);
    j["pid"] = s.pid;
    if (s.ns_pid) j["ns_pid"] = s.ns_pid;
    j["comm"] = s.comm;
    j["frames"] = std::vector<std::string>(names.begin() + 1, names.end());
    stacks.push_back(std::move(j));
  }
  doc["stacks"] = std::move(stacks);
  // Names are bytes from ELF files and profiles: invalid UTF-8 becomes U+FFFD.
  return doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

bool any_frame_matches(const Recording& r, const RecSample& s, const Pattern& re) {
  for (const std::string& n : frame_names(r, s))
    if (re.found_in(n)) return true;
  return false;
}

}  // namespace

// "libc.so.6", "libfoo.so": a shared object's file, by its name.
static bool is_shared_object(std::string_view path) {
  std::string_view name = path.substr(path.rfind('/') + 1);
  for (size_t at = name.find(".so"); at != std::string_view::npos; at = name.find(".so", at + 1))
    if (at + 3 == name.size() || name[at + 3] == '.') return true;
  return false;
}

std::vector<FrameKind> frame_kinds(const Recording& r, const RecSample& s) {
  std::vector<FrameKind> kinds{FrameKind::Process};
  for (auto loc = s.locations.rbegin(); loc != s.locations.rend(); ++loc) {
    const RecLocation& l = r.locations[*loc];
    bool shared = l.mapping >= 0 && size_t(l.mapping) < r.mappings.size() &&
                  is_shared_object(r.mappings[size_t(l.mapping)].file);
    for (auto line = l.lines.rbegin(); line != l.lines.rend(); ++line) {
      FrameKind k = default_kind(r.functions[line->function].name, kinds.size());
      kinds.push_back(k == FrameKind::Program && shared ? FrameKind::Library : k);
    }
  }
  return kinds;
}

std::optional<Format> parse_format(std::string_view name) { return parse_named(kFormats, name); }

const char* format_name(Format f) { return name_of(kFormats, f).data(); }  // the table's literals end in NUL

std::optional<Format> format_named_by(std::string_view path) {
  for (const Named<Format>& s : kFormatSuffixes)
    if (path.ends_with(s.name)) return s.value;
  return std::nullopt;
}

Format format_for_path(std::string_view path) { return format_named_by(path).value_or(Format::Folded); }

std::string describe(const Recording& r, Metric m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "rate %s, %.1f s, total %s %s",
                r.rate <= 1 ? "1 (exact)" : format_bytes(double(r.rate)).c_str(),
                double(r.duration_nanos) / 1e9, format_amount(total(r, m), m).c_str(),
                metric_is_bytes(m) ? "" : "objects");
  std::string s = buf;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (std::string lost = describe_loss(r, m); !lost.empty()) s += "; " + lost;
  for (const auto& [name, value] : r.paths)
    if (name == "python_small_objects") s += "; Python's small objects " + value.substr(0, value.find(" ("));
  return s;
}

Result<std::string> render(const Recording& r, Format f, const RenderOptions& o) {
  switch (f) {
    case Format::Folded:
      return folded(OutputContext{r, o});
    case Format::Svg:
      return render_flamegraph(flame_stacks(OutputContext{r, o}),
                               flame_options(r, o, std::string("allocscope: ") + metric_name(o.metric)));
    case Format::Pprof: {
      Recording copy = r;
      copy.default_metric = o.metric;
      return encode_pprof(copy, o.tool);
    }
    case Format::Top:
      return render_table(r, o);
    case Format::Json:
      return json(OutputContext{r, o});
  }
  return "";
}

Recording filter_samples(const Recording& r, const SampleFilter& f) {
  Recording out = r;
  out.samples.clear();
  for (const RecSample& s : r.samples) {
    if (f.pid && s.pid != *f.pid) continue;
    if (f.comm && !f.comm->found_in(s.comm)) continue;
    if (f.focus && !any_frame_matches(r, s, *f.focus)) continue;
    if (f.ignore && any_frame_matches(r, s, *f.ignore)) continue;
    out.samples.push_back(s);
  }
  return out;
}

}  // namespace allocscope
