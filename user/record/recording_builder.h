// Profile (raw instruction pointers per process) + Symbolizer -> Recording
// (mappings, locations, functions, samples), the model outputs are written from.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/profile.h"
#include "model/recording.h"
#include "symbols/symbolizer.h"

namespace allocscope {

struct RecordingMeta {
  uint64_t rate = 0;
  int64_t time_nanos = 0, duration_nanos = 0;
  Metric metric = Metric::AllocSpace;
  std::vector<std::pair<std::string, uint64_t>> counters;
  uint64_t now_ns = 0;  // CLOCK_MONOTONIC at the snapshot: live samples' ages
};

// origins[i] describes profile.stacks()[i].
Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins);

}  // namespace allocscope
