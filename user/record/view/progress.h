// The one-line progress report on stderr while recording.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace allocscope {

struct ProgressFigures {
  double elapsed_s = 0;
  uint64_t processes = 0;  // process instances with samples
  uint64_t samples = 0;
  uint64_t drops = 0;  // samples lost for any cause
};

std::string progress_line(const ProgressFigures& f);
// "1234 samples from 35 processes"; "0 samples" (a process recorded but
// quiet is not "0 processes").
std::string samples_from(uint64_t samples, uint64_t processes);

// Rewrites one line in place on a terminal; elsewhere (a log file) prints a
// plain line every `plain_every_s`.
class ProgressReporter {
 public:
  explicit ProgressReporter(bool enabled, FILE* out = stderr, double plain_every_s = 10);
  // Whether update() would print now (figures cost system calls to gather).
  bool due(double elapsed_s) const;
  void update(const ProgressFigures& f);
  void finish();  // ends the in-place line before other output

 private:
  bool enabled_;
  FILE* out_;
  bool tty_;
  double plain_every_s_, last_s_ = 0;
  bool drawn_ = false;
};

}  // namespace allocscope
