// The flame graph's tree: stacks merged by common prefix, names ranked so
// that siblings come out in name order. Internal to output/.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "output/flamegraph.h"

namespace allocscope::flame {

inline constexpr uint32_t kNone = UINT32_MAX;

struct Node {
  uint32_t name = kNone;  // rank in Tree::names; kNone for the root
  uint32_t depth = 0;     // 0 = root ("all"), 1 = the stacks' first frame
  uint32_t first_child = kNone, last_child = kNone, next_sibling = kNone;
  double value = 0, base = 0;  // of every stack through this frame
  double change = 0;           // diff: value - base of the significant stacks through it
  int kind = -1;               // FrameKind of the frame as the first stack through it had it; -1: not given
};

struct Tree {
  std::vector<std::string_view> names;  // sorted: ranks order like names
  std::deque<std::string> cleaned;      // storage for names that needed cleaning
  std::vector<Node> nodes;              // nodes[0] is the root
  std::map<uint32_t, std::string> notes;

  template <class F>
  void for_children(uint32_t n, F f) const {
    for (uint32_t c = nodes[n].first_child; c != kNone; c = nodes[c].next_sibling) f(c);
  }
};

// A value to draw: finite and positive, else 0.
double usable(double v);

// Sorting the stacks makes equal prefixes adjacent: each stack reuses the
// nodes it shares with the previous one and appends the rest, so siblings
// come out in name order without a lookup per frame.
Tree build_tree(const std::vector<FlameStack>& stacks);

}  // namespace allocscope::flame
