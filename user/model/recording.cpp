#include "model/recording.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace allocscope {
namespace {

std::string frame_name(const Recording& r, const RecLine& line, bool with_line) {
  const RecFunction& f = r.functions[line.function];
  if (!with_line || (f.filename.empty() && line.line == 0)) return f.name;
  std::string file = f.filename.empty() ? "?" : f.filename;
  std::string number = line.line != 0 ? std::to_string(line.line) : "?";
  return f.name + " (" + file + ":" + number + ")";
}

}  // namespace

std::vector<std::string> frame_names(const Recording& r, const RecSample& s, bool lines) {
  std::vector<std::string> names;
  std::string comm = s.comm.empty() ? std::string("?") : s.comm;
  names.push_back(s.pid ? comm + " (" + std::to_string(s.pid) + ")" : comm);  // pid 0: merged by name
  for (auto loc = s.locations.rbegin(); loc != s.locations.rend(); ++loc) {
    const RecLocation& l = r.locations[*loc];
    for (auto line = l.lines.rbegin(); line != l.lines.rend(); ++line)
      names.push_back(frame_name(r, *line, lines));
  }
  return names;
}

std::optional<uint32_t> code_function(const Recording& r, const RecSample& s) {
  std::optional<uint32_t> outside_go, direct;
  size_t position = 0;  // leaf first: the allocator, then its direct caller
  for (uint32_t loc : s.locations) {
    const RecLocation& l = r.locations[loc];
    for (const RecLine& line : l.lines) {
      if (position++ == 0) continue;
      if (!direct) direct = line.function;
      const std::string& name = r.functions[line.function].name;
      if (name.empty() || name.starts_with('[')) continue;  // [unknown], [anon]+0x..., [truncated]
      if (l.mapping < 0) return line.function;
      if (!outside_go && !name.starts_with("runtime.")) outside_go = line.function;
    }
  }
  return outside_go ? outside_go : direct;  // Go's runtime's own allocations, [unknown] callers
}

std::vector<size_t> end_order(const std::vector<Recording>& series) {
  std::vector<size_t> order(series.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&series](size_t a, size_t b) {
    return series[a].time_nanos + series[a].duration_nanos < series[b].time_nanos + series[b].duration_nanos;
  });
  return order;
}

void sort_by_end(std::vector<Recording>& series) {
  std::vector<Recording> sorted;
  sorted.reserve(series.size());
  for (size_t i : end_order(series)) sorted.push_back(std::move(series[i]));
  series = std::move(sorted);
}

bool is_cumulative(const std::vector<Recording>& series) {
  for (size_t i = 1; i < series.size(); ++i)
    if (series[i].time_nanos != series[0].time_nanos ||
        series[i].duration_nanos <= series[i - 1].duration_nanos)
      return false;
  return series.size() > 1;
}

std::optional<uint64_t> recording_id(const Recording& r) {
  for (const auto& [name, value] : r.counters)
    if (name == "recording_id") return value;
  return std::nullopt;  // written before profiles carried it, or not by record
}

std::string series_break(const std::vector<Recording>& series, size_t* at) {
  for (size_t i = 1; i < series.size(); ++i) {
    auto id = recording_id(series[i]), before = recording_id(series[i - 1]);
    const char* why = id && before && *id != *before ? "is another recording's than the one before it"
                      : series[i].time_nanos && series[i].time_nanos == series[i - 1].time_nanos &&
                              series[i].duration_nanos == series[i - 1].duration_nanos
                          ? "spans the very time of the one before it, as a copy does"
                          : nullptr;
    if (!why) continue;
    if (at) *at = i;
    return why;
  }
  if (is_cumulative(series)) return "";
  constexpr int64_t kSecond = 1'000'000'000;
  for (size_t i = 1; i < series.size(); ++i) {
    int64_t end = series[i - 1].time_nanos + series[i - 1].duration_nanos;
    int64_t gap = series[i].time_nanos - end;
    int64_t slack = std::max<int64_t>(5 * kSecond, series[i - 1].duration_nanos / 2);
    if (gap >= -kSecond && gap <= slack) continue;
    if (at) *at = i;
    char text[96];
    std::snprintf(text, sizeof text,
                  gap < 0 ? "starts %.1f s before the one before it ended"
                          : "starts %.1f s after the one before it ended",
                  std::fabs(double(gap)) / 1e9);
    return text;
  }
  return "";
}

void put_program_first(Recording& r) {
  std::map<int32_t, size_t> roots;
  for (const RecSample& s : r.samples)
    for (auto it = s.locations.rbegin(); it != s.locations.rend(); ++it) {
      int32_t m = r.locations[*it].mapping;
      if (m < 0) continue;
      if (r.mappings[size_t(m)].file.find(".so") == std::string::npos) ++roots[m];
      break;
    }
  if (roots.empty()) return;
  int32_t program = std::max_element(roots.begin(), roots.end(), [](const auto& a, const auto& b) {
                      return a.second < b.second;
                    })->first;
  if (program == 0) return;
  std::swap(r.mappings[0], r.mappings[size_t(program)]);
  for (RecLocation& l : r.locations)
    l.mapping = l.mapping == 0 ? program : l.mapping == program ? 0 : l.mapping;
}

}  // namespace allocscope
