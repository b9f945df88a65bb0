#include "flamegraph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>

#include "units.h"

namespace allocscope {
namespace {

#include "flamegraph_script.inc"

constexpr double kMinFramePx = 0.1;
// Browsers stay responsive up to a few tens of thousands of SVG groups;
// beyond this budget the narrowest frames merge too. With at most one merged
// block per drawn frame, the file stays under ~10 MB plus the names' length.
constexpr size_t kMaxFrames = 16000;
// Names kept per merged block for search: the heaviest, to bound the file.
constexpr size_t kHiddenNames = 16;
constexpr int kPad = 10, kRow = 16, kRectHeight = 15, kTop = 84, kFooter = 52;
constexpr double kCharPx = 7.3;  // 12 px monospace advance, rounded up so labels never overflow
constexpr double kTextDy = 11;
constexpr const char* kMatchFill = "#e600e6";
constexpr const char* kMergedFill = "#dcdcdc";

// ---- text ----

// Length of the UTF-8 sequence at s[i] if it encodes a character XML 1.0
// allows, 0 otherwise (stray bytes, overlongs, surrogates, controls).
size_t xml_char_len(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80)
    return c >= 0x20 ? 1 : 0;
  size_t n = c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    unsigned char d = s[i + k];
    if ((d & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (d & 0x3F);
  }
  bool bad = (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
             (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF;
  return bad ? 0 : n;
}

bool is_clean(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = xml_char_len(s, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

// Symbol names are bytes from ELF files: anything XML cannot carry becomes
// U+FFFD, and line breaks become spaces because a tooltip's first line is
// the name.
std::string clean(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = xml_char_len(s, i);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += static_cast<unsigned char>(s[i]) < 0x20 ? " " : "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

// Escapes all five specials so the result is safe in text and in attributes.
void append_xml(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
}

// A JSON string for the script; <, > and ] are escaped so that no name can
// close the CDATA section or the script.
void append_json(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case ']': out += "\\u005d"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  out += '"';
}

// Fixed decimals without trailing zeros: coordinates are most of the file.
std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.')
      s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

// Enough digits that the script's layout from values stays exact at any zoom.
std::string precise(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Merged blocks' search values only feed a percentage.
std::string approx(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string format_value(double v, const std::string& unit) {
  if (unit == "bytes")
    return format_bytes(v);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return std::string(buf) + " " + unit;
}

std::string format_change(double delta, const std::string& unit) {
  return (delta < 0 ? "-" : "+") + format_value(std::fabs(delta), unit);
}

// Shares keep their decimals ("25.00%") so tooltips line up.
std::string percent(double part, double total, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f%%", decimals, total > 0 ? 100 * part / total : 0);
  return buf;
}

// Whole characters that fit the frame, ".." when cut; the script applies the
// same rule after a zoom. Cuts never split a UTF-8 sequence.
std::string fit_label(std::string_view name, double width) {
  double fit = std::floor((width - 6) / kCharPx);
  if (fit < 3)
    return "";
  size_t n = static_cast<size_t>(fit);
  if (name.size() <= n)
    return std::string(name);
  size_t cut = n - 2;
  while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80)
    --cut;
  return std::string(name.substr(0, cut)) + "..";
}

// ---- tree ----

constexpr uint32_t kNone = UINT32_MAX;

struct Node {
  uint32_t name = kNone;  // rank in Tree::names; kNone for the root
  uint32_t depth = 0;     // 0 = root ("all"), 1 = the stacks' first frame
  uint32_t first_child = kNone, last_child = kNone, next_sibling = kNone;
  double value = 0, base = 0;  // of every stack through this frame
};

struct Tree {
  std::vector<std::string_view> names;  // sorted: ranks order like names
  std::deque<std::string> cleaned;      // storage for names that needed cleaning
  std::vector<Node> nodes;              // nodes[0] is the root
  std::map<uint32_t, std::string> notes;

  template <class F>
  void for_children(uint32_t n, F f) const {
    for (uint32_t c = nodes[n].first_child; c != kNone; c = nodes[c].next_sibling)
      f(c);
  }
};

double usable(double v) { return std::isfinite(v) && v > 0 ? v : 0; }

// Ranks every distinct (cleaned) name alphabetically, so that stacks sorted by
// rank are sorted by name, and returns each stack as ranks.
std::vector<std::vector<uint32_t>> rank_names(const std::vector<FlameStack>& stacks, Tree& t) {
  std::unordered_map<std::string_view, uint32_t> rank;
  std::vector<std::vector<std::string_view>> views(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i) {
    for (const std::string& f : stacks[i].frames) {
      std::string_view v = f;
      if (!is_clean(v))
        v = t.cleaned.emplace_back(clean(f));
      views[i].push_back(v);
      rank.emplace(v, 0);
    }
  }
  for (const auto& [name, _] : rank)
    t.names.push_back(name);
  std::sort(t.names.begin(), t.names.end());
  for (uint32_t r = 0; r < t.names.size(); ++r)
    rank[t.names[r]] = r;
  std::vector<std::vector<uint32_t>> paths(stacks.size());
  for (size_t i = 0; i < stacks.size(); ++i)
    for (std::string_view v : views[i])
      paths[i].push_back(rank[v]);
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
  if (note.empty())
    return;
  std::string& n = t.notes[node];
  std::string c = clean(note);
  if (n.empty())
    n = c;
  else if (n != c && n.find("; " + c) == std::string::npos)
    n += "; " + c;
}

// Sorting the stacks makes equal prefixes adjacent: each stack reuses the
// nodes it shares with the previous one and appends the rest, so siblings
// come out in name order without a lookup per frame.
Tree build_tree(const std::vector<FlameStack>& stacks) {
  Tree t;
  std::vector<std::vector<uint32_t>> paths = rank_names(stacks, t);
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < stacks.size(); ++i)
    if (usable(stacks[i].value) > 0 || usable(stacks[i].base) > 0)
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (paths[a] != paths[b])
      return paths[a] < paths[b];
    return stacks[a].note < stacks[b].note;  // notes of merged stacks join in a fixed order
  });
  t.nodes.emplace_back();
  std::vector<uint32_t> open{0};  // the previous stack's nodes, root first
  const std::vector<uint32_t>* prev = nullptr;
  for (uint32_t i : order) {
    const std::vector<uint32_t>& p = paths[i];
    size_t common = 0;
    if (prev)
      common = std::mismatch(p.begin(), p.end(), prev->begin(), prev->end()).first - p.begin();
    open.resize(common + 1);
    for (size_t d = common; d < p.size(); ++d)
      open.push_back(add_child(t, open.back(), p[d]));
    for (uint32_t n : open) {
      t.nodes[n].value += usable(stacks[i].value);
      t.nodes[n].base += usable(stacks[i].base);
    }
    add_note(t, open.back(), stacks[i].note);
    prev = &p;
  }
  return t;
}

// ---- layout ----

struct Hidden {
  uint32_t name;
  double value;
};

// One drawn frame, or (merged) the block standing for a parent's narrow children.
struct Frame {
  uint32_t node = 0;  // merged: the parent
  uint32_t depth = 0;
  double x = 0, w = 0;  // pixels
  bool merged = false;
  size_t count = 0;  // merged: how many children
  double value = 0, base = 0;
  std::vector<Hidden> hidden;  // merged: heaviest names inside, value counted once per stack
};

// The smallest value drawn on its own: 0.1 px, raised when more frames than
// the budget would pass. A parent is never narrower than its child, so the
// drawn frames always form a tree.
double min_drawn_value(const Tree& t, double scale) {
  double floor_value = scale > 0 ? kMinFramePx / scale : INFINITY;
  std::vector<double> values;
  for (const Node& n : t.nodes)
    if (n.value >= floor_value)
      values.push_back(n.value);
  if (values.size() <= kMaxFrames)
    return floor_value;
  std::nth_element(values.begin(), values.begin() + kMaxFrames, values.end(), std::greater<>());
  return std::nextafter(values[kMaxFrames], INFINITY);
}

class Layout {
 public:
  Layout(const Tree& t, double scale, double min_value) : t_(t), scale_(scale), min_(min_value) {
    on_path_.assign(t.names.size(), 0);
    found_.assign(t.names.size(), 0);
  }

  std::vector<Frame> run() {
    place(0, kPad, 0);
    return std::move(frames_);
  }

 private:
  // Pre-order, children left to right from the parent's left edge and the
  // merged block last: the order and geometry the script rebuilds on zoom.
  void place(uint32_t node, double x, double offset_value) {
    const Node& n = t_.nodes[node];
    Frame drawn;
    drawn.node = node;
    drawn.depth = n.depth;
    drawn.x = x;
    drawn.w = n.value * scale_;
    frames_.push_back(std::move(drawn));
    double cursor = offset_value;
    Frame merged;
    merged.node = node;
    merged.depth = n.depth + 1;
    merged.merged = true;
    t_.for_children(node, [&](uint32_t c) {
      const Node& child = t_.nodes[c];
      if (child.value >= min_ && child.value > 0) {
        place(c, kPad + cursor * scale_, cursor);
        cursor += child.value;
      } else if (child.value > 0) {
        merged.count++;
        merged.value += child.value;
        merged.base += child.base;
        collect_hidden(c);
      }
    });
    if (merged.count > 0) {
      merged.x = kPad + cursor * scale_;
      merged.w = merged.value * scale_;
      merged.hidden = take_hidden();
      frames_.push_back(std::move(merged));
    }
  }

  // A name's value in a subtree is the sum over its topmost occurrences:
  // those subtrees are disjoint, so every stack counts once (recursion
  // shows up as nested occurrences).
  void collect_hidden(uint32_t node) {
    const Node& n = t_.nodes[node];
    if (n.value <= 0)
      return;  // diff mode: only in the base; nothing to find, nor below
    if (on_path_[n.name]++ == 0) {
      if (found_[n.name] == 0)
        touched_.push_back(n.name);
      found_[n.name] += n.value;
    }
    t_.for_children(node, [&](uint32_t c) { collect_hidden(c); });
    on_path_[n.name]--;
  }

  std::vector<Hidden> take_hidden() {
    std::vector<Hidden> all;
    for (uint32_t name : touched_) {
      all.push_back({name, found_[name]});
      found_[name] = 0;
    }
    touched_.clear();
    auto heavier = [](const Hidden& a, const Hidden& b) {
      return a.value != b.value ? a.value > b.value : a.name < b.name;
    };
    size_t keep = std::min(all.size(), kHiddenNames);
    std::partial_sort(all.begin(), all.begin() + keep, all.end(), heavier);
    all.resize(keep);
    return all;
  }

  const Tree& t_;
  double scale_, min_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> on_path_;
  std::vector<double> found_;
  std::vector<uint32_t> touched_;
};

// ---- colours ----

struct Rgb {
  int r, g, b;
};

std::string hex(Rgb c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r & 0xFF, c.g & 0xFF, c.b & 0xFF);
  return buf;
}

// FNV-1a: stable across compilers and runs, unlike std::hash.
uint32_t name_hash(std::string_view s) {
  uint32_t h = 2166136261u;
  for (char c : s)
    h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// Hue families per kind, varied per name so neighbours stay distinguishable;
// all light enough for black labels.
Rgb kind_colour(FrameKind k, std::string_view name) {
  uint32_t h = name_hash(name);
  double v1 = (h & 0xFF) / 255.0, v2 = (h >> 8 & 0xFF) / 255.0, v3 = (h >> 16 & 0xFF) / 255.0;
  auto c = [](double base, double span, double v) { return static_cast<int>(base + span * v); };
  switch (k) {
    case FrameKind::Process: return {c(170, 30, v1), c(150, 30, v2), c(215, 35, v3)};  // lavender
    case FrameKind::Program: return {c(215, 40, v3), c(90, 140, v1), c(40, 50, v2)};   // red to yellow
    case FrameKind::Library: return {c(60, 60, v1), c(170, 55, v2), c(170, 55, v2)};   // aqua
    case FrameKind::Allocator: return {c(70, 60, v1), c(195, 55, v2), c(70, 50, v1)};  // green
    case FrameKind::Other: return {c(190, 30, v1), c(190, 30, v1), c(150, 30, v2)};    // khaki
  }
  return {200, 200, 200};
}

// Growth relative to the larger of the two values: a frame that doubled is
// as red as one that appeared. Under 2% counts as flat (sampling noise).
Rgb diff_colour(double value, double base) {
  double larger = std::max(value, base);
  double rel = larger > 0 ? (value - base) / larger : 0;
  if (std::fabs(rel) < 0.02)
    return {210, 210, 210};
  double a = 0.25 + 0.75 * std::min(1.0, std::fabs(rel));
  if (rel > 0)
    return {255, static_cast<int>(225 - 165 * a), static_cast<int>(225 - 165 * a)};
  return {static_cast<int>(215 - 145 * a), static_cast<int>(220 - 120 * a), 255};
}

// ---- writing ----

class Writer {
 public:
  Writer(const Tree& t, const FlameOptions& o,
         const std::function<FrameKind(std::string_view, size_t)>& kind, std::vector<Frame> frames)
      : t_(t), o_(o), kind_(kind), frames_(std::move(frames)) {
    for (const Frame& f : frames_)
      levels_ = std::max<size_t>(levels_, f.depth + 1);
    height_ = kTop + static_cast<int>(levels_) * kRow + kFooter;
    total_ = t.nodes[0].value;
  }

  std::string write() {
    out_.reserve(frames_.size() * 260 + 64 * 1024);
    header();
    out_ += "<g class=\"fg-frames\">\n";
    for (const Frame& f : frames_)
      frame(f);
    out_ += "</g>\n";
    legend();
    script();
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  std::string_view name_of(const Frame& f) const {
    uint32_t r = t_.nodes[f.node].name;
    return r == kNone ? std::string_view("all") : t_.names[r];
  }

  double value_of(const Frame& f) const { return f.merged ? f.value : t_.nodes[f.node].value; }
  double base_of(const Frame& f) const { return f.merged ? f.base : t_.nodes[f.node].base; }

  int row_y(size_t depth) const {
    size_t row = o_.icicle ? depth : levels_ - 1 - depth;
    return kTop + static_cast<int>(row) * kRow;
  }

  void text(int x, int y, const char* cls, std::string_view s) {
    out_ += "<text class=\"" + std::string(cls) + "\" x=\"" + std::to_string(x) + "\" y=\"" +
            std::to_string(y) + "\">";
    append_xml(out_, s);
    out_ += "</text>\n";
  }

  void header() {
    std::string w = std::to_string(o_.width), h = std::to_string(height_);
    out_ += "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n";
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" class=\"fg-root\" width=\"" + w +
            "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\">\n";
    out_ += "<style><![CDATA[";
    out_ += kFlameStyle;
    out_ += "]]></style>\n";
    out_ += "<rect x=\"0\" y=\"0\" width=\"" + w + "\" height=\"" + h + "\" fill=\"#f7f7f2\"/>\n";
    text(o_.width / 2, 26, "fg-title", clean(o_.title));
    text(o_.width / 2, 46, "fg-subtitle", clean(o_.subtitle));
    text(kPad, 70, "fg-reset", "Reset zoom");
    text(o_.width - kPad - 250, 70, "fg-matched", "");
    out_ += "<foreignObject x=\"" + std::to_string(o_.width - kPad - 240) +
            "\" y=\"54\" width=\"240\" height=\"24\"><input xmlns=\"http://www.w3.org/1999/xhtml\" "
            "class=\"fg-search\" type=\"search\" placeholder=\"Search (regex or text)\" "
            "aria-label=\"Search frames\"/></foreignObject>\n";
  }

  std::string tooltip(const Frame& f) const {
    std::string s;
    if (f.merged)
      s = "(" + std::to_string(f.count) + " narrow frames)";
    else
      s = std::string(name_of(f));
    double value = value_of(f), base = base_of(f);
    s += "\n" + format_value(value, o_.unit) + ", " + percent(value, total_, 2) + " of total";
    if (o_.diff) {
      s += "\nbase " + format_value(base, o_.unit) + " -> " + format_value(value, o_.unit) + ", " +
           format_change(value - base, o_.unit);
      s += base > 0 ? " (" + std::string(value >= base ? "+" : "") + percent(value - base, base, 1) + ")"
                    : " (new)";
    }
    if (f.merged) {
      s += "\ntoo narrow to draw; heaviest inside:";
      for (size_t i = 0; i < f.hidden.size() && i < 3; ++i)
        s += std::string(i ? "," : "") + " " + std::string(t_.names[f.hidden[i].name]);
    } else if (auto it = t_.notes.find(f.node); it != t_.notes.end()) {
      s += "\n" + it->second;
    }
    return s;
  }

  std::string fill(const Frame& f) const {
    if (o_.diff)
      return hex(diff_colour(value_of(f), base_of(f)));
    if (f.merged)
      return kMergedFill;
    // The root "all" is no frame of the stacks: colour it as Other.
    FrameKind k = f.depth == 0 ? FrameKind::Other : kind_(name_of(f), f.depth - 1);
    return hex(kind_colour(k, name_of(f)));
  }

  void frame(const Frame& f) {
    int y = row_y(f.depth);
    out_ += f.merged ? "<g class=\"m\"" : "<g class=\"f\"";
    out_ += " data-v=\"" + precise(value_of(f)) + "\"";
    if (f.merged && !f.hidden.empty()) {
      out_ += " data-h=\"";
      for (size_t i = 0; i < f.hidden.size(); ++i)
        out_ += (i ? "," : "") + std::to_string(hidden_id(f.hidden[i].name)) + ":" +
                approx(f.hidden[i].value);
      out_ += "\"";
    }
    out_ += "><title>";
    append_xml(out_, tooltip(f));
    out_ += "</title><rect x=\"" + fixed(f.x, 2) + "\" y=\"" + std::to_string(y) + "\" width=\"" +
            fixed(f.w, 2) + "\" height=\"" + std::to_string(kRectHeight) + "\" fill=\"" + fill(f) + "\"/>";
    if (std::string label = f.merged ? "" : fit_label(name_of(f), f.w); !label.empty()) {
      out_ += "<text x=\"" + fixed(f.x + 3, 2) + "\" y=\"" + fixed(y + kTextDy, 1) + "\">";
      append_xml(out_, label);
      out_ += "</text>";
    }
    out_ += "</g>\n";
  }

  // Names inside merged blocks, numbered in order of first use for the script.
  uint32_t hidden_id(uint32_t name) {
    auto [it, added] = hidden_ids_.emplace(name, static_cast<uint32_t>(hidden_names_.size()));
    if (added)
      hidden_names_.push_back(name);
    return it->second;
  }

  void swatch(int& x, int y, const std::string& colour, std::string_view label) {
    out_ += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y - 10) +
            "\" width=\"12\" height=\"12\" fill=\"" + colour + "\" stroke=\"#888\" stroke-width=\"0.5\"/>\n";
    text(x + 16, y, "fg-legend", label);
    x += 16 + static_cast<int>(label.size() * kCharPx) + 18;
  }

  void legend() {
    int y = kTop + static_cast<int>(levels_) * kRow + 20, x = kPad;
    if (o_.diff) {
      swatch(x, y, hex(diff_colour(2, 1)), "grows");
      swatch(x, y, hex(diff_colour(1, 2)), "shrinks");
      swatch(x, y, hex(diff_colour(1, 1)), "flat");
    } else {
      static const std::pair<FrameKind, const char*> kinds[] = {{FrameKind::Process, "process"},
                                                                {FrameKind::Program, "program"},
                                                                {FrameKind::Library, "library"},
                                                                {FrameKind::Allocator, "allocator"},
                                                                {FrameKind::Other, "other"}};
      for (const auto& [k, label] : kinds)
        swatch(x, y, hex(kind_colour(k, label)), label);
      swatch(x, y, kMergedFill, "narrow frames, merged");
    }
    text(x, y, "fg-hint", "click: zoom, Esc: reset");
    text(kPad, y + 22, "fg-status", " ");
  }

  void script() {
    out_ += "<script type=\"text/ecmascript\"><![CDATA[";
    out_ += kFlameScript;
    out_ += "allocscopeFlamegraph(document.currentScript, {top: " + std::to_string(kTop) +
            ", row: " + std::to_string(kRow) + ", levels: " + std::to_string(levels_) +
            ", icicle: " + (o_.icicle ? "true" : "false") + ", pad: " + std::to_string(kPad) +
            ", fullW: " + std::to_string(o_.width - 2 * kPad) + ", charW: " + fixed(kCharPx, 2) +
            ", textDy: " + fixed(kTextDy, 1) + ", total: " + precise(total_) + ", unit: ";
    append_json(out_, clean(o_.unit));
    out_ += ", matchFill: \"" + std::string(kMatchFill) + "\", names: [";
    for (size_t i = 0; i < hidden_names_.size(); ++i) {
      if (i)
        out_ += ",";
      append_json(out_, t_.names[hidden_names_[i]]);
    }
    out_ += "]});\n]]></script>\n";
  }

  const Tree& t_;
  const FlameOptions& o_;
  const std::function<FrameKind(std::string_view, size_t)>& kind_;
  std::vector<Frame> frames_;
  size_t levels_ = 1;
  int height_ = 0;
  double total_ = 0;
  std::string out_;
  std::unordered_map<uint32_t, uint32_t> hidden_ids_;
  std::vector<uint32_t> hidden_names_;
};

bool starts_with_any(std::string_view s, std::initializer_list<std::string_view> prefixes) {
  return std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return s.starts_with(p); });
}

bool is_any(std::string_view s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

}  // namespace

FrameKind default_kind(std::string_view frame, size_t depth) {
  if (depth == 0)
    return FrameKind::Process;
  if (is_any(frame, {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
                     "memalign", "valloc", "pvalloc", "free"}))
    return FrameKind::Allocator;
  if (frame.empty() || frame.starts_with('[') || frame.starts_with("+0x"))
    return FrameKind::Other;  // [unknown], [anon]+0x..., no name at all
  // An unsymbolized frame in a shared object: "libfoo.so+0x1a2b", "libc.so.6+0x2a0".
  if (size_t so = frame.find(".so");
      so != std::string_view::npos && frame.find("+0x", so) != std::string_view::npos)
    return FrameKind::Library;
  // Runtime frames most stacks pass through, and the C++ library itself.
  if (is_any(frame, {"_start", "__libc_start_main", "__libc_start_call_main", "start_thread", "clone",
                     "clone3", "strdup", "strndup", "__strdup"}) ||
      starts_with_any(frame, {"std::", "__gnu_cxx::", "__cxxabiv1::", "operator new", "operator delete",
                              "__libc_", "__GI_", "_IO_", "_dl_"}))
    return FrameKind::Library;
  return FrameKind::Program;
}

std::string render_flamegraph(const std::vector<FlameStack>& stacks, const FlameOptions& o,
                              const std::function<FrameKind(std::string_view frame, size_t depth)>& kind) {
  FlameOptions opts = o;
  opts.width = std::max(opts.width, 2 * kPad + 400);  // room for the header controls
  Tree tree = build_tree(stacks);
  double total = tree.nodes[0].value;
  double scale = total > 0 ? (opts.width - 2 * kPad) / total : 0;
  std::vector<Frame> frames = Layout(tree, scale, min_drawn_value(tree, scale)).run();
  return Writer(tree, opts, kind, std::move(frames)).write();
}

}  // namespace allocscope
