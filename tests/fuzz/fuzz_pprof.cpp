// libFuzzer: what `allocscope report` does with a file it is given. The
// decoder (gzip, protobuf, every value checked), then each output format,
// the top table in each grouping (with an order each), and a diff against
// itself.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "output/diff.h"
#include "output/leaks.h"
#include "output/pprof.h"
#include "output/render.h"

using namespace allocscope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
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
