// Advice a recording gives about itself. Pure logic.
#pragma once

#include <cstdint>
#include <string>

namespace allocscope {

// Below this many samples a recording's figures say little.
constexpr uint64_t kFewSamples = 30;

// What to say of a recording of `samples` samples at mean interval `rate`
// bytes (1: exact), with `allocated` bytes estimated: "" when it has
// enough. Suggests a rate that would have taken about a thousand samples
// of the same allocations, or exact mode when none were seen.
std::string few_samples_hint(uint64_t samples, uint64_t rate, double allocated);

// What the probes cost the traced programs: `traps` runs of them, each a
// trap of about trap_ns (allocscope check's figure; 0: not timed). "" when
// nothing trapped.
std::string trap_cost_line(uint64_t traps, double trap_ns);

// Whether that cost is worth a line of the summary: 1 % of the recording's
// `elapsed_ns` or more (a launched command's sampled traps are not).
bool trap_cost_matters(uint64_t traps, double trap_ns, uint64_t elapsed_ns);

}  // namespace allocscope
