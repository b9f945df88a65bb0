// The top table `allocscope report` prints, and its JSON twin: stacks,
// functions or processes ranked by a metric, each with its estimate, the
// interval around it, share, samples and object lifetimes. Pure logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/loss.h"
#include "model/recording.h"
#include "output/render.h"
#include "stats/intervals.h"

namespace allocscope {

// A metric's point estimate and its interval at the given confidence,
// widened by what the recording lost (any stack may hold all of it).
struct Estimate {
  double value = 0;
  Interval interval{0, 0};
};
Estimate estimate(const StackTotals& t, Metric m, uint64_t rate, double confidence, const Loss& loss = {});

// Lifetimes of a group's sampled allocations: quantiles over those whose
// free was seen, and which share is still live or was long-lived.
struct LifetimeSummary {
  uint64_t freed = 0;                            // sampled allocations freed during the recording
  double median_ns = 0, p90_ns = 0, max_ns = 0;  // over the freed ones
  double live_share = 0;                         // of the sampled allocations, still live at the end
  double long_lived_share = 0;                   // alive (freed or not) longer than the threshold
};
LifetimeSummary summarize_lifetimes(const StackTotals& t, double long_lived_ns);

struct TableRow {
  std::string name;
  StackTotals flat;  // stacks whose row this is (functions: as the allocator's direct caller)
  double cum = 0;    // functions: every stack the function is on
};

// The allocations sampled at a row, whatever the metric: the set its
// samples, lifetime, live and long columns all describe.
uint64_t sampled_allocations(const StackTotals& t);

// Rows with something of o.metric of their own, grouped by o.top_by,
// sorted by o.sort, at most o.top.
std::vector<TableRow> table_rows(const Recording& r, const RenderOptions& o);

std::string render_table(const Recording& r, const RenderOptions& o);

// A metric's value for people: "1.5 MiB" for bytes, "1500" for objects.
std::string format_amount(double value, Metric m);

// What a row of a table is, for its header: "function (as the allocator's
// direct caller)", "stack" or "process".
const char* row_kind(TopBy by);

// A name for a table line: control characters as \xNN. Names come from ELF
// files, process names and profiles: a newline in a crafted symbol would
// forge lines.
std::string printable(const std::string& name);

// "4.2 ms", "1.5 s": durations for people.
std::string format_duration_ns(double ns);

}  // namespace allocscope
