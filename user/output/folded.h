// Folded stacks ("root;...;leaf VALUE" per line), the format of flamegraph.pl,
// inferno and speedscope.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace allocscope {

struct FoldedStack {
  std::vector<std::string> frames;  // root first
  double value = 0;
};

// Merges stacks whose frames are equal, rounds values to integers and drops
// the zeros; lines come out sorted for stable diffs.
void write_folded(std::ostream& out, const std::vector<FoldedStack>& stacks);

// A frame name made safe for the format (no ';' and no line breaks).
std::string folded_frame(std::string name);

}  // namespace allocscope
