// Profile (raw instruction pointers per process) + Symbolizer -> Recording
// (mappings, locations, functions, samples), the model outputs are written from.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "profile.h"
#include "recording.h"
#include "symbolizer.h"

namespace allocscope {

struct RecordingMeta {
  uint64_t rate = 0;
  int64_t time_nanos = 0, duration_nanos = 0;
  Metric metric = Metric::AllocSpace;
  std::vector<std::pair<std::string, uint64_t>> counters;
  uint64_t now_ns = 0;  // CLOCK_MONOTONIC at the snapshot: live samples' ages
};

// A stack frame value marking where an unwind stopped short: its root.
inline constexpr uint64_t kTruncatedFrame = 0;

// Runtime address of allocator entry point `fn` in process `pid`, 0 if unknown.
using AllocatorAddress = std::function<uint64_t(uint32_t pid, int fn)>;

Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const AllocatorAddress& allocator_address);

}  // namespace allocscope
