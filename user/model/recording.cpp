#include "model/recording.h"

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

}  // namespace allocscope
