// The per-stack numbers beyond pprof's values that allocscope saves in each
// sample's numeric labels (keys "as.*"), so that a saved recording rebuilds
// intervals and lifetimes: interval accumulators, lifetime and age
// histograms. Doubles travel bit for bit (num_unit "f64bits").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/profile.h"

namespace allocscope {

struct NumLabel {
  std::string key;
  int64_t num;
  const char* unit;  // "" or "f64bits"
};

std::vector<NumLabel> extra_labels(const StackTotals& t);

// Applies one label; false when the key is not one of ours.
bool apply_extra_label(std::string_view key, int64_t num, StackTotals& t);

}  // namespace allocscope
