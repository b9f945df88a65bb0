// What pprof's encoder and decoder agree on: the value columns, their names,
// and how estimates become the integers profile.proto holds. Internal to output/.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "base/units.h"
#include "model/recording.h"
#include "profile.pb.h"

namespace allocscope::pprof_columns {

namespace pb = perftools::profiles;

// The value columns, in the order encode_pprof writes them.
enum Column : size_t { AllocObjects, AllocSpace, InuseObjects, InuseSpace, Samples, LiveSamples, kColumns };

struct ColumnType {
  const char* type;
  const char* unit;
};
constexpr std::array<ColumnType, kColumns> kColumnTypes = {{{"alloc_objects", "count"},
                                                            {"alloc_space", "bytes"},
                                                            {"inuse_objects", "count"},
                                                            {"inuse_space", "bytes"},
                                                            {"samples", "count"},
                                                            {"live_samples", "count"}}};

inline int64_t count_value(uint64_t n) {
  return n > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(n);
}

inline std::array<int64_t, kColumns> column_values(const StackTotals& t) {
  return {
      round_saturating(t.alloc_objects), round_saturating(t.alloc_bytes), round_saturating(t.live_objects),
      round_saturating(t.live_bytes),    count_value(t.samples),          count_value(t.live_samples)};
}

}  // namespace allocscope::pprof_columns
