// The timeline: a self-contained HTML page charting live bytes over a
// recording (the total and the stacks that held the most, stacked) with
// the flame graph of any moment (what was live then) or range (what was
// allocated in it), chosen by a click or a drag on the chart, or by the
// address's #point=N or #range=A-B. The chart is drawn here (it shows
// without scripts); the flame graphs by the embedded script, from the
// page's data. No libraries, no network.
#pragma once

#include <string>
#include <vector>

#include "model/recording.h"
#include "model/timeline.h"
#include "output/flamegraph.h"

namespace allocscope {

struct TimelineOptions {
  std::string title = "allocscope: live bytes over time";
  std::string subtitle;  // "rate 512 KiB, 30.0 s"
  size_t series = 8;     // stacks charted apart; the rest is "other"
  int width = 1200, height = 320;
};

// A stack as the timeline shows it: its frames, root first, and their
// kinds as the flame graph colours them (empty: each by its name).
struct TimelineStack {
  std::vector<std::string> frames;
  std::vector<FrameKind> kinds;
};

// Sample `s` of `r` as a stack of the timeline (`lines`: frames with theirs).
TimelineStack timeline_stack(const Recording& r, const RecSample& s, bool lines);

// stacks[i]: stack i (the profile's stack index).
std::string render_timeline(const Timeline& timeline, const std::vector<TimelineStack>& stacks,
                            const TimelineOptions& o);

// The timeline of a series of saved profiles (record --interval's, or the
// agent's /heap fetched now and then): a point at the end of each. Stacks
// are matched across profiles by their frames; `stacks` gets them.
Timeline timeline_of_series(std::vector<Recording> series, std::vector<TimelineStack>& stacks,
                            bool lines = false);

// The stacks charted apart: the `n` whose live bytes were highest at some
// point, highest first (none that never held any).
std::vector<uint32_t> timeline_top_stacks(const Timeline& timeline, size_t n);

}  // namespace allocscope
