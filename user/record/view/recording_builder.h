// Profile (raw instruction pointers per process) + Symbolizer -> Recording
// (mappings, locations, functions, samples), the model outputs are written from.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/profile.h"
#include "model/recording.h"
#include "symbols/symbolizer.h"

namespace allocscope {

// The number every profile of one recording carries (its counter
// "recording_id"), so that a series of them is told from profiles of others
// made as close in time (report --leaks). Random, never 0.
uint64_t new_recording_id();

struct RecordingMeta {
  uint64_t rate = 0;
  int64_t time_nanos = 0, duration_nanos = 0;
  Metric metric = Metric::AllocSpace;
  std::vector<std::pair<std::string, uint64_t>> counters;
  uint64_t now_ns = 0;  // CLOCK_MONOTONIC at the snapshot: live samples' ages
  std::vector<std::pair<std::string, std::string>> paths;  // Recording::paths
};

// Part of a profile: the stacks to show and, for a delta, what each had
// allocated at the window's start (stacks absent from it are new).
struct StackChoice {
  std::vector<uint32_t> stacks;  // indices into profile.stacks(), ascending
  const std::unordered_map<uint64_t, WindowBase>* baseline = nullptr;  // by StackRecord::serial
};

// origins[i] describes profile.stacks()[i]. Without a choice, every stack.
// A delta leaves out the stacks with nothing allocated in the window and
// nothing live.
Recording build_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                          const std::vector<StackOrigin>& origins, const StackChoice* choice = nullptr);

// The in-use profile at the peak of the live estimate (Profile::keep_peak):
// live sides only, nothing allocated.
Recording build_peak_recording(const Profile& profile, Symbolizer& symbolizer, const RecordingMeta& meta,
                               const std::vector<StackOrigin>& origins);

}  // namespace allocscope
