#include "model/recording.h"

#include <algorithm>
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

void sort_by_end(std::vector<Recording>& series) {
  std::stable_sort(series.begin(), series.end(), [](const Recording& a, const Recording& b) {
    return a.time_nanos + a.duration_nanos < b.time_nanos + b.duration_nanos;
  });
}

bool is_cumulative(const std::vector<Recording>& series) {
  for (size_t i = 1; i < series.size(); ++i)
    if (series[i].time_nanos != series[0].time_nanos ||
        series[i].duration_nanos <= series[i - 1].duration_nanos)
      return false;
  return series.size() > 1;
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
