// The flame graph SVG: well-formed XML, geometry, tooltips, colours,
// escaping, determinism and the size of big profiles. The browser test
// (tests/browser) covers the embedded script.
#include "output/flamegraph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "output/render.h"

namespace allocscope {
namespace {

// ---- a small XML checker: enough to catch unbalanced tags and raw specials ----

bool valid_entity(const std::string& s, size_t amp) {
  size_t semi = s.find(';', amp);
  if (semi == std::string::npos || semi - amp > 10) return false;
  std::string e = s.substr(amp + 1, semi - amp - 1);
  if (e == "amp" || e == "lt" || e == "gt" || e == "quot" || e == "apos") return true;
  return e.size() > 1 && e[0] == '#' && e.find_first_not_of("0123456789", 1) == std::string::npos;
}

// Character data: entities must be known, "]]>" must not appear.
std::string check_text(const std::string& s, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (s[i] == '&' && !valid_entity(s, i)) return "bad entity at " + std::to_string(i);
    if (s.compare(i, 3, "]]>") == 0) return "]]> in text at " + std::to_string(i);
  }
  return "";
}

// Attributes: name="value" or name='value', no '<' inside, known entities.
std::string check_attributes(const std::string& s, size_t from, size_t to) {
  size_t i = from;
  while (true) {
    while (i < to && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= to) return "";
    size_t eq = s.find('=', i);
    if (eq == std::string::npos || eq >= to || eq + 1 >= to)
      return "attribute without value at " + std::to_string(i);
    char quote = s[eq + 1];
    if (quote != '"' && quote != '\'') return "unquoted attribute at " + std::to_string(eq);
    size_t close = s.find(quote, eq + 2);
    if (close == std::string::npos || close >= to) return "unterminated attribute at " + std::to_string(eq);
    for (size_t k = eq + 2; k < close; ++k)
      if (s[k] == '<' || (s[k] == '&' && !valid_entity(s, k)))
        return "raw special in attribute at " + std::to_string(k);
    i = close + 1;
  }
}

// Returns "" when `s` is well-formed enough: one root, balanced tags.
std::string check_xml(const std::string& s) {
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t lt = s.find('<', i);
    if (lt == std::string::npos) lt = s.size();
    if (std::string e = check_text(s, i, lt); !e.empty()) return e;
    if (lt == s.size()) break;
    auto skip_to = [&](const char* end) {
      size_t p = s.find(end, lt);
      return p == std::string::npos ? std::string::npos : p + std::strlen(end);
    };
    size_t next;
    if (s.compare(lt, 2, "<?") == 0) {
      next = skip_to("?>");
    } else if (s.compare(lt, 4, "<!--") == 0) {
      next = skip_to("-->");
    } else if (s.compare(lt, 9, "<![CDATA[") == 0) {
      next = skip_to("]]>");
    } else {
      size_t gt = s.find('>', lt);
      if (gt == std::string::npos) return "unterminated tag at " + std::to_string(lt);
      bool closing = s[lt + 1] == '/', empty = s[gt - 1] == '/';
      size_t name_from = lt + (closing ? 2 : 1);
      size_t name_to = s.find_first_of(" \t\n/>", name_from);
      std::string name = s.substr(name_from, name_to - name_from);
      if (name.empty()) return "empty tag name at " + std::to_string(lt);
      if (closing) {
        if (open.empty() || open.back() != name) return "unbalanced </" + name + "> at " + std::to_string(lt);
        open.pop_back();
      } else {
        if (std::string e = check_attributes(s, name_to, empty ? gt - 1 : gt); !e.empty()) return e;
        if (open.empty()) ++roots;
        if (!empty) open.push_back(name);
      }
      next = gt + 1;
    }
    if (next == std::string::npos) return "unterminated markup at " + std::to_string(lt);
    i = next;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return roots == 1 ? "" : "expected one root element, got " + std::to_string(roots);
}

std::string unescape(std::string s) {
  static const std::pair<const char*, const char*> entities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}};
  for (const auto& [from, to] : entities)
    for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + 1))
      s.replace(p, std::strlen(from), to);
  return s;
}

// ---- reading frames back ----

struct DrawnFrame {
  std::string name, title, fill;  // name and title unescaped
  bool merged = false;
  double x = 0, y = 0, width = 0;
};

std::string attribute(const std::string& tag, const std::string& name) {
  size_t p = tag.find(" " + name + "=\"");
  if (p == std::string::npos) return "";
  p += name.size() + 3;
  return tag.substr(p, tag.find('"', p) - p);
}

std::vector<DrawnFrame> frames_of(const std::string& svg) {
  std::vector<DrawnFrame> out;
  for (size_t p = svg.find("<g class=\""); p != std::string::npos; p = svg.find("<g class=\"", p + 1)) {
    bool merged = svg.compare(p, 12, "<g class=\"m\"") == 0;
    if (!merged && svg.compare(p, 12, "<g class=\"f\"") != 0) continue;
    DrawnFrame f;
    f.merged = merged;
    size_t t0 = svg.find("<title>", p) + 7, t1 = svg.find("</title>", t0);
    f.title = unescape(svg.substr(t0, t1 - t0));
    f.name = f.title.substr(0, f.title.find('\n'));
    size_t r0 = svg.find("<rect ", t1), r1 = svg.find("/>", r0);
    std::string rect = svg.substr(r0, r1 - r0);
    f.x = std::stod(attribute(rect, "x"));
    f.y = std::stod(attribute(rect, "y"));
    f.width = std::stod(attribute(rect, "width"));
    f.fill = attribute(rect, "fill");
    out.push_back(f);
  }
  return out;
}

const DrawnFrame& frame(const std::vector<DrawnFrame>& frames, const std::string& name) {
  auto it = std::find_if(frames.begin(), frames.end(), [&](const DrawnFrame& f) { return f.name == name; });
  if (it == frames.end()) throw std::runtime_error("no frame " + name);
  return *it;
}

struct Rgb {
  int r, g, b;
};

Rgb rgb(const std::string& hex) {
  Rgb c{};
  std::sscanf(hex.c_str(), "#%02x%02x%02x", &c.r, &c.g, &c.b);
  return c;
}

// ---- fixtures ----

std::vector<FlameStack> simple_stacks() {
  return {{{"app (7)", "main", "a", "malloc"}, 300}, {{"app (7)", "main", "b", "malloc"}, 100}};
}

FlameOptions options() {
  FlameOptions o;
  o.title = "allocscope: alloc_space";
  o.subtitle = "rate 512 KiB, 30.0 s";
  return o;
}

TEST(Flamegraph, IsWellFormedXml) {
  std::string svg = render_flamegraph(simple_stacks(), options());
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_TRUE(svg.starts_with("<?xml"));
  EXPECT_NE(svg.find("allocscope: alloc_space"), std::string::npos);
  EXPECT_NE(svg.find("rate 512 KiB, 30.0 s"), std::string::npos);
  EXPECT_NE(svg.find("Reset zoom"), std::string::npos);
  EXPECT_NE(svg.find("class=\"fg-search\""), std::string::npos);
}

TEST(Flamegraph, TheCheckerCatchesBrokenXml) {
  EXPECT_NE(check_xml("<svg><g></svg>"), "");
  EXPECT_NE(check_xml("<svg><title>a < b</title></svg>"), "");
  EXPECT_NE(check_xml("<svg><title>a & b</title></svg>"), "");
  EXPECT_NE(check_xml("<svg a=\"x<y\"/>"), "");
  EXPECT_EQ(check_xml("<svg a=\"x&lt;y\"><![CDATA[ a < b && c ]]></svg>"), "");
}

TEST(Flamegraph, WidthsAreProportionalToValues) {
  auto frames = frames_of(render_flamegraph(simple_stacks(), options()));
  ASSERT_EQ(frames.size(), 7u);  // all, app, main, a, malloc, b, malloc
  double full = frame(frames, "all").width;
  EXPECT_NEAR(full, 1200 - 20, 0.01);
  EXPECT_NEAR(frame(frames, "main").width, full, 0.01);
  EXPECT_NEAR(frame(frames, "a").width, 0.75 * full, 0.01);
  EXPECT_NEAR(frame(frames, "b").width, 0.25 * full, 0.01);
  // Siblings in name order, side by side from the parent's left edge.
  EXPECT_NEAR(frame(frames, "a").x, frame(frames, "main").x, 0.01);
  EXPECT_NEAR(frame(frames, "b").x, frame(frames, "a").x + frame(frames, "a").width, 0.01);
}

TEST(Flamegraph, EqualPrefixesMergeAndPrefixStacksKeepTheirValue) {
  auto frames = frames_of(render_flamegraph(
      {{{"p", "main", "f"}, 100}, {{"p", "main", "f", "malloc"}, 100}, {{"p", "main", "f", "malloc"}, 200}},
      options()));
  EXPECT_EQ(std::count_if(frames.begin(), frames.end(), [](auto& f) { return f.name == "f"; }), 1);
  EXPECT_NEAR(frame(frames, "malloc").width, 0.75 * frame(frames, "f").width, 0.01);
  EXPECT_NE(frame(frames, "f").title.find("400 B, 100.00% of total"), std::string::npos);
}

TEST(Flamegraph, TooltipsCarryValueAndShare) {
  auto frames = frames_of(render_flamegraph(simple_stacks(), options()));
  EXPECT_EQ(frame(frames, "a").title, "a\n300 B, 75.00% of total");
  EXPECT_EQ(frame(frames, "b").title, "b\n100 B, 25.00% of total");
  EXPECT_EQ(frame(frames, "all").title, "all\n400 B, 100.00% of total");

  std::vector<FlameStack> big = {{{"p", "big"}, 3 * 1024 * 1024}, {{"p", "small"}, 1024 * 1024}};
  auto big_frames = frames_of(render_flamegraph(big, options()));
  EXPECT_EQ(frame(big_frames, "big").title, "big\n3 MiB, 75.00% of total");

  FlameOptions objects = options();
  objects.unit = "objects";
  auto object_frames = frames_of(render_flamegraph(simple_stacks(), objects));
  EXPECT_EQ(frame(object_frames, "a").title, "a\n300 objects, 75.00% of total");
}

TEST(Flamegraph, LeafNotesJoinTheTooltip) {
  std::vector<FlameStack> stacks = simple_stacks();
  stacks[0].note = "95% CI [250 B; 350 B]";
  auto frames = frames_of(render_flamegraph(stacks, options()));
  const DrawnFrame& leaf = frames[4];  // all, app, main, a, malloc
  ASSERT_EQ(leaf.name, "malloc");
  EXPECT_EQ(leaf.title, "malloc\n300 B, 75.00% of total\n95% CI [250 B; 350 B]");
  EXPECT_EQ(frame(frames, "a").title.find("CI"), std::string::npos);
}

TEST(Flamegraph, EscapesCppNames) {
  std::string nasty = "std::map<int, std::pair<A&, B>>::operator[](\"k\", 'v') ]]> &amp;";
  std::string svg = render_flamegraph({{{"p", nasty, "malloc"}, 10}}, options());
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_NE(
      svg.find("std::map&lt;int, std::pair&lt;A&amp;, B&gt;&gt;::operator[](&quot;k&quot;, &apos;v&apos;) "
               "]]&gt; &amp;amp;"),
      std::string::npos);
  EXPECT_EQ(svg.find("<int"), std::string::npos);
  EXPECT_EQ(frame(frames_of(svg), nasty).name, nasty);
}

TEST(Flamegraph, EscapesTitlesAndBadBytes) {
  FlameOptions o = options();
  o.title = "a < b & \"c\"";
  o.subtitle = std::string("bad \xff\xfe utf-8 \x01 and \xe2\x82 cut");
  std::string svg = render_flamegraph({{{"p", std::string("f\xc0\xaf\n<g>"), "malloc"}, 10}}, o);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_NE(svg.find("a &lt; b &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find('\xff'), std::string::npos);
  EXPECT_EQ(svg.find('\x01'), std::string::npos);
  EXPECT_NE(svg.find("f\xEF\xBF\xBD\xEF\xBF\xBD &lt;g&gt;"), std::string::npos);
}

TEST(Flamegraph, FlameHasTheRootAtTheBottomIcicleAtTheTop) {
  auto flame = frames_of(render_flamegraph(simple_stacks(), options()));
  EXPECT_GT(frame(flame, "all").y, frame(flame, "main").y);
  EXPECT_GT(frame(flame, "main").y, frame(flame, "a").y);

  FlameOptions o = options();
  o.icicle = true;
  auto icicle = frames_of(render_flamegraph(simple_stacks(), o));
  EXPECT_LT(frame(icicle, "all").y, frame(icicle, "main").y);
  EXPECT_LT(frame(icicle, "main").y, frame(icicle, "a").y);
  EXPECT_EQ(frame(flame, "a").y - frame(flame, "main").y, frame(icicle, "main").y - frame(icicle, "a").y);
}

TEST(Flamegraph, DiffColoursByGrowth) {
  FlameOptions o = options();
  o.diff = true;
  std::vector<FlameStack> stacks = {{{"p", "grows"}, 200, 100, ""},
                                    {{"p", "shrinks"}, 100, 200, ""},
                                    {{"p", "flat"}, 100, 100, ""},
                                    {{"p", "new"}, 50, 0, ""}};
  std::string svg = render_flamegraph(stacks, o);
  EXPECT_EQ(check_xml(svg), "");
  auto frames = frames_of(svg);
  Rgb up = rgb(frame(frames, "grows").fill), down = rgb(frame(frames, "shrinks").fill);
  Rgb flat = rgb(frame(frames, "flat").fill), added = rgb(frame(frames, "new").fill);
  EXPECT_GT(up.r, up.g + 60);
  EXPECT_GT(up.r, up.b + 60);
  EXPECT_GT(down.b, down.r + 60);
  EXPECT_GT(down.b, down.g + 30);
  EXPECT_TRUE(flat.r == flat.g && flat.g == flat.b);
  EXPECT_LT(added.g, up.g);  // appeared: the strongest red
  EXPECT_EQ(frame(frames, "grows").title,
            "grows\n200 B, 44.44% of total\nbase 100 B -> 200 B, +100 B (+100.0%)");
  EXPECT_EQ(frame(frames, "shrinks").title,
            "shrinks\n100 B, 22.22% of total\nbase 200 B -> 100 B, -100 B (-50.0%)");
  EXPECT_NE(frame(frames, "new").title.find("+50 B (new)"), std::string::npos);
  EXPECT_NE(svg.find(">grows</text>"), std::string::npos);  // legend
}

TEST(Flamegraph, KindsColourFramesAndTheLegend) {
  std::string svg = render_flamegraph(
      {{{"app (7)", "main", "libfoo.so.1+0x1a2b", "std::vector<int>::push_back", "malloc"}, 100}}, options());
  auto frames = frames_of(svg);
  Rgb process = rgb(frame(frames, "app (7)").fill), program = rgb(frame(frames, "main").fill);
  Rgb library = rgb(frame(frames, "libfoo.so.1+0x1a2b").fill), alloc = rgb(frame(frames, "malloc").fill);
  EXPECT_GT(process.b, process.g);  // lavender
  EXPECT_GT(program.r, program.b);  // warm
  EXPECT_GE(program.g, 165);        // amber, never red: red reads as hot
  EXPECT_GT(library.g, library.r);  // aqua
  EXPECT_GT(library.b, library.r);
  EXPECT_GT(alloc.g, alloc.r);  // green
  EXPECT_GT(alloc.g, alloc.b);
  for (const char* label : {">process</text>", ">program</text>", ">library</text>", ">allocator</text>"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  // Stable per name: the same name gets the same colour in another graph.
  auto other = frames_of(render_flamegraph({{{"x (1)", "zzz", "main"}, 5}}, options()));
  EXPECT_EQ(frame(other, "main").fill, frame(frames, "main").fill);
}

// A frame's kind from the recording is what holds its code: a named
// function of a shared object is a library's, though its name looks like a
// program's; one of the executable, or without a file (an interpreter's
// function), the program's.
TEST(Flamegraph, KindsComeFromTheFramesMappings) {
  Recording r;
  r.rate = 1;
  r.mappings = {{0x1000, 0x2000, 0, "/usr/bin/app", ""},
                {0x7000, 0x8000, 0, "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6", ""},
                {0x9000, 0xa000, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", ""}};
  r.functions = {{"malloc", "malloc", ""},
                 {"sqlite3_step", "sqlite3_step", ""},
                 {"main", "main", ""},
                 {"handler", "handler", "app.py"}};
  r.locations = {{2, 0x9100, {{0, 0}}}, {1, 0x7100, {{1, 0}}}, {-1, 0, {{3, 0}}}, {0, 0x1100, {{2, 0}}}};
  StackTotals t{.alloc_objects = 1, .alloc_bytes = 100, .samples = 1};
  r.samples = {RecSample{{0, 1, 2, 3}, 7, "app", t, {}}};
  auto svg = render(r, Format::Svg, RenderOptions{});
  ASSERT_TRUE(svg);
  auto frames = frames_of(*svg);
  Rgb library = rgb(frame(frames, "sqlite3_step").fill), program = rgb(frame(frames, "main").fill);
  Rgb python = rgb(frame(frames, "handler").fill);
  EXPECT_GT(library.g, library.r) << "sqlite3_step, in libsqlite3.so, drawn as the program's";
  EXPECT_GT(library.b, library.r);
  EXPECT_GT(program.r, program.b);
  EXPECT_GT(python.r, python.b) << "code without a file is the program's";
}

TEST(Flamegraph, CallerMayClassifyFrames) {
  auto frames = frames_of(render_flamegraph(simple_stacks(), options(), [](std::string_view name, size_t) {
    return name == "a" ? FrameKind::Allocator : FrameKind::Other;
  }));
  Rgb a = rgb(frame(frames, "a").fill);
  EXPECT_GT(a.g, a.r);
}

TEST(Flamegraph, DefaultKind) {
  EXPECT_EQ(default_kind("app (7)", 0), FrameKind::Process);
  EXPECT_EQ(default_kind("main", 1), FrameKind::Program);
  EXPECT_EQ(default_kind("Parser::parse(std::string const&)", 3), FrameKind::Program);
  for (const char* a : {"malloc", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc",
                        "memalign", "valloc", "pvalloc", "free"})
    EXPECT_EQ(default_kind(a, 5), FrameKind::Allocator) << a;
  EXPECT_EQ(default_kind("libfoo.so+0x1a2b", 2), FrameKind::Library);
  EXPECT_EQ(default_kind("libc.so.6+0x2a0", 2), FrameKind::Library);
  EXPECT_EQ(default_kind("__libc_start_main", 1), FrameKind::Library);
  EXPECT_EQ(default_kind("std::vector<int, std::allocator<int> >::reserve(unsigned long)", 4),
            FrameKind::Library);
  EXPECT_EQ(default_kind("operator new(unsigned long)", 4), FrameKind::Library);
  EXPECT_EQ(default_kind("[unknown]", 2), FrameKind::Other);
  EXPECT_EQ(default_kind("cloneWidget", 2), FrameKind::Program);
  EXPECT_EQ(default_kind("mallocator", 2), FrameKind::Program);
}

TEST(Flamegraph, SameInputGivesTheSameBytesInAnyOrder) {
  std::vector<FlameStack> stacks = {{{"p", "main", "z", "malloc"}, 5, 0, "n1"},
                                    {{"p", "main", "a", "calloc"}, 7},
                                    {{"p", "main", "z", "malloc"}, 3, 0, "n0"},
                                    {{"q", "main", "m"}, 11}};
  std::string first = render_flamegraph(stacks, options());
  EXPECT_EQ(render_flamegraph(stacks, options()), first);
  std::reverse(stacks.begin(), stacks.end());
  EXPECT_EQ(render_flamegraph(stacks, options()), first);
  EXPECT_NE(first.find("n0; n1"), std::string::npos);  // notes of merged stacks, in a fixed order
}

TEST(Flamegraph, NarrowFramesMergeButKeepTheirValue) {
  std::vector<FlameStack> stacks = {{{"p", "main", "big", "malloc"}, 1e9}};
  for (int i = 0; i < 1000; ++i) stacks.push_back({{"p", "main", "tiny_" + std::to_string(i), "calloc"}, 10});
  std::string svg = render_flamegraph(stacks, options());
  EXPECT_EQ(check_xml(svg), "");
  auto frames = frames_of(svg);
  EXPECT_EQ(std::count_if(frames.begin(), frames.end(), [](auto& f) { return f.name.starts_with("tiny_"); }),
            0);
  auto merged = std::find_if(frames.begin(), frames.end(), [](auto& f) { return f.merged; });
  ASSERT_NE(merged, frames.end());
  EXPECT_EQ(merged->name, "(1000 narrow frames)");
  EXPECT_NE(merged->title.find("9.8 KiB"), std::string::npos) << merged->title;
  EXPECT_NE(merged->title.find("calloc"), std::string::npos);  // the heaviest name inside
  EXPECT_NEAR(merged->x, frame(frames, "big").x + frame(frames, "big").width, 0.01);
  // Their value still counts: main is the sum, and its share stays exact.
  EXPECT_NE(frame(frames, "main").title.find("100.00% of total"), std::string::npos);
  EXPECT_NE(frame(frames, "big").title.find("953.7 MiB"), std::string::npos);
  // Names inside stay searchable: the script receives them.
  EXPECT_NE(svg.find("\"calloc\""), std::string::npos);
}

TEST(Flamegraph, EmptyInputStillRenders) {
  std::string svg = render_flamegraph({}, options());
  EXPECT_EQ(check_xml(svg), "");
  auto frames = frames_of(svg);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].title, "all\n0 B, 0.00% of total");
  EXPECT_NE(svg.find(">no samples</text>"), std::string::npos) << "a blank graph says nothing";
}

std::vector<FlameStack> random_stacks(size_t count, size_t depth) {
  std::mt19937_64 rng(42);
  std::vector<std::string> names;
  for (int i = 0; i < 2000; ++i)
    names.push_back("ns" + std::to_string(i % 37) + "::Class" + std::to_string(i) + "<int>::method(long)");
  const char* allocators[] = {"malloc", "calloc", "realloc", "free"};
  std::vector<FlameStack> stacks(count);
  for (FlameStack& s : stacks) {
    s.frames.push_back("app (" + std::to_string(1 + rng() % 3) + ")");
    s.frames.push_back("main");
    size_t d = depth - 5 + rng() % 10;
    // A skewed pick, like real call trees: shallow frames repeat more.
    for (size_t k = 0; k < d; ++k)
      s.frames.push_back(names[rng() % std::min<size_t>(names.size(), 4 + k * k * 3)]);
    s.frames.push_back(allocators[rng() % 4]);
    s.value = static_cast<double>(1 + rng() % (1 << 20));
  }
  return stacks;
}

TEST(Flamegraph, FiftyThousandStacksStayBounded) {
  std::vector<FlameStack> stacks = random_stacks(50000, 30);
  auto start = std::chrono::steady_clock::now();
  std::string svg = render_flamegraph(stacks, options());
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto frames = frames_of(svg);
  size_t merged = std::count_if(frames.begin(), frames.end(), [](auto& f) { return f.merged; });
  std::printf("[ flamegraph ] 50000 stacks: %.1f MB, %zu frames (%zu merged blocks), %.0f ms\n",
              svg.size() / 1e6, frames.size(), merged, ms);
  EXPECT_LT(svg.size(), 15u * 1000 * 1000);
  EXPECT_LE(frames.size(), 2 * 16000u);
  EXPECT_EQ(check_xml(svg), "");
  EXPECT_NE(frame(frames, "all").title.find("100.00% of total"), std::string::npos);
}

TEST(Flamegraph, ManyWideFramesHitTheFrameBudget) {
  // A tree with long chains: every frame is wider than 0.1 px, so only the
  // budget keeps the file small.
  std::vector<FlameStack> stacks;
  for (int i = 0; i < 10000; ++i) {
    FlameStack s{{"p"}, 1.0 + i % 50};
    for (int d = 0; d < 30; ++d) s.frames.push_back("f" + std::to_string(i) + "_" + std::to_string(d));
    stacks.push_back(s);
  }
  std::string svg = render_flamegraph(stacks, options());
  auto frames = frames_of(svg);
  std::printf("[ flamegraph ] 10000 wide chains: %.1f MB, %zu frames\n", svg.size() / 1e6, frames.size());
  EXPECT_LE(frames.size(), 2 * 16000u);
  EXPECT_LT(svg.size(), 15u * 1000 * 1000);
  EXPECT_EQ(check_xml(svg), "");
}

}  // namespace
}  // namespace allocscope
