// The clocks a recording reads: CLOCK_MONOTONIC for deadlines and for
// comparing with the kernel's timestamps, CLOCK_REALTIME for the profile's date.
#pragma once

#include <time.h>

#include <cstdint>

namespace allocscope {

inline uint64_t now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

inline uint64_t monotonic_ns() {  // the clock of bpf_ktime_get_ns
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
}

inline int64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// A kernel CLOCK_MONOTONIC time (a task's start_time, say) on the wall clock.
inline int64_t wall_of_monotonic_ns(uint64_t ns) { return wall_ns() - int64_t(monotonic_ns() - ns); }

}  // namespace allocscope
