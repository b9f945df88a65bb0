#include "output/table.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "base/units.h"
#include "model/estimate.h"
#include "output/text_format.h"

namespace allocscope {

namespace {

std::string stack_key(const std::vector<std::string>& names) {
  std::string key;
  for (size_t i = 1; i < names.size(); ++i) key += (i > 1 ? ";" : "") + names[i];
  return key;
}

// Rows of functions by name, each function's row found once, not once per
// frame of every stack: a recording of 40,000 Python stacks spent seconds
// comparing names.
class FunctionRows {
 public:
  explicit FunctionRows(const Recording& r) : r_(r), row_of_(r.functions.size(), kNone) {}

  void add(const RecSample& s, double v) {
    on_stack_.clear();
    size_t position = 0;  // leaf first: the allocator, then its direct caller
    for (uint32_t loc : s.locations)
      for (const RecLine& line : r_.locations[loc].lines) {
        if (position == 1) row(line.function).flat.merge(s.totals);
        if (position++ > 0) on_stack_.push_back(row_index(line.function));
      }
    std::sort(on_stack_.begin(), on_stack_.end());
    on_stack_.erase(std::unique(on_stack_.begin(), on_stack_.end()), on_stack_.end());
    for (uint32_t i : on_stack_) rows_[i].cum += v;
  }

  std::map<std::string, TableRow> take() {
    std::map<std::string, TableRow> out;
    for (TableRow& row : rows_) out.emplace(row.name, std::move(row));
    return out;
  }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t row_index(uint32_t function) {
    uint32_t& index = row_of_[function];
    if (index == kNone) {
      const std::string& name = r_.functions[function].name;
      auto [it, added] = by_name_.try_emplace(name, uint32_t(rows_.size()));
      if (added) rows_.push_back({name, {}, 0});
      index = it->second;
    }
    return index;
  }
  TableRow& row(uint32_t function) { return rows_[row_index(function)]; }

  const Recording& r_;
  std::vector<uint32_t> row_of_;  // by function index
  std::unordered_map<std::string_view, uint32_t> by_name_;
  std::vector<TableRow> rows_;
  std::vector<uint32_t> on_stack_;
};

std::map<std::string, TableRow> group(const Recording& r, const RenderOptions& o) {
  if (o.top_by == TopBy::Function) {
    FunctionRows rows(r);
    for (const RecSample& s : r.samples) rows.add(s, s.totals.value(o.metric));
    return rows.take();
  }
  std::map<std::string, TableRow> rows;
  if (o.top_by == TopBy::Code) {
    for (const RecSample& s : r.samples) {
      std::optional<uint32_t> f = code_function(r, s);
      if (!f) continue;
      TableRow& row = rows[r.functions[*f].name];
      row.flat.merge(s.totals);
      row.cum += s.totals.value(o.metric);
    }
    for (auto& [name, row] : rows) row.name = name;
    return rows;
  }
  for (const RecSample& s : r.samples) {
    std::vector<std::string> names = frame_names(r, s);
    TableRow& row = rows[o.top_by == TopBy::Stack ? stack_key(names) : names[0]];
    row.flat.merge(s.totals);
    row.cum += s.totals.value(o.metric);
  }
  for (auto& [name, row] : rows) row.name = name;
  return rows;
}

double long_lived_ns(const Recording& r, const RenderOptions& o) {
  return o.long_lived_share * double(r.duration_nanos);
}

}  // namespace

const char* row_kind(TopBy by) {
  return by == TopBy::Stack     ? "stack"
         : by == TopBy::Process ? "process"
         : by == TopBy::Code    ? "function (the innermost of the program's code: Python, Java, Go)"
                                : "function (as the allocator's direct caller)";
}

std::vector<TableRow> table_rows(const Recording& r, const RenderOptions& o) {
  auto grouped = group(r, o);
  std::vector<TableRow> rows;
  // A row with nothing of this metric of its own says nothing in a table
  // ranked by it: a site whose objects were all freed (under inuse), or a
  // caller of other functions (its cum is theirs), which padded the table
  // with rows of 0 B.
  for (auto& [name, row] : grouped)
    if (row.flat.value(o.metric) != 0) rows.push_back(std::move(row));
  double ll = long_lived_ns(r, o);
  auto key = [&](const TableRow& row) -> double {
    switch (o.sort) {
      case TopSort::Value:
        return row.flat.value(o.metric);
      case TopSort::Samples:
        return double(sampled_allocations(row.flat));
      case TopSort::Lifetime:
        return summarize_lifetimes(row.flat, ll).median_ns;
      case TopSort::Name:
        return 0;
    }
    return 0;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const TableRow& a, const TableRow& b) {
    if (o.sort == TopSort::Name) return a.name < b.name;
    double ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a.cum > b.cum;
  });
  if (rows.size() > o.top) rows.resize(o.top);
  return rows;
}

namespace {

// The top table's columns after the estimate, in the order shown; narrowed
// to a width, they go in `drop` order (the interval first), the estimate and
// the function stay.
struct TopColumn {
  const char* title;
  int width;
  bool left;  // aligned left (the interval)
  int drop;   // 1: dropped first
};
constexpr TopColumn kTopColumns[] = {
    {"interval", 25, true, 1},  {"share", 7, false, 7}, {"cum", 11, false, 2}, {"samples", 8, false, 6},
    {"lifetime", 10, false, 3}, {"live", 6, false, 5},  {"long", 6, false, 4}};
constexpr size_t kTopColumnCount = std::size(kTopColumns);
constexpr int kEstimateWidth = 11, kMinFunctionWidth = 24;

// Which columns fit in `width` (0: all) beside the estimate and a function
// name of at least kMinFunctionWidth.
std::array<bool, kTopColumnCount> columns_within(size_t width) {
  std::array<bool, kTopColumnCount> shown;
  shown.fill(true);
  if (width == 0) return shown;
  auto used = [&] {
    int n = kEstimateWidth + 2;
    for (size_t i = 0; i < kTopColumnCount; ++i)
      if (shown[i]) n += kTopColumns[i].width + 1;
    return n + 1;
  };
  for (int drop = 1; drop <= int(kTopColumnCount) && used() + kMinFunctionWidth > int(width); ++drop)
    for (size_t i = 0; i < kTopColumnCount; ++i)
      if (kTopColumns[i].drop == drop) shown[i] = false;
  return shown;
}

std::string table_line(const std::string& estimate, const std::array<std::string, kTopColumnCount>& cells,
                       const std::array<bool, kTopColumnCount>& shown, const std::string& name,
                       size_t width) {
  char cell[64];
  std::snprintf(cell, sizeof cell, "%*s  ", kEstimateWidth, estimate.c_str());
  std::string line = cell;
  for (size_t i = 0; i < kTopColumnCount; ++i) {
    if (!shown[i]) continue;
    std::snprintf(cell, sizeof cell, kTopColumns[i].left ? "%-*s " : "%*s ", kTopColumns[i].width,
                  cells[i].c_str());
    line += cell;
  }
  line += " " + name;
  return fit_width(line, width) + "\n";
}

}  // namespace

std::string render_table(const Recording& r, const RenderOptions& o) {
  double total = 0;
  for (const RecSample& s : r.samples) total += s.totals.value(o.metric);
  double ll = long_lived_ns(r, o);
  std::ostringstream heading;
  heading << metric_name(o.metric) << ": " << describe(r, o.metric) << "; " << o.confidence * 100
          << "% intervals; long-lived: alive > " << format_duration_ns(ll);
  std::string out = fit_width(heading.str(), o.width) + "\n";
  auto shown = columns_within(o.width);
  std::array<std::string, kTopColumnCount> titles;
  for (size_t i = 0; i < kTopColumnCount; ++i) titles[i] = kTopColumns[i].title;
  out += table_line("estimate", titles, shown, row_kind(o.top_by), o.width);
  Loss loss = loss_of(r);
  for (const TableRow& row : table_rows(r, o)) {
    Estimate e = estimate(row.flat, o.metric, r.rate, o.confidence, loss);
    LifetimeSummary l = summarize_lifetimes(row.flat, ll);
    const IntervalStats& st = row.flat.stats(o.metric);
    // A row without samples of its own (a caller of other functions) has no
    // estimate to bound.
    std::string interval = st.samples + st.exact_objects == 0 && !loss.any()
                               ? "-"
                               : "[" + format_amount(e.interval.lo, o.metric) + "; " +
                                     format_amount(e.interval.hi, o.metric) + "]";
    // No lifetime evidence (a peak profile keeps none): "-", not 0 %.
    bool aged = l.freed + row.flat.live_ages.count() > 0;
    auto share = [&](double s) { return aged ? std::to_string(int(std::lround(100 * s))) + "%" : "-"; };
    char percent[16];
    std::snprintf(percent, sizeof percent, "%.2f%%", total > 0 ? 100 * e.value / total : 0.0);
    std::array<std::string, kTopColumnCount> cells = {
        interval,
        percent,
        format_amount(row.cum != 0 ? row.cum : e.value, o.metric),
        std::to_string(sampled_allocations(row.flat)),
        l.freed ? format_duration_ns(l.median_ns) : "-",
        share(l.live_share),
        share(l.long_lived_share)};
    out += table_line(format_amount(e.value, o.metric), cells, shown, printable(row.name), o.width);
  }
  return out;
}

}  // namespace allocscope
