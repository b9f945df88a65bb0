// record --top: the top functions by live and by allocated bytes, redrawn on
// the terminal every interval while the recording runs (what bcc's memleak
// users expect), or printed as plain blocks when stdout is not a terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "model/recording.h"
#include "output/render.h"
#include "record/live_view.h"

namespace allocscope {

// One screen of the view: a heading, then the top `rows` functions by live
// bytes and by allocated bytes. Pure: the tables are output/table's.
std::string live_top_screen(const Recording& r, const RenderOptions& base, size_t rows, double elapsed_s);

// Rows per table that fit a screen of `height` lines (0: not a terminal, 10).
size_t rows_within(size_t height);

class LiveTop : public RecordObserver {
 public:
  // `every_ms`: how often; `out`: where (its being a terminal decides how).
  LiveTop(uint64_t every_ms, const RenderOptions& render, FILE* out = stdout);
  void on_tick(LiveView& view) override;

 private:
  uint64_t every_ms_, start_ms_, next_ms_;
  bool started_ = false;
  RenderOptions render_;
  FILE* out_;
  bool terminal_;
};

}  // namespace allocscope
