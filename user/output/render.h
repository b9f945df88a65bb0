// A Recording rendered in each output format; pure (no files).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/named.h"
#include "base/pattern.h"
#include "base/result.h"
#include "model/recording.h"
#include "output/flamegraph.h"

namespace allocscope {

enum class Format { Folded, Svg, Pprof, Top, Json };
inline constexpr std::array<Named<Format>, 5> kFormats{{{Format::Folded, "folded"},
                                                        {Format::Svg, "svg"},
                                                        {Format::Pprof, "pprof"},
                                                        {Format::Top, "top"},
                                                        {Format::Json, "json"}}};
// The file suffixes that name a format.
inline constexpr std::array<Named<Format>, 8> kFormatSuffixes{{{Format::Pprof, ".pb.gz"},
                                                               {Format::Pprof, ".pprof"},
                                                               {Format::Pprof, ".pb"},
                                                               {Format::Svg, ".svg"},
                                                               {Format::Json, ".json"},
                                                               {Format::Top, ".txt"},
                                                               {Format::Top, ".top"},
                                                               {Format::Folded, ".folded"}}};
std::optional<Format> parse_format(std::string_view name);
const char* format_name(Format f);
// The format the path's suffix names (kFormatSuffixes), if it names one.
std::optional<Format> format_named_by(std::string_view path);
// The same, anything else (.stacks, none) folded stacks.
Format format_for_path(std::string_view path);

enum class TopBy { Function, Stack, Process, Code };
inline constexpr std::array<Named<TopBy>, 4> kTopBy{{{TopBy::Function, "function"},
                                                     {TopBy::Stack, "stack"},
                                                     {TopBy::Process, "process"},
                                                     {TopBy::Code, "code"}}};
enum class TopSort { Value, Samples, Lifetime, Name };
inline constexpr std::array<Named<TopSort>, 4> kTopSort{{{TopSort::Value, "value"},
                                                         {TopSort::Samples, "samples"},
                                                         {TopSort::Lifetime, "lifetime"},
                                                         {TopSort::Name, "name"}}};

struct RenderOptions {
  Metric metric = Metric::AllocSpace;
  double confidence = 0.95;        // of the intervals shown
  bool icicle = false;             // svg: root at the top
  bool icicle_when_tall = true;    // svg: ... when taller than a screen (--flame: never)
  bool interval_in_frame = false;  // folded: "[lo; hi]" appended to each leaf frame
  bool lines = false;              // folded, svg, diff svg: frames as "function (file:line)" where known
  TopBy top_by = TopBy::Function;
  TopSort sort = TopSort::Value;
  size_t top = 20;                  // top: rows
  size_t width = 0;                 // top: columns of text (a terminal's), 0: no limit
  bool per_second = false;          // diff: compare per second of each recording
  double long_lived_share = 0.5;    // long-lived: alive for more than this share of the recording
  std::string tool = "allocscope";  // pprof: comment naming the tool and version
};

// Fails only where an encoder can (pprof over its size limit).
Result<std::string> render(const Recording& r, Format f, const RenderOptions& o);

// Which samples to keep (report's --pid, --comm, --focus, --ignore).
struct SampleFilter {
  std::optional<uint32_t> pid;
  std::optional<Pattern> comm, focus, ignore;
};
Recording filter_samples(const Recording& r, const SampleFilter& f);

// Each frame's kind, as frame_names lists them (the process first), by what
// holds its code: a shared object's functions are a library's, the
// executable's and code without a file (an interpreter's or a JIT's) the
// program's. The allocator entry points, the C and C++ runtimes' functions
// and unnamed frames keep the kinds their names give (default_kind).
std::vector<FrameKind> frame_kinds(const Recording& r, const RecSample& s);

// "rate 512 KiB, 2.0 s, total 1.2 GiB": what titles and summaries say.
std::string describe(const Recording& r, Metric m);

}  // namespace allocscope
