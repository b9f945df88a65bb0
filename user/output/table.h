// The top table `allocscope report` prints, and its JSON twin: stacks,
// functions or processes ranked by a metric, each with its estimate, the
// interval around it, share, samples and object lifetimes. Pure logic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/recording.h"
#include "output/render.h"

namespace allocscope {

struct TableRow {
  std::string name;
  StackTotals flat;  // stacks whose row this is (functions: as the allocator's direct caller)
  double cum = 0;    // functions: every stack the function is on
};

// Rows with something of o.metric of their own, grouped by o.top_by,
// sorted by o.sort, at most o.top.
std::vector<TableRow> table_rows(const Recording& r, const RenderOptions& o);

std::string render_table(const Recording& r, const RenderOptions& o);

// What a row of a table is, for its header: "function (as the allocator's
// direct caller)", "stack" or "process".
const char* row_kind(TopBy by);

}  // namespace allocscope
