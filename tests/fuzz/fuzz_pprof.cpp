// libFuzzer: what `allocscope report` does with a file it is given. The
// decoder (gzip, protobuf, every value checked), then each output format,
// the top table in each grouping (with an order each), and a diff against
// itself. Before it, the bound on inflating (a gzip bomb must be refused
// before it takes memory): libFuzzer's inputs are too small to reach the
// decoder's 256 MiB, so the same check runs at bounds they do reach, and
// -malloc_limit_mb catches any one allocation past the real bound.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "output/diff.h"
#include "output/gzip.h"
#include "output/leaks.h"
#include "output/pprof.h"
#include "output/render.h"

using namespace allocscope;

// Never more than allowed, refused only past it, and within it the bytes an
// unbounded inflate gives.
static void check_inflate_bound(std::string_view in) {
  auto whole = gunzip(in, size_t{1} << 26);
  for (size_t max : {size_t{0}, size_t{1} << 10, size_t{1} << 16}) {
    auto bounded = gunzip(in, max);
    if (bounded && bounded->size() > max) __builtin_trap();
    if (bounded && (!whole || *bounded != *whole)) __builtin_trap();
    if (!bounded && whole && whole->size() <= max) __builtin_trap();
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_inflate_bound(std::string_view(reinterpret_cast<const char*>(data), size));
  auto r = decode_pprof(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r) return 0;
  RenderOptions o;
  o.top = 5;
  for (Metric m : {Metric::AllocSpace, Metric::InuseObjects}) {
    o.metric = m;
    for (Format f : {Format::Folded, Format::Svg, Format::Pprof, Format::Json}) (void)render(*r, f, o);
    for (TopBy by : {TopBy::Function, TopBy::Stack, TopBy::Process}) {
      o.top_by = by;
      o.sort = by == TopBy::Function ? TopSort::Lifetime
               : by == TopBy::Stack  ? TopSort::Samples
                                     : TopSort::Name;
      (void)render(*r, Format::Top, o);
    }
  }
  o.lines = o.interval_in_frame = true;
  (void)render(*r, Format::Folded, o);
  (void)render_diff_svg(*r, *r, o);
  (void)render_diff_table(*r, *r, o);
  o.per_second = true;
  (void)render_diff_json(*r, *r, o);
  LeakReport leaks = find_leaks({*r, *r, *r}, o);
  (void)render_leak_table(leaks, o, 3);
  (void)render_leak_json(leaks, o);
  return 0;
}
