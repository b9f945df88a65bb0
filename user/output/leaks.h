// Leak suspects in a series of interval profiles (record --interval): per
// function, stack or process, how fast its live bytes grew, with the
// interval, and a verdict only where the growth is beyond sampling noise in
// both halves of the series (stats/growth.h), Holm-corrected over every row.
// Pure logic.
#pragma once

#include <string>
#include <vector>

#include "model/recording.h"
#include "output/render.h"
#include "stats/growth.h"
#include "stats/lifetimes.h"

namespace allocscope {

struct LeakRow {
  std::string name;
  Growth growth;
  double live_at_end = 0;       // bytes
  double kept_share = 0;        // growth over the span / bytes allocated over it
  double live_share = 0;        // of the row's samples over the series, still live at its end
  DurationHistogram lifetimes;  // of its sampled allocations freed during the series
  double p_adjusted = 1;
  bool suspect = false;
};

struct LeakReport {
  std::vector<LeakRow> rows;  // suspects first, by growth; every row compared
  size_t suspects = 0;
  double span_seconds = 0;  // of the growth measured
  // The last profile, written after the programs ended (kTakenAfterExit),
  // left out: growth is judged up to the last one taken while they ran.
  bool final_at_exit_left_out = false;
};

// `series`: the profiles, in any order (sorted by their start time here);
// at least 3, all at one rate. A last profile written after the programs
// ended is left out when 3 remain without it.
LeakReport find_leaks(std::vector<Recording> series, const RenderOptions& o);

std::string render_leak_table(const LeakReport& r, const RenderOptions& o, size_t files);
std::string render_leak_json(const LeakReport& r, const RenderOptions& o);
// The suspects as report --leaks writes them in format `f` (`files` the
// series' profiles): Top the table, Json; another format fails.
Result<std::string> render_leaks(const LeakReport& r, Format f, const RenderOptions& o, size_t files);

}  // namespace allocscope
