#include "record/view/progress.h"

#include <unistd.h>

#include <cstdio>

namespace allocscope {

std::string samples_from(uint64_t samples, uint64_t processes) {
  std::string text = std::to_string(samples) + (samples == 1 ? " sample" : " samples");
  if (processes) text += " from " + std::to_string(processes) + (processes == 1 ? " process" : " processes");
  return text;
}

std::string progress_line(const ProgressFigures& f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "allocscope: %.0f s, %s, %llu dropped", f.elapsed_s,
                samples_from(f.samples, f.processes).c_str(), (unsigned long long)f.drops);
  return buf;
}

ProgressReporter::ProgressReporter(bool enabled, FILE* out, double plain_every_s)
    : enabled_(enabled), out_(out), tty_(isatty(fileno(out))), plain_every_s_(plain_every_s) {}

bool ProgressReporter::due(double elapsed_s) const {
  return enabled_ && (elapsed_s - last_s_ >= (tty_ ? 1 : plain_every_s_) || (tty_ && !drawn_));
}

void ProgressReporter::update(const ProgressFigures& f) {
  if (!due(f.elapsed_s)) return;
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K", progress_line(f).c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", progress_line(f).c_str());
  }
  last_s_ = f.elapsed_s;
}

void ProgressReporter::finish() {
  if (drawn_) std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace allocscope
