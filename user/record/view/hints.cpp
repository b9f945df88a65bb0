#include "record/view/hints.h"

#include <cstdio>

#include "base/units.h"
#include "output/text_format.h"

namespace allocscope {
namespace {

// A power of two as --rate takes it: 512, 4KiB, 2MiB, 1GiB.
std::string rate_option(uint64_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes);
}

}  // namespace

std::string few_samples_hint(uint64_t samples, uint64_t rate, double allocated) {
  if (samples >= kFewSamples) return "";
  std::string head = "only " + std::to_string(samples) + (samples == 1 ? " sample" : " samples");
  if (rate <= 1)
    return head +
           ": the program allocated little through the allocators allocscope probes (see `allocscope "
           "check`, and the warnings above)";
  // A thousand samples of the same bytes: the rate a power of two, at
  // least 64 bytes; below that, exact mode costs about the same.
  double want = allocated / 1000;
  uint64_t suggested = 1;
  while (suggested * 2 <= want && suggested < rate) suggested *= 2;
  std::string how = samples == 0 || suggested < 64
                        ? "--rate 1 (every allocation: exact, fine for a short command)"
                        : "--rate " + rate_option(suggested) + " (about a thousand samples) or --rate 1";
  return head + " at rate " + format_bytes(double(rate)) + ": too few to say much; record again with " + how;
}

namespace {

// "812", "41.2 k", "3.1 M", "2.0 G".
std::string count_words(uint64_t n) {
  if (n < 10000) return std::to_string(n);
  const char* units[] = {"k", "M", "G", "T"};
  double v = double(n);
  int u = -1;
  while (v >= 1000 && u < 3) v /= 1000, ++u;
  char s[32];
  std::snprintf(s, sizeof s, "%.1f %s", v, units[u]);
  return s;
}

}  // namespace

std::string trap_cost_line(uint64_t traps, double trap_ns) {
  if (!traps) return "";
  std::string line = "the probes trapped " + count_words(traps) + (traps == 1 ? " time" : " times");
  if (trap_ns <= 0) return line;
  char each[48];
  std::snprintf(each, sizeof each, "%.1f us", trap_ns / 1e3);
  return line + ", about " + each + " each here (allocscope check): about " +
         format_duration_ns(double(traps) * trap_ns) + " of the traced programs' time";
}

bool trap_cost_matters(uint64_t traps, double trap_ns, uint64_t elapsed_ns) {
  return traps && trap_ns > 0 && double(traps) * trap_ns >= 0.01 * double(elapsed_ns);
}

}  // namespace allocscope
