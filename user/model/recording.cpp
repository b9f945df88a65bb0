#include "model/recording.h"

#include <algorithm>

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

}  // namespace allocscope
