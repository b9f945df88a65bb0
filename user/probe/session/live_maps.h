// The kernel's live samples (the live map, and the live filter that tells
// its programs which addresses may be in it) and exact mode's totals per
// stack: the session's handle over those maps.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "allocscope.h"
#include "base/result.h"

namespace allocscope {

class LiveMaps {
 public:
  struct Fds {
    int live = -1, exact_totals = -1;
    int sweep_program = -1;  // -1: not loaded (no live entries: --no-free)
  };
  // `filter`: the live filter, mapped (the session keeps the mapping).
  LiveMaps(Fds fds, uint8_t* filter) : fds_(fds), filter_(filter) {}

  // Forgets live samples the kernel still tracks (their process is gone).
  void forget(uint32_t tgid, std::span<const uint64_t> addrs);
  void forget(std::span<const as_live_key> keys);
  // Every live entry the kernel holds (exact mode reads ages).
  std::vector<std::pair<as_live_key, as_live_value>> entries() const;
  // Exact mode: deletes, in the kernel, the live entries whose stacks'
  // totals were forgotten (forget_exact); the entries it deleted.
  Result<uint64_t> sweep();

  // Exact mode: the kernel's totals per stack id; and forgetting some.
  std::vector<std::pair<uint64_t, as_exact_totals>> exact_totals() const;
  std::vector<std::pair<uint64_t, as_exact_totals>> exact_totals(std::span<const uint64_t> ids) const;
  void forget_exact(std::span<const uint64_t> ids);

 private:
  Fds fds_;
  uint8_t* filter_;
};

}  // namespace allocscope
