// Two recordings compared: per stack, function or process, the change
// NEW - BASE with its interval and a verdict only where the change is beyond
// sampling noise (stats/difference.h), with Holm's correction over every
// group compared. Written as a table, JSON or a differential flame graph
// coloured by the significant changes alone. Pure logic.
#pragma once

#include <string>
#include <vector>

#include "model/recording.h"
#include "output/render.h"
#include "stats/difference.h"

namespace allocscope {

struct DiffRow {
  std::string name;
  Difference d;
  double p_adjusted = 1;  // Holm, over every row compared
  int verdict = 0;        // +1 grew, -1 shrank, 0 not beyond sampling noise
};

struct DiffTable {
  std::vector<DiffRow> rows;  // verdicts first, then by the size of the change; all of them
  size_t changed = 0;         // rows with a verdict
  std::string unit;           // "" or "/s" (o.per_second)
  std::string joined;         // see joined_program; "" when the names are compared as they are
};

// Two recordings of one program each, under different names (two builds,
// app-v1 and app-v2): "app-v1 -> app-v2", the process frame both sides'
// stacks are compared under; "" when either holds several programs or the
// names are the same.
std::string joined_program(const Recording& base, const Recording& now);

// Rows grouped by o.top_by (processes by name: pids differ between runs;
// functions as the allocator's direct caller), at o.confidence.
DiffTable diff_table(const Recording& base, const Recording& now, const RenderOptions& o);

std::string render_diff_table(const Recording& base, const Recording& now, const RenderOptions& o);
std::string render_diff_json(const Recording& base, const Recording& now, const RenderOptions& o);

// A differential flame graph: NEW's frames, coloured by the change of the
// stacks whose change is beyond sampling noise.
std::string render_diff_svg(const Recording& base, const Recording& now, const RenderOptions& o);
// The comparison as report --diff writes it in format `f`: Top the table,
// Json, Svg the flame graph; another format fails.
Result<std::string> render_diff(const Recording& base, const Recording& now, Format f,
                                const RenderOptions& o);

}  // namespace allocscope
