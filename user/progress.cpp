#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace allocscope {

std::string progress_line(const ProgressFigures& f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "allocscope: %.0f s, %llu process%s, %llu samples, %llu dropped", f.elapsed_s,
                (unsigned long long)f.processes, f.processes == 1 ? "" : "es", (unsigned long long)f.samples,
                (unsigned long long)f.drops);
  return buf;
}

ProgressReporter::ProgressReporter(bool enabled, FILE* out, double plain_every_s)
    : enabled_(enabled), out_(out), tty_(isatty(fileno(out))), plain_every_s_(plain_every_s) {}

void ProgressReporter::update(const ProgressFigures& f) {
  if (!enabled_)
    return;
  if (tty_) {
    if (f.elapsed_s - last_s_ < 1 && drawn_)
      return;
    std::fprintf(out_, "\r%s\033[K", progress_line(f).c_str());
    drawn_ = true;
  } else {
    if (f.elapsed_s - last_s_ < plain_every_s_)
      return;
    std::fprintf(out_, "%s\n", progress_line(f).c_str());
  }
  last_s_ = f.elapsed_s;
}

void ProgressReporter::finish() {
  if (drawn_)
    std::fputc('\n', out_);
  drawn_ = false;
}

}  // namespace allocscope
