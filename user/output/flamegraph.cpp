#include "output/flamegraph.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>

#include "base/units.h"
#include "output/flame_text.h"
#include "output/flame_tree.h"

namespace allocscope {
namespace {

using namespace flame;

#include "output/flamegraph_script.inc"

constexpr double kMinFramePx = 0.1;
// Browsers stay responsive up to a few tens of thousands of SVG groups;
// beyond this budget the narrowest frames merge too. With at most one merged
// block per drawn frame, the file stays under ~10 MB plus the names' length.
constexpr size_t kMaxFrames = 16000;
// Names kept per merged block for search: the heaviest, to bound the file.
constexpr size_t kHiddenNames = 16;
constexpr int kPad = 10, kRow = 16, kRectHeight = 15, kTop = 84, kFooter = 52;
// A browser window's height on a laptop's screen: a graph taller than it
// opened root at the bottom shows only empty space at first.
constexpr int kScreenHeight = 900;
constexpr double kTextDy = 11;
constexpr const char* kMatchFill = "#e600e6";
constexpr const char* kMergedFill = "#dcdcdc";

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
  double value = 0, base = 0, change = 0;
  std::vector<Hidden> hidden;  // merged: heaviest names inside, value counted once per stack
};

// The smallest value drawn on its own: 0.1 px, raised when more frames than
// the budget would pass. A parent is never narrower than its child, so the
// drawn frames always form a tree.
double min_drawn_value(const Tree& t, double scale) {
  double floor_value = scale > 0 ? kMinFramePx / scale : INFINITY;
  std::vector<double> values;
  for (const Node& n : t.nodes)
    if (n.value >= floor_value) values.push_back(n.value);
  if (values.size() <= kMaxFrames) return floor_value;
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
        merged.change += child.change;
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
    if (n.value <= 0) return;  // diff mode: only in the base; nothing to find, nor below
    if (on_path_[n.name]++ == 0) {
      if (found_[n.name] == 0) touched_.push_back(n.name);
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
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h;
}

// Hue families per kind, varied per name so neighbours stay distinguishable;
// all light enough for black labels.
Rgb kind_colour(FrameKind k, std::string_view name) {
  uint32_t h = name_hash(name);
  double v1 = (h & 0xFF) / 255.0, v2 = (h >> 8 & 0xFF) / 255.0, v3 = (h >> 16 & 0xFF) / 255.0;
  auto c = [](double base, double span, double v) { return static_cast<int>(base + span * v); };
  switch (k) {
    case FrameKind::Process:
      return {c(170, 30, v1), c(150, 30, v2), c(215, 35, v3)};  // lavender
    case FrameKind::Program:
      return {c(225, 30, v3), c(165, 55, v1),
              c(60, 50, v2)};  // amber: orange to yellow, no red (red reads as hot)
    case FrameKind::Library:
      return {c(60, 60, v1), c(170, 55, v2), c(170, 55, v2)};  // aqua
    case FrameKind::Allocator:
      return {c(70, 60, v1), c(195, 55, v2), c(70, 50, v1)};  // green
    case FrameKind::Other:
      return {c(190, 30, v1), c(190, 30, v1), c(150, 30, v2)};  // khaki
  }
  return {200, 200, 200};
}

// Growth relative to the larger of the two values: a frame that doubled is
// as red as one that appeared. Under 2% counts as flat (sampling noise).
Rgb diff_colour(double value, double base) {
  double larger = std::max(value, base);
  double rel = larger > 0 ? (value - base) / larger : 0;
  if (std::fabs(rel) < 0.02) return {210, 210, 210};
  double a = 0.25 + 0.75 * std::min(1.0, std::fabs(rel));
  if (rel > 0) return {255, static_cast<int>(225 - 165 * a), static_cast<int>(225 - 165 * a)};
  return {static_cast<int>(215 - 145 * a), static_cast<int>(220 - 120 * a), 255};
}

// ---- writing ----

class Writer {
 public:
  Writer(const Tree& t, const FlameOptions& o, const std::function<FrameKind(std::string_view, size_t)>& kind,
         std::vector<Frame> frames)
      : t_(t), o_(o), kind_(kind), frames_(std::move(frames)) {
    for (const Frame& f : frames_) levels_ = std::max<size_t>(levels_, f.depth + 1);
    height_ = kTop + static_cast<int>(levels_) * kRow + kFooter;
    icicle_ = o.icicle || (o.icicle_when_tall && height_ > kScreenHeight);
    total_ = t.nodes[0].value;
  }

  std::string write() {
    out_.reserve(frames_.size() * 260 + 64 * 1024);
    header();
    out_ += "<g class=\"fg-frames\">\n";
    for (const Frame& f : frames_) frame(f);
    out_ += "</g>\n";
    // Nothing to draw (no sample, or none of this metric): said, not blank.
    if (total_ <= 0) text(o_.width / 2, kTop + kRow, "fg-title", "no samples");
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
  double change_of(const Frame& f) const { return f.merged ? f.change : t_.nodes[f.node].change; }

  int row_y(size_t depth) const {
    size_t row = icicle_ ? depth : levels_ - 1 - depth;
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
      double change = change_of(f);
      if (change != value - base)
        s += change == 0 ? "\nwithin sampling noise"
                         : "\nbeyond sampling noise: " + format_change(change, o_.unit);
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
    if (o_.diff) return hex(diff_colour(value_of(f), value_of(f) - change_of(f)));
    if (f.merged) return kMergedFill;
    // The root "all" is no frame of the stacks: colour it as Other.
    int given = t_.nodes[f.node].kind;
    FrameKind k = f.depth == 0 ? FrameKind::Other
                  : given >= 0 ? FrameKind(given)
                               : kind_(name_of(f), f.depth - 1);
    return hex(kind_colour(k, name_of(f)));
  }

  void frame(const Frame& f) {
    int y = row_y(f.depth);
    out_ += f.merged ? "<g class=\"m\"" : "<g class=\"f\"";
    out_ += " data-v=\"" + precise(value_of(f)) + "\"";
    if (f.merged && !f.hidden.empty()) {
      out_ += " data-h=\"";
      for (size_t i = 0; i < f.hidden.size(); ++i)
        out_ +=
            (i ? "," : "") + std::to_string(hidden_id(f.hidden[i].name)) + ":" + approx(f.hidden[i].value);
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
    if (added) hidden_names_.push_back(name);
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
      for (const auto& [k, label] : kinds) swatch(x, y, hex(kind_colour(k, label)), label);
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
            ", icicle: " + (icicle_ ? "true" : "false") + ", pad: " + std::to_string(kPad) +
            ", fullW: " + std::to_string(o_.width - 2 * kPad) + ", charW: " + fixed(kCharPx, 2) +
            ", textDy: " + fixed(kTextDy, 1) + ", total: " + precise(total_) + ", unit: ";
    append_json(out_, clean(o_.unit));
    out_ += ", matchFill: \"" + std::string(kMatchFill) + "\", names: [";
    for (size_t i = 0; i < hidden_names_.size(); ++i) {
      if (i) out_ += ",";
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
  bool icicle_ = false;  // root at the top: asked for, or taller than a screen
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

std::string frame_fill(FrameKind kind, std::string_view name) { return hex(kind_colour(kind, name)); }

FrameKind default_kind(std::string_view frame, size_t depth) {
  if (depth == 0) return FrameKind::Process;
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
