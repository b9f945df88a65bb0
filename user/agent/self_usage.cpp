#include "agent/self_usage.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace allocscope {

SelfUsage self_usage() {
  SelfUsage u;
  rusage r{};
  if (getrusage(RUSAGE_SELF, &r) == 0)
    u.cpu_seconds =
        double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  // statm's second field: resident pages.
  if (FILE* f = std::fopen("/proc/self/statm", "re")) {
    unsigned long size = 0, resident = 0;
    if (std::fscanf(f, "%lu %lu", &size, &resident) == 2)
      u.resident_bytes = uint64_t(resident) * sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  return u;
}

}  // namespace allocscope
