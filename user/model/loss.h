// What a recording knows it missed, from its counters: how far its totals
// (and so any one stack's) may be from what it would show had nothing been
// lost. Samples lost whole leave the alloc and inuse totals low; frees that
// were not seen leave inuse high. Pure logic.
#pragma once

#include <cstdint>

#include "model/recording.h"

namespace allocscope {

struct Loss {
  uint64_t samples = 0;  // samples (exact mode: allocations) counted nowhere
  // Upper bounds: the totals may be low (or high) by at most this much.
  double alloc_low_bytes = 0, alloc_low_objects = 0;
  double inuse_low_bytes = 0, inuse_low_objects = 0;
  double inuse_high_bytes = 0, inuse_high_objects = 0;

  bool any() const { return samples || inuse_low_bytes > 0 || inuse_high_bytes > 0; }
  double low(Metric m) const;   // the truth may be above the value by this much
  double high(Metric m) const;  // ... or below it by this much
};

Loss loss_of(const Recording& r);

// "12 samples lost: alloc_space low by up to 6.1 MiB", "" when nothing was lost.
std::string describe_loss(const Recording& r, Metric m);

}  // namespace allocscope
