#include "output/flame_tree.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "output/flame_text.h"

namespace allocscope::flame {

double usable(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

namespace {

// Ranks every distinct (cleaned) name alphabetically, so that stacks sorted by
// rank are sorted by name, and returns each stack as ranks.
std::vector<std::vector<uint32_t>> rank_names(const std::vector<FlameStack>& stacks, Tree& t) {
  std::unordered_map<std::string_view, uint32_t> rank;
  std::vector<std::vector<std::string_view>> views(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    for (const std::string& f : stacks[i].frames) {
      std::string_view v = f;
      if (!is_clean(v)) v = t.cleaned.emplace_back(clean(f));
      views[i].push_back(v);
      rank.emplace(v, 0);
    }
  }
  for (const auto& [name, _] : rank) t.names.push_back(name);
  std::sort(t.names.begin(), t.names.end());
  for (uint32_t r = 0; r < t.names.size(); ++r) rank[t.names[r]] = r;
  std::vector<std::vector<uint32_t>> paths(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i)
    for (std::string_view v : views[i]) paths[i].push_back(rank[v]);
  return paths;
}

uint32_t add_child(Tree& t, uint32_t parent, uint32_t name) {
  auto id = static_cast<uint32_t>(t.nodes.size());
  Node n;
  n.name = name;
  n.depth = t.nodes[parent].depth + 1;
  t.nodes.push_back(n);
  Node& p = t.nodes[parent];
  if (p.last_child == kNone)
    p.first_child = id;
  else
    t.nodes[p.last_child].next_sibling = id;
  p.last_child = id;
  return id;
}

void add_note(Tree& t, uint32_t node, const std::string& note) {
  if (note.empty()) return;
  std::string& n = t.notes[node];
  std::string c = clean(note);
  if (n.empty())
    n = c;
  else if (n != c && n.find("; " + c) == std::string::npos)
    n += "; " + c;
}

}  // namespace

// Sorting the stacks makes equal prefixes adjacent: each stack reuses the
// nodes it shares with the previous one and appends the rest, so siblings
// come out in name order without a lookup per frame.
Tree build_tree(const std::vector<FlameStack>& stacks) {
  Tree t;
  std::vector<std::vector<uint32_t>> paths = rank_names(stacks, t);
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < stacks.size(); ++i)
    if (usable(stacks[i].value) > 0 || usable(stacks[i].base) > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (paths[a] != paths[b]) return paths[a] < paths[b];
    return stacks[a].note < stacks[b].note;  // notes of merged stacks join in a fixed order
  });
  t.nodes.emplace_back();
  std::vector<uint32_t> open{0};  // the previous stack's nodes, root first
  const std::vector<uint32_t>* prev = nullptr;
  for (uint32_t i : order) {
    const std::vector<uint32_t>& p = paths[i];
    size_t common = 0;
    if (prev) common = std::mismatch(p.begin(), p.end(), prev->begin(), prev->end()).first - p.begin();
    open.resize(common + 1);
    for (size_t d = common; d < p.size(); ++d) {
      open.push_back(add_child(t, open.back(), p[d]));
      if (d < stacks[i].kinds.size()) t.nodes[open.back()].kind = int(stacks[i].kinds[d]);
    }
    for (uint32_t n : open) {
      t.nodes[n].value += usable(stacks[i].value);
      t.nodes[n].base += usable(stacks[i].base);
      if (stacks[i].significant) t.nodes[n].change += usable(stacks[i].value) - usable(stacks[i].base);
    }
    add_note(t, open.back(), stacks[i].note);
    prev = &p;
  }
  return t;
}

}  // namespace allocscope::flame
