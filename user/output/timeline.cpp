#include "output/timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "base/units.h"
#include "output/flame_text.h"
#include "output/flamegraph.h"
#include "output/render.h"

namespace allocscope {
namespace {

#include "output/timeline_script.inc"

constexpr int kLeft = 80, kRight = 16, kTop = 12, kBottom = 34;
constexpr const char* kColours[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
constexpr const char* kOther = "#c7c7c7";

// Names are bytes from ELF files: cleaned as the flame graph cleans them.
std::string escaped(const std::string& s) {
  std::string out;
  flame::append_xml(out, flame::clean(s));
  return out;
}

// A stack in a legend: the allocator's caller and the caller's caller.
std::string short_name(const std::vector<std::string>& frames) {
  if (frames.size() < 2) return frames.empty() ? "?" : frames.back();
  std::string name = frames[frames.size() - 2];
  if (frames.size() >= 3) name += " \u2190 " + frames[frames.size() - 3];
  return name;
}

// 1, 2 or 5 times a power of ten (of 1024 for bytes), about max/4.
double tick_step(double max, bool bytes) {
  if (max <= 0) return 1;
  double base = bytes ? std::pow(1024.0, std::floor(std::log(max) / std::log(1024.0))) : 1;
  double rough = max / 4 / base, p = std::pow(10.0, std::floor(std::log10(rough)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (rough <= m * p) return m * p * base;
  return 10 * p * base;
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

struct Geometry {
  double t0, t1, vmax, plot_w, plot_h;
  double x(double t) const { return kLeft + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * plot_w; }
  double y(double v) const { return kTop + plot_h - (vmax > 0 ? v / vmax : 0) * plot_h; }
};

void axes(std::ostream& out, const Geometry& g) {
  double step = tick_step(g.vmax, true);
  for (double v = 0; v <= g.vmax * 1.0001; v += step)
    out << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << number(kLeft + g.plot_w) << "\" y1=\""
        << number(g.y(v)) << "\" y2=\"" << number(g.y(v)) << "\"/><text class=\"ylabel\" x=\"" << kLeft - 6
        << "\" y=\"" << number(g.y(v) + 4) << "\">" << format_bytes(v) << "</text>\n";
  double span_s = (g.t1 - g.t0) / 1000, tstep = tick_step(span_s, false);
  for (double s = 0; s <= span_s * 1.0001 && tstep > 0; s += tstep)
    out << "<text class=\"xlabel\" x=\"" << number(g.x(g.t0 + s * 1000)) << "\" y=\""
        << number(kTop + g.plot_h + 20) << "\">" << number(s) << " s</text>\n";
}

// The stacked areas, bottom up: each series over the sum of those below.
void areas(std::ostream& out, const Geometry& g, const std::vector<double>& t,
           const std::vector<std::vector<double>>& series, const std::vector<std::string>& labels) {
  std::vector<double> below;
  below.resize(t.size(), 0.0);
  for (size_t k = 0; k < series.size(); ++k) {
    std::ostringstream d;
    for (size_t i = 0; i < t.size(); ++i)
      d << (i ? " L" : "M") << number(g.x(t[i])) << "," << number(g.y(below[i] + series[k][i]));
    for (size_t i = t.size(); i-- > 0;) d << " L" << number(g.x(t[i])) << "," << number(g.y(below[i]));
    d << " Z";
    for (size_t i = 0; i < t.size(); ++i) below[i] += series[k][i];
    const char* colour = k + 1 == series.size() ? kOther : kColours[k % std::size(kColours)];
    out << "<path class=\"area\" data-series=\"" << k << "\" fill=\"" << colour << "\" d=\"" << d.str()
        << "\"><title>" << escaped(labels[k]) << "</title></path>\n";
  }
}

nlohmann::json page_data(const Timeline& tl, const std::vector<TimelineStack>& stacks_in, const Geometry& g,
                         int width) {
  nlohmann::json frames = nlohmann::json::array(), stacks = nlohmann::json::array();
  nlohmann::json fills = nlohmann::json::array();  // by frame: the flame graph's colour for it
  std::unordered_map<std::string, size_t> frame_ids;
  for (const TimelineStack& stack : stacks_in) {
    nlohmann::json ids = nlohmann::json::array();
    for (const std::string& f : stack.frames) {
      size_t depth = ids.size();
      auto [it, made] = frame_ids.try_emplace(f, frame_ids.size());
      if (made) {  // a name's first frame gives its colour, as it gives its kind
        frames.push_back(f);
        FrameKind kind = depth < stack.kinds.size() ? stack.kinds[depth] : default_kind(f, depth);
        fills.push_back(frame_fill(kind, f));
      }
      ids.push_back(it->second);
    }
    stacks.push_back(std::move(ids));
  }
  nlohmann::json t = nlohmann::json::array(), total = nlohmann::json::array();
  nlohmann::json live = nlohmann::json::array(), allocated = nlohmann::json::array();
  auto flat = [&](const std::vector<std::pair<uint32_t, float>>& changes) {
    nlohmann::json a = nlohmann::json::array();
    for (auto [stack, v] : changes)
      if (stack < stacks_in.size()) {
        a.push_back(stack);
        a.push_back(std::round(v));
      }
    return a;
  };
  for (const TimelinePoint& p : tl.points()) {
    t.push_back(p.t_ms);
    total.push_back(std::round(p.live_total));
    live.push_back(flat(p.live));
    allocated.push_back(flat(p.allocated));
  }
  return {{"frames", frames}, {"fills", fills},    {"stacks", stacks},        {"t", t},
          {"total", total},   {"live", live},      {"alloc", allocated},      {"left", kLeft},
          {"top", kTop},      {"plotW", g.plot_w}, {"plotH", g.plot_h},       {"t0", g.t0},
          {"t1", g.t1},       {"width", width},    {"period", tl.period_ms()}};
}

}  // namespace

TimelineStack timeline_stack(const Recording& r, const RecSample& s, bool lines) {
  return {frame_names(r, s, lines), frame_kinds(r, s)};
}

Timeline timeline_of_series(std::vector<Recording> series, std::vector<TimelineStack>& stacks, bool lines) {
  sort_by_end(series);
  const bool cumulative = is_cumulative(series);
  Timeline tl;
  std::unordered_map<std::string, uint32_t> index;  // frames joined -> stack index
  std::vector<double> allocated;                    // since the series began, by stack
  const int64_t start = series.empty() ? 0 : series.front().time_nanos;
  for (const Recording& r : series) {
    std::vector<uint32_t> stack_of;  // by sample
    for (const RecSample& s : r.samples) {
      TimelineStack stack = timeline_stack(r, s, lines);
      std::string key;
      for (const std::string& f : stack.frames) key += f + '\n';
      auto [it, made] = index.try_emplace(key, uint32_t(stacks.size()));
      if (made) stacks.push_back(std::move(stack));
      stack_of.push_back(it->second);
    }
    std::vector<double> live(stacks.size(), 0), in_profile(stacks.size(), 0);
    for (size_t k = 0; k < r.samples.size(); ++k) {
      live[stack_of[k]] += r.samples[k].totals.live_bytes;
      in_profile[stack_of[k]] += r.samples[k].totals.alloc_bytes;
    }
    allocated.resize(stacks.size(), 0);
    for (size_t i = 0; i < stacks.size(); ++i)
      allocated[i] = cumulative ? in_profile[i] : allocated[i] + in_profile[i];
    int64_t end = r.time_nanos + r.duration_nanos - start;
    tl.add_point(uint64_t(std::max<int64_t>(0, end) / 1000000), live, allocated);
  }
  return tl;
}

std::vector<uint32_t> timeline_top_stacks(const Timeline& timeline, size_t n) {
  std::vector<double> high = timeline.highest_live();
  std::vector<uint32_t> order(high.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return high[a] > high[b]; });
  while (!order.empty() && high[order.back()] <= 0) order.pop_back();
  if (order.size() > n) order.resize(n);
  return order;
}

std::string render_timeline(const Timeline& tl, const std::vector<TimelineStack>& stacks,
                            const TimelineOptions& o) {
  std::vector<double> t, total;
  for (const TimelinePoint& p : tl.points()) {
    t.push_back(double(p.t_ms));
    total.push_back(std::max(0.0, p.live_total));
  }
  double vmax = total.empty() ? 0 : *std::max_element(total.begin(), total.end());
  Geometry g{t.empty() ? 0 : t.front(), t.empty() ? 0 : t.back(), vmax > 0 ? vmax * 1.05 : 1,
             double(o.width - kLeft - kRight), double(o.height - kTop - kBottom)};
  std::vector<uint32_t> top = timeline_top_stacks(tl, o.series);
  std::vector<std::vector<double>> series = tl.live_series(top);
  std::vector<std::string> labels;
  for (uint32_t s : top) labels.push_back(s < stacks.size() ? short_name(stacks[s].frames) : "?");
  std::vector<double> other(t.size(), 0);
  for (size_t i = 0; i < t.size(); ++i) {
    double charted = 0;
    for (const auto& s : series) charted += std::max(0.0, s[i]);
    other[i] = std::max(0.0, total[i] - charted);
  }
  for (auto& s : series)
    for (double& v : s) v = std::max(0.0, v);
  series.push_back(other);
  labels.push_back("other stacks");

  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escaped(o.title)
      << "</title>\n<style>" << kTimelineStyle << "</style></head>\n<body>\n<h1>" << escaped(o.title)
      << "</h1>\n<p class=\"sub\">" << escaped(o.subtitle) << "; highest total " << format_bytes(vmax) << "; "
      << tl.points().size() << " points, one every " << tl.period_ms() << " ms or less</p>\n";
  out << "<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\""
      << o.height << "\" viewBox=\"0 0 " << o.width << " " << o.height << "\">\n";
  axes(out, g);
  areas(out, g, t, series, labels);
  std::ostringstream line;
  for (size_t i = 0; i < t.size(); ++i)
    line << (i ? " L" : "M") << number(g.x(t[i])) << "," << number(g.y(total[i]));
  out << "<path class=\"total\" d=\"" << line.str() << "\"><title>every stack</title></path>\n"
      << "<rect id=\"sel-box\" x=\"0\" y=\"" << kTop << "\" width=\"0\" height=\"" << number(g.plot_h)
      << "\"/>\n</svg>\n<div class=\"legend\">";
  for (size_t k = 0; k < labels.size(); ++k)
    out << "<span><i style=\"background:"
        << (k + 1 == labels.size() ? kOther : kColours[k % std::size(kColours)]) << "\"></i>"
        << escaped(labels[k]) << "</span>";
  out << "<span><i class=\"line\"></i>total</span></div>\n"
      << "<p id=\"selection\">Click a moment for what was live then; drag over a range for what it "
         "allocated.</p>\n<svg id=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << o.width << "\" height=\"0\"></svg>\n";
  // "</" inside a script element would end it: JSON allows "<\/".
  std::string data =
      page_data(tl, stacks, g, o.width).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3) data.replace(at, 2, "<\\/");
  out << "<script type=\"application/json\" id=\"timeline-data\">" << data << "</script>\n<script>"
      << kTimelineScript << "</script>\n</body></html>\n";
  return out.str();
}

}  // namespace allocscope
