#include "output/folded.h"

#include <cmath>
#include <map>

#include "base/units.h"

namespace allocscope {

std::string folded_frame(std::string name) {
  for (char& c : name)
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r')
      c = ' ';
  return name;
}

void write_folded(std::ostream& out, const std::vector<FoldedStack>& stacks) {
  std::map<std::string, double> lines;
  for (const FoldedStack& s : stacks) {
    std::string key;
    for (const std::string& f : s.frames) {
      if (!key.empty()) key += ';';
      key += folded_frame(f);
    }
    lines[key] += s.value;
  }
  for (const auto& [key, value] : lines) {
    int64_t rounded = round_saturating(value);
    if (rounded != 0) out << key << ' ' << rounded << '\n';
  }
}

}  // namespace allocscope
