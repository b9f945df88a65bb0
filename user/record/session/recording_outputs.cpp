// What a recording writes: its profile outputs, --peak's and --timeline's.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/units.h"
#include "output/outputs.h"
#include "output/text_format.h"
#include "output/timeline.h"
#include "record/scope.h"
#include "record/session/recording_context.h"
#include "record/view/output_writer.h"
#include "record/view/recording_builder.h"

namespace allocscope {

Result<void> write_outputs(RecordingContext& r, unsigned number, uint64_t duration_ms) {
  if (r.config.outputs.empty()) return {};
  r.absorb_exact();
  return write_record_outputs(
      saved_recording(r.profile, r.symbolizer, r.meta(duration_ms), r.parts->sink.origins()), r.config,
      number);
}

// The in-use profile at the highest live estimate of the recording.
Result<void> write_peak(RecordingContext& r, uint64_t start_ms) {
  const PeakKeeper& peak = r.profile.peak();
  if (!r.config.peak || !peak.seen() || r.config.outputs.empty()) return {};
  uint64_t since_start_ms = peak.ts_ns() / 1000000 > start_ms ? peak.ts_ns() / 1000000 - start_ms : 0;
  RecordingMeta m = r.meta(since_start_ms);
  if (r.config.metric != Metric::InuseObjects) m.metric = Metric::InuseSpace;
  m.counters.emplace_back("peak_live_bytes", uint64_t(std::max(0.0, peak.bytes())));
  m.counters.emplace_back("peak_at_ms", since_start_ms);
  return write_tagged_outputs(build_peak_recording(r.profile, r.symbolizer, m, r.parts->sink.origins()),
                              r.config, "peak");
}

// The chart, with what was live at the end as its last point.
Result<void> write_timeline(RecordingContext& r, uint64_t duration_ms) {
  if (!r.timeline) return {};
  r.absorb_exact();
  r.timeline->observe(duration_ms, r.profile, true);
  Recording rec = build_recording(r.profile, r.symbolizer, r.meta(duration_ms), r.parts->sink.origins());
  std::vector<TimelineStack> stacks;  // build_recording keeps every stack, in order
  for (const RecSample& s : rec.samples) stacks.push_back(timeline_stack(rec, s, r.config.render.lines));
  TimelineOptions o;
  o.subtitle = exact_mode(r.config) ? "exact (--rate 1)" : "rate " + format_bytes(double(r.config.rate));
  o.subtitle +=
      ", " + std::to_string(duration_ms / 1000) + "." + std::to_string(duration_ms % 1000 / 100) + " s";
  return write_file_atomically(r.config.timeline, render_timeline(*r.timeline, stacks, o),
                               r.config.outputs.empty() ? std::nullopt : r.config.outputs[0].mode);
}

}  // namespace allocscope
