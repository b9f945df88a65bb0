// The agent's own cost, for /metrics.
#pragma once

#include <cstdint>

namespace allocscope {

struct SelfUsage {
  double cpu_seconds = 0;  // user + system, all threads
  uint64_t resident_bytes = 0;
};
SelfUsage self_usage();

}  // namespace allocscope
