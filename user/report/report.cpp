#include "report/report.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "base/pattern.h"
#include "base/units.h"
#include "host/files.h"
#include "output/diff.h"
#include "output/leaks.h"
#include "output/pprof.h"
#include "output/timeline.h"

namespace allocscope {
namespace {

// A profile larger than this, compressed, is refused before it is read
// (the decoder bounds what it inflates to the same).
constexpr size_t kMaxInputBytes = size_t{256} << 20;

Result<Recording> load(const std::string& path) {
  auto bytes = read_regular_file(path, kMaxInputBytes);
  if (!bytes) return fail(bytes.error());
  auto r = decode_pprof(*bytes);
  if (!r) return fail(path + ": " + r.error().message, r.error().code);
  return r;
}

Result<SampleFilter> make_filter(const ReportConfig& c) {
  SampleFilter f;
  f.pid = c.pid;
  for (auto [text, pattern] : {std::pair{&c.comm, &f.comm}, {&c.focus, &f.focus}, {&c.ignore, &f.ignore}}) {
    if (text->empty()) continue;
    auto compiled = Pattern::compile(*text);
    if (!compiled) return fail(compiled.error());
    pattern->emplace(std::move(*compiled));
  }
  return f;
}

// --leaks: the series, filtered; one rate throughout.
Result<void> run_leaks(const ReportConfig& c, const SampleFilter& filter) {
  std::vector<Recording> series;
  for (const std::string& path : c.inputs) {
    auto r = load(path);
    if (!r) return fail(r.error());
    if (!series.empty() && r->rate != series.front().rate)
      return fail(path + ": recorded at another rate than " + c.inputs.front() +
                  ": --leaks reads the interval profiles of one recording");
    series.push_back(filter_samples(*r, filter));
  }
  // Unrelated recordings would read as growth and shrinkage (kept -233 %).
  std::vector<size_t> order = end_order(series);
  std::vector<Recording> sorted;
  for (size_t i : order) sorted.push_back(std::move(series[i]));
  size_t at = 0, profiles = sorted.size();
  if (std::string why = series_break(sorted, &at); !why.empty())
    return fail(c.inputs[order[at]] + " " + why + " (" + c.inputs[order[at - 1]] +
                    "): --leaks reads one recording's interval profiles (record --interval) or the agent's "
                    "/heap fetched over time",
                EINVAL);
  LeakReport leaks = find_leaks(std::move(sorted), c.render);
  return write_outputs(c.outputs, [&](Format f) { return render_leaks(leaks, f, c.render, profiles); });
}

// --timeline: the series charted, a point at the end of each profile.
Result<void> run_timeline(const ReportConfig& c, const SampleFilter& filter) {
  std::vector<Recording> series;
  for (const std::string& path : c.inputs) {
    auto r = load(path);
    if (!r) return fail(r.error());
    series.push_back(filter_samples(*r, filter));
  }
  std::vector<TimelineStack> stacks;
  uint64_t rate = series.front().rate;
  Timeline tl = timeline_of_series(std::move(series), stacks, c.render.lines);
  TimelineOptions o;
  o.subtitle = std::to_string(c.inputs.size()) + " profiles, " +
               (rate <= 1 ? std::string("exact (--rate 1)") : "rate " + format_bytes(double(rate)));
  std::optional<unsigned> mode = c.outputs.empty() ? std::nullopt : c.outputs.front().mode;
  return write_file_atomically(c.timeline, render_timeline(tl, stacks, o), mode);
}

// The filters as the command line gave them, for a message.
std::string filters_text(const ReportConfig& c) {
  std::string s;
  auto add = [&](const std::string& option, const std::string& value) {
    if (!value.empty()) s += (s.empty() ? "" : " ") + option + " '" + value + "'";
  };
  if (c.pid) s += "--pid " + std::to_string(*c.pid);
  add("--comm", c.comm);
  add("--focus", c.focus);
  add("--ignore", c.ignore);
  return s;
}

// What a report of `shown` would not say by itself: that nothing matched
// its filters, or that its metric was never recorded.
Result<void> check_shown(const ReportConfig& c, const Recording& all, const Recording& shown, Metric m) {
  bool inuse = m == Metric::InuseSpace || m == Metric::InuseObjects;
  for (const auto& [name, value] : all.paths)
    if (inuse && name == "frees" && value == kFreesNotProbed)
      return fail(c.inputs.front() +
                      ": recorded with --no-free: frees were not probed, so it has no in-use "
                      "figures (try --metric alloc_space)",
                  EINVAL);
  if (all.samples.empty()) {  // what it is: said, and written as it is
    std::fprintf(stderr, "allocscope: note: %s holds no samples\n", c.inputs.front().c_str());
    return {};
  }
  if (shown.samples.empty())
    return fail("nothing matches " + filters_text(c) + " among the " + std::to_string(all.samples.size()) +
                    " stacks of " + c.inputs.front(),
                ENODATA);
  return {};
}

Result<void> run(const ReportConfig& c) {
  auto filter = make_filter(c);
  if (!filter) return fail(filter.error());
  if (c.leaks) return run_leaks(c, *filter);
  if (!c.timeline.empty()) return run_timeline(c, *filter);
  auto now = load(c.inputs.front());
  if (!now) return fail(now.error());
  RenderOptions o = c.render;
  o.metric = c.metric.value_or(now->default_metric);
  Recording shown = filter_samples(*now, *filter);
  if (auto ok = check_shown(c, *now, shown, o.metric); !ok) return ok;
  if (c.diff_base.empty()) return write_outputs(shown, c.outputs, o);
  auto base = load(c.diff_base);
  if (!base) return fail(base.error());
  Recording base_shown = filter_samples(*base, *filter);
  return write_outputs(c.outputs, [&](Format f) { return render_diff(base_shown, shown, f, o); });
}

// The files a report wrote (not standard output, nor a device), as record
// names its own.
void print_written(const ReportConfig& c) {
  std::string files;
  auto add = [&files](const std::string& path) {
    struct stat st;
    if (path != "-" && !path.starts_with("/dev/") && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      files += (files.empty() ? "" : ", ") + path;
  };
  if (!c.timeline.empty())
    add(c.timeline);
  else
    for (const OutputSpec& o : c.outputs) add(o.path);
  if (!files.empty()) std::fprintf(stderr, "allocscope: wrote %s\n", files.c_str());
}

}  // namespace

int report(const ReportConfig& config) {
  if (config.timeline.empty())
    for (const OutputSpec& o : config.outputs)
      if (std::string note = unnamed_format_note(o); !note.empty())
        std::fprintf(stderr, "allocscope: note: %s\n", note.c_str());
  if (auto ok = run(config); !ok) {
    // A reader that had enough (report ... | head): done, quietly.
    if (ok.error().code == EPIPE && ok.error().message.starts_with("write standard output")) return 0;
    std::fprintf(stderr, "allocscope: %s\n", ok.error().message.c_str());
    return 1;
  }
  print_written(config);
  return 0;
}

}  // namespace allocscope
