#include "recording.h"

namespace allocscope {

std::vector<std::string> frame_names(const Recording& r, const RecSample& s) {
  std::vector<std::string> names;
  names.push_back((s.comm.empty() ? std::string("?") : s.comm) + " (" + std::to_string(s.pid) + ")");
  for (auto loc = s.locations.rbegin(); loc != s.locations.rend(); ++loc) {
    const RecLocation& l = r.locations[*loc];
    for (auto line = l.lines.rbegin(); line != l.lines.rend(); ++line)
      names.push_back(r.functions[line->function].name);
  }
  return names;
}

}  // namespace allocscope
