#include "record/view/live_top.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "base/clocks.h"
#include "output/text_format.h"

namespace allocscope {
namespace {

constexpr size_t kRows = 10;  // per table, where the screen's height is not known

// A terminal's {rows, columns}; {0, 0} when `out` is none.
std::pair<size_t, size_t> screen_size(FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) != 0) return {0, 0};
  return {ws.ws_row, ws.ws_col};
}

std::string table(const Recording& r, RenderOptions o, Metric m, size_t rows) {
  o.metric = m;
  o.top = rows;
  auto text = render(r, Format::Top, o);
  return text ? *text : "(" + text.error().message + ")\n";
}

}  // namespace

// Two tables of a heading, a title line and the rows each, the top line, two
// blank lines and the cursor's.
size_t rows_within(size_t height) {
  if (height == 0) return kRows;
  return height > 10 ? (height - 8) / 2 : 1;
}

std::string live_top_screen(const Recording& r, const RenderOptions& base, size_t rows, double elapsed_s) {
  char head[160];
  uint64_t samples = 0;
  for (const auto& [name, value] : r.counters)
    if (name == "samples") samples = value;
  std::snprintf(head, sizeof head, "allocscope --top: %.0f s, %llu samples; Ctrl-C ends the recording",
                elapsed_s, (unsigned long long)samples);
  return fit_width(head, base.width) + "\n\n" + table(r, base, Metric::InuseSpace, rows) + "\n" +
         table(r, base, Metric::AllocSpace, rows);
}

LiveTop::LiveTop(uint64_t every_ms, const RenderOptions& render, FILE* out)
    : every_ms_(every_ms),
      start_ms_(now_ms()),
      next_ms_(start_ms_ + every_ms),
      render_(render),
      out_(out),
      terminal_(isatty(fileno(out)) == 1) {}

void LiveTop::on_tick(LiveView& view) {
  uint64_t now = now_ms();
  if (!started_) {  // the first tick is the recording's start (the summary's clock too)
    started_ = true;
    start_ms_ = now;
    next_ms_ = now + every_ms_;
  }
  if (now < next_ms_) return;
  next_ms_ = now + every_ms_;
  Recording r = view.snapshot([](uint32_t, const ProcessInstance&) { return true; });
  r.counters = view.counters();
  r.duration_nanos = int64_t(now - start_ms_) * 1000000;  // the tables' headings: since the start
  // Fitted to the terminal as it is now (it may have been resized); a pipe
  // gets whole lines.
  auto [height, width] = terminal_ ? screen_size(out_) : std::pair<size_t, size_t>{0, 0};
  RenderOptions o = render_;
  o.width = width;
  std::string screen = live_top_screen(r, o, rows_within(height), double(now - start_ms_) / 1000);
  // A terminal is redrawn from its top left corner; a pipe or a file gets
  // one block after another.
  std::fputs(terminal_ ? "\x1b[H\x1b[2J" : "\n", out_);
  std::fputs(screen.c_str(), out_);
  std::fflush(out_);
}

}  // namespace allocscope
