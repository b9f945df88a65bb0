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

}  // namespace allocscope
