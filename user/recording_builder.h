// Profile (raw instruction pointers per process) + Symbolizer -> Recording
// (mappings, locations, functions, samples), the model outputs are written from.
#pragma once

#include <cstdint>
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

// Where a profile stack came from, known when it was first sampled.
struct StackOrigin {
  uint32_t pid = 0;          // the process id shown; 0 merges processes by name
  std::string comm;          // the process's name when sampled
  std::vector<uint32_t> mappings;  // Symbolizer::resolve() of the stack's ips
  uint64_t allocator_addr = 0;     // runtime address of the allocator called, 0 if unknown
  uint32_t allocator_mapping = Symbolizer::kNoMapping;
};

// origins[i] describes profile.stacks()[i].
Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins);

}  // namespace allocscope
